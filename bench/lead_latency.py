"""How soon an open class board learns that the teacher leads the lesson, over N learners.

One server, one headless chromium, a browser context per person (a teacher on a projector, N
learners each with the Class board open). The times are taken in the pages themselves
(Date.now(): one machine, one clock), from the teacher's click to the first moment each learner's
page shows:

  lead    "Lead the lesson from step 1", learners who follow (the default): their board gives way
          to the Lesson page (board), and the Lesson has drawn step 1 (step);
  next    "Next →", the same learners with "Follow the teacher" off, back on their board: its line
          says the class is on step 2.

    python -m bench.lead_latency --learners 10

Prints each delay, then p50 and max per measure. The goal (issue 58) is an open board that shows
the lesson within 5 s. It asserts nothing.
"""
from __future__ import annotations

import argparse
import re
import statistics
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from bench.live_server import CHROMIUM, CHROMIUM_ARGS, CONNECTED, LiveServer

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


def report(what: str, seconds: list[float]) -> None:
    print(f"{what}: p50 {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s over {len(seconds)} learners "
          f"({', '.join(f'{s:.2f}' for s in seconds)})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=10)
    args = parser.parse_args()
    laptop, projector = {"width": 1280, "height": 900}, {"width": 1920, "height": 1080}
    with tempfile.TemporaryDirectory() as folder, \
            LiveServer({"OMP_NUM_THREADS": "1", "MINIGPT_DATA_DIR": folder}, log=Path(folder) / "server.log") as server, \
            sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        teacher = opened(browser, f"{server.url}/Board?lang=en", "Class board", projector)
        button(teacher, "Start a class").click()
        heading = teacher.get_by_role("heading", name=re.compile(r"^Class [A-Z2-9]{4}$"))
        code = heading.inner_text().split()[-1]
        learners = [opened(browser, f"{server.url}/Board?class={code}", "Class board", laptop)
                    for _ in range(args.learners)]
        teacher.get_by_role("tab", name="Lead the lesson").click()
        teacher.wait_for_function(DRAWN)
        for page in learners:
            page.evaluate(WATCH, [LEFT_BOARD, "__board"])
            page.evaluate(WATCH, [ON_STEP_1, "__step"])
        start = press(teacher, "Lead the lesson from step 1")
        report("lead: a follower's open board gives way to the Lesson", delays(start, learners, "__board"))
        report("lead: the Lesson has drawn step 1", delays(start, learners, "__step"))
        for page in learners:  # follow off, back to the board in the same session
            page.wait_for_function(DRAWN)
            page.get_by_text("Follow the teacher").click()
            page.get_by_text("switch on “Follow the teacher” to go there", exact=False).wait_for()
            page.get_by_test_id("stSidebar").get_by_role("link", name="Class board").click()
            page.get_by_role("link", name=re.compile("The class is on step 1 of the lesson")).wait_for()
            page.evaluate(WATCH, [LINE_2, "__line"])
        teacher.wait_for_function(DRAWN)
        start = press(teacher, "Next →")
        report("next: an open board's line (not following) says step 2", delays(start, learners, "__line"))
        browser.close()


if __name__ == "__main__":
    main()
