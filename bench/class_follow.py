"""A class follows the teacher through the Lesson: what "follow" costs the server, and how soon a
new step reaches every learner.

N learner sessions (Streamlit's own protocol, bench.live_server.Session) open the Lesson page
and keep it open as a browser tab does: each reruns every fragment whenever the server's timer
says (the sidebar's heartbeat, and in a class the poll of the teacher's step). Three stretches,
one after the other on one server:

    alone     the N sessions on the Lesson with no class: the sidebar's heartbeat only;
    follow    the same N sessions in a class whose teacher leads, on a step that does not change;
    moves     the teacher presses Next --moves times; for each, the seconds until every follower
              has drawn the new step (its address says ?lesson=N), p50 and max.

For alone and follow: the server's CPU seconds per minute, and the fragment reruns the sessions
sent. The difference is what following an unchanged step costs.

`--board` asks the same of a class board left open, in a real browser: one headless chromium, a
browser context per person (a teacher on a projector, N learners each with the Class board open),
times taken in the pages themselves (Date.now(): one machine, one clock) from the teacher's click
to the first moment each learner's page shows:

    lead    "Lead the lesson from step 1", learners who follow (the default): their board gives way
            to the Lesson page (board), and the Lesson has drawn step 1 (step);
    next    "Next →", the same learners with "Follow the teacher" off, back on their board: its line
            says the class is on step 2.

Each delay, then p50 and max per measure. The goal (issue 58) is an open board that shows the
lesson within 5 s. It asserts nothing.

    python -m bench.class_follow --learners 40 --seconds 60 --moves 3
    python -m bench.class_follow --board --learners 10
"""
from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs

from streamlit.proto.WidgetStates_pb2 import WidgetState

from bench.common import EMPTY, print_header, print_table
from bench.live_server import CHROMIUM, CHROMIUM_ARGS, CONNECTED, LiveServer
from bench.session import Session


class Tab:
    """One learner's tab: the session, and a loop that reruns its fragments when they are due."""

    def __init__(self, url: str):
        self.session = Session(url)
        self.polls = 0
        self.seen: dict[int, float] = {}  # lesson step -> when the page first said it

    def step(self) -> int | None:
        found = parse_qs(self.session.address).get("lesson")
        return int(found[0]) if found else None

    async def keep_open(self, stop: asyncio.Event) -> None:
        s, due = self.session, {}
        while not stop.is_set():
            now = time.monotonic()
            for fragment, interval in list(s.auto.items()):
                # a new timer's first rerun is one interval away, as in a browser
                due.setdefault(fragment, now + interval)
            for fragment in [f for f, at in due.items() if at <= now]:
                if fragment not in s.auto:  # the server stopped that timer meanwhile
                    del due[fragment]
                    continue
                await s.rerun([], fragment=fragment)
                self.polls += 1
                if s.address:
                    s.query = s.address  # what the address bar holds now, as a browser sends it
                due[fragment] = time.monotonic() + s.auto.get(fragment, 2.0)
                step = self.step()
                if step is not None:
                    self.seen.setdefault(step, time.monotonic())
            await asyncio.sleep(0.02)


async def stretch(server: LiveServer, tabs: list[Tab], seconds: float) -> tuple[float, int]:
    """Keep every tab open for `seconds`: the server's CPU seconds spent and the fragment reruns sent."""
    stop = asyncio.Event()
    polls, cpu = sum(t.polls for t in tabs), server.cpu_seconds()
    loops = [asyncio.create_task(t.keep_open(stop)) for t in tabs]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*loops)
    return server.cpu_seconds() - cpu, sum(t.polls for t in tabs) - polls


async def teacher_leads(url: str) -> tuple[Session, str]:
    teacher = Session(url)
    await teacher.open("Board")
    await teacher.click("board_start")
    await teacher.rerun([WidgetState(id=teacher.widget("board_tab"), string_value="Lead the lesson")])
    await teacher.click("lead_start")
    code = parse_qs(teacher.address).get("class", [""])[0]
    if not code:
        raise RuntimeError(f"no class in the teacher's address: {teacher.address!r} {teacher.errors}")
    return teacher, code


async def play(url: str, args) -> list[list[str]]:
    rows = []
    tabs = [Tab(url) for _ in range(args.learners)]
    for tab in tabs:
        await tab.session.open("Lesson")
    cpu, polls = await stretch(server_of[url], tabs, args.seconds)
    rows.append(["alone: the Lesson, no class", f"{cpu / args.seconds * 60:.2f}", str(polls), EMPTY, EMPTY])
    for tab in tabs:
        await tab.session.close()

    teacher, code = await teacher_leads(url)
    tabs = [Tab(url) for _ in range(args.learners)]
    for tab in tabs:
        await tab.session.open("Lesson", f"class={code}")
    cpu, polls = await stretch(server_of[url], tabs, args.seconds)
    rows.append(["follow: the class on one step", f"{cpu / args.seconds * 60:.2f}", str(polls), EMPTY, EMPTY])

    arrivals = []
    for n in range(2, 2 + args.moves):
        stop = asyncio.Event()
        loops = [asyncio.create_task(t.keep_open(stop)) for t in tabs]
        pressed = time.monotonic()
        await teacher.click("lead_next")
        deadline = pressed + 60  # a follower later than this counts as never
        while time.monotonic() < deadline and not all(n in t.seen for t in tabs):
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.gather(*loops)
        arrivals.append([t.seen.get(n, float("inf")) - pressed for t in tabs])
    for n, seconds in enumerate(arrivals, start=2):
        late = [s for s in seconds if s != float("inf")]  # those who arrived; the rest are counted as never
        rows.append([f"moves: Next to step {n}", EMPTY, EMPTY, f"{statistics.median(late):.2f}" if late else EMPTY,
                     f"{max(seconds):.2f} ({len(seconds) - len(late)} never)"])
    for tab in tabs:
        await tab.session.close()
    await teacher.close()
    return rows


WAIT_MS = 180_000
DRAWN = ("() => { const app = document.querySelector('[data-testid=stApp]');"
         " return app && app.getAttribute('data-test-script-state') === 'notRunning'"
         " && !document.querySelector('[data-testid=stSkeleton]') && !document.querySelector('[data-stale=true]'); }")
# polled in a learner's page every 20 ms; the first time the check holds is written down
WATCH = """([check, name]) => { window[name] = null; const test = new Function('return (' + check + ')()');
  const timer = setInterval(() => { if (test()) { window[name] = Date.now(); clearInterval(timer); } }, 20); }"""
LEFT_BOARD = "() => location.pathname.endsWith('/Lesson')"
ON_STEP_1 = ("() => location.pathname.endsWith('/Lesson') && [...document.querySelectorAll('h2, h3')]"
             ".some(h => /^1\\. /.test(h.textContent))")
LINE_2 = "() => [...document.querySelectorAll('a')].some(a => a.textContent.includes('The class is on step 2 of'))"
PRESSED = """(name) => { window.__pressed = null; [...document.querySelectorAll('button')]
  .find(b => b.innerText.trim() === name).addEventListener('click', () => { window.__pressed = Date.now(); },
  {once: true}); }"""


def opened(browser, url: str, heading: str, viewport: dict):
    page = browser.new_context(viewport=viewport, locale="en-US").new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector(CONNECTED)
    page.get_by_role("heading", name=heading, level=1).wait_for()
    page.wait_for_function(DRAWN)
    return page


def button(page, name: str):
    return page.get_by_test_id("stMainBlockContainer").get_by_role("button", name=name, exact=True)


def press(teacher, name: str) -> float:
    """Press the teacher's button; when, by the page's clock."""
    teacher.evaluate(PRESSED, name)
    button(teacher, name).click()
    teacher.wait_for_function("() => window.__pressed !== null")
    return teacher.evaluate("window.__pressed")


def delays(start: float, pages, name: str) -> list[float]:
    for page in pages:
        page.wait_for_function(f"() => window.{name} !== null")
    return sorted((page.evaluate(f"window.{name}") - start) / 1000 for page in pages)


def report_delays(what: str, seconds: list[float]) -> None:
    print(f"{what}: p50 {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s over {len(seconds)} learners "
          f"({', '.join(f'{s:.2f}' for s in seconds)})", flush=True)


def board_lead(args) -> None:
    """--board: N learners with the Class board open in one headless chromium, a teacher on a projector."""
    from playwright.sync_api import sync_playwright  # only --board needs a browser

    laptop, projector = {"width": 1280, "height": 900}, {"width": 1920, "height": 1080}  # the board drawn at each size
    with tempfile.TemporaryDirectory() as folder, \
            LiveServer({"OMP_NUM_THREADS": "1", "MINIGPT_DATA_DIR": folder},
                       log=Path(folder) / "server.log") as server, \
            sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        teacher = opened(browser, f"{server.url}/Board?lang=en", "Class board", projector)
        button(teacher, "Start a class").click()
        heading = teacher.get_by_role("heading", name=re.compile(r"^Class [A-Z2-9]{4}$"))
        code = heading.inner_text().split()[-1]  # the class code from the board's heading
        learners = [opened(browser, f"{server.url}/Board?class={code}", "Class board", laptop)
                    for _ in range(args.learners)]
        teacher.get_by_role("tab", name="Lead the lesson").click()
        teacher.wait_for_function(DRAWN)
        for page in learners:
            page.evaluate(WATCH, [LEFT_BOARD, "__board"])  # armed before the click: the page notes the moment itself
            page.evaluate(WATCH, [ON_STEP_1, "__step"])
        start = press(teacher, "Lead the lesson from step 1")  # the teacher's page's clock: one machine, one clock
        report_delays("lead: a follower's open board gives way to the Lesson", delays(start, learners, "__board"))
        report_delays("lead: the Lesson has drawn step 1", delays(start, learners, "__step"))
        for page in learners:  # follow off, back to the board in the same session
            page.wait_for_function(DRAWN)
            page.get_by_text("Follow the teacher").click()
            page.get_by_text("switch on “Follow the teacher” to go there", exact=False).wait_for()
            page.get_by_test_id("stSidebar").get_by_role("link", name="Class board").click()
            page.get_by_role("link", name=re.compile("The class is on step 1 of the lesson")).wait_for()
            page.evaluate(WATCH, [LINE_2, "__line"])
        teacher.wait_for_function(DRAWN)
        start = press(teacher, "Next →")
        report_delays("next: an open board's line (not following) says step 2", delays(start, learners, "__line"))
        browser.close()


server_of: dict[str, LiveServer] = {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=60.0, help="each stretch's length")
    parser.add_argument("--moves", type=int, default=3)
    parser.add_argument("--board", action="store_true",
                        help="learners with the Class board open in a real browser, the teacher leading")
    args = parser.parse_args()
    if args.board:
        return board_lead(args)
    print_header("A class follows the teacher through the Lesson")
    print(f"{args.learners} learner sessions, {args.seconds:.0f} s a stretch")
    with LiveServer({"OMP_NUM_THREADS": "1"}) as server:
        server_of[server.url] = server
        rows = asyncio.run(play(server.url, args))
        server.stop()
    print_table(["stretch", "server CPU s per minute", "fragment reruns sent", "p50 s to the new step",
                 "max s"], rows)


if __name__ == "__main__":
    main()
