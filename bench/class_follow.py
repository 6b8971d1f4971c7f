"""A class follows the teacher through the Lesson: what "follow" costs the server, and how soon a
new step reaches every learner.

N learner sessions (Streamlit's own protocol, bench.class_load.Session) open the Lesson page
and keep it open as a browser tab does: each reruns every fragment whenever the server's timer
says (the sidebar's heartbeat, and in a class the poll of the teacher's step). Three stretches,
one after the other on one server:

    alone     the N sessions on the Lesson with no class: the sidebar's heartbeat only;
    follow    the same N sessions in a class whose teacher leads, on a step that does not change;
    moves     the teacher presses Next --moves times; for each, the seconds until every follower
              has drawn the new step (its address says ?lesson=N), p50 and max.

For alone and follow: the server's CPU seconds per minute, and the fragment reruns the sessions
sent. The difference is what following an unchanged step costs. It asserts nothing.

    python -m bench.class_follow --learners 40 --seconds 60 --moves 3
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from urllib.parse import parse_qs

from streamlit.proto.WidgetStates_pb2 import WidgetState

from bench.class_load import Session
from bench.common import EMPTY, print_header, print_table
from bench.live_server import LiveServer


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
                due.setdefault(fragment, now + interval)
            for fragment in [f for f, at in due.items() if at <= now]:
                if fragment not in s.auto:
                    del due[fragment]
                    continue
                await s._rerun([], fragment=fragment)
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
    await teacher._rerun([WidgetState(id=teacher.widget("board_tab"), string_value="Lead the lesson")])
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
        deadline = pressed + 60
        while time.monotonic() < deadline and not all(n in t.seen for t in tabs):
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.gather(*loops)
        arrivals.append([t.seen.get(n, float("inf")) - pressed for t in tabs])
    for n, seconds in enumerate(arrivals, start=2):
        late = [s for s in seconds if s != float("inf")]
        rows.append([f"moves: Next to step {n}", EMPTY, EMPTY, f"{statistics.median(late):.2f}" if late else EMPTY,
                     f"{max(seconds):.2f} ({len(seconds) - len(late)} never)"])
    for tab in tabs:
        await tab.session.close()
    await teacher.close()
    return rows


server_of: dict[str, LiveServer] = {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=60.0, help="each stretch's length")
    parser.add_argument("--moves", type=int, default=3)
    args = parser.parse_args()
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
