"""A class board on one server: thirty posted runs, thirty viewers watching it, runs still training.

The sessions speak Streamlit's own protocol (bench.live_server.Session). A teacher's session starts a
class; learners' sessions each train a short run to its end on Train (two at a time: the server's
cap) and post it, and `--live` more post runs that keep training throughout, so the board changes
at every refresh. Then two stretches of the same length, one after the other:

    quiet    nobody looks at the board (the runs train on);
    watched  `--viewers` sessions have the board open, each rerunning its live fragment whenever the
             server asks for it, as a browser does (and a projector: the teacher's session too).

It reports the viewers' waits per refresh (p50, p95, max), how often each viewer's board was redrawn,
the server's CPU seconds in each stretch and the difference, per board refresh (one refresh of every
viewer) and per viewer's redraw, its RSS and the control group's peak memory. It asserts nothing.

    python -m bench.class_board --runs 30 --viewers 30 --minutes 2 --memory-mb 690 --cpus 0
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import time

from app.parts.train_form import to_param
from bench.common import WAIT_HEADERS, print_header, print_table, wait_row
from bench.live_server import APP_DIR, Box, LiveServer
from bench.session import Session
from minigpt import GPTConfig, TrainConfig
from minigpt.serve.runs.thread import THREAD_NAME

SHORT = to_param(GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32),
                 TrainConfig(max_steps=60, eval_interval=20, batch_size=4, block_size=16))
LONG = to_param(GPTConfig(d_model=32, num_heads=2, num_layers=1, d_ff=64, max_len=32),
                TrainConfig(max_steps=20_000, eval_interval=50, batch_size=8, block_size=32, early_stop_patience=0))
CODE = re.compile(r"(?:^|&)class=([A-Z2-9]{4})(?:&|$)")


class Watcher(Session):
    """A session that reruns its page's live fragment when asked, as a browser does."""

    async def refresh(self) -> float:
        """Rerun the page's live fragment, as the browser does when the server's interval is up."""
        return await self.rerun([], fragment=next(iter(self.auto), ""))


async def post_run(url: str, code: str, name: str, settings: str, to_the_end: bool) -> Watcher:
    s = Watcher(url)
    await s.open("Train", f"class={code}&train={settings}")
    await s.click("start")
    if to_the_end:
        while s.step() != 60:
            await asyncio.sleep(0.5)
            s.metrics.clear()
            await s.refresh()
    await s.set("board_post_name", string_value=name)
    await s.click("board_post")
    return s


async def watch(s: Watcher, until: float, waits: list[float]) -> None:
    while time.monotonic() < until:
        await asyncio.sleep(min(s.auto.values(), default=3.0))
        waits.append(await s.refresh())


async def play(url: str, server: LiveServer, args) -> dict:
    teacher = Watcher(url)
    await teacher.open("Board")
    await teacher.click("board_start")
    code = CODE.search(teacher.address).group(1)
    posters = []
    short = args.runs - args.live
    for first in range(0, short, 2):  # two at a time: the server trains at most two runs
        posters += await asyncio.gather(*(post_run(url, code, f"learner {i + 1}", SHORT, True)
                                          for i in range(first, min(first + 2, short))))
    posters += [await post_run(url, code, f"live {i + 1}", LONG, False) for i in range(args.live)]
    await teacher.go("Board", f"class={code}")
    seconds = args.minutes * 60

    def serving() -> float:  # the server's CPU time but its training threads'
        return server.cpu_seconds() - server.thread_cpu_seconds(THREAD_NAME)

    cpu = serving()
    await asyncio.sleep(seconds)  # quiet: the live runs train, nobody watches
    quiet = serving() - cpu

    viewers = [Watcher(url) for _ in range(args.viewers)]
    opened = [await v.open("Board", f"class={code}") for v in viewers]
    waits: list[float] = []
    cpu = serving()
    until = time.monotonic() + seconds
    await asyncio.gather(*(watch(v, until, waits) for v in viewers + [teacher]))
    watched = serving() - cpu
    errors = [e for s in posters + viewers + [teacher] for e in s.errors]
    for s in posters + viewers + [teacher]:
        await s.close()
    return {"open": opened, "waits": waits, "quiet": quiet, "watched": watched, "seconds": seconds,
            "interval": min(teacher.auto.values(), default=None), "errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="runs posted to the board")
    parser.add_argument("--live", type=int, default=2, help="of which, still training throughout")
    parser.add_argument("--viewers", type=int, default=30)
    parser.add_argument("--minutes", type=float, default=2.0, help="length of each stretch, quiet and watched")
    parser.add_argument("--memory-mb", type=int, default=None)
    parser.add_argument("--cpus", default=None, help='the server\'s cores, e.g. "0"; the bench takes the others')
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the server (e.g. STREAMLIT_RUNNER_POST_SCRIPT_GC=false)")
    args = parser.parse_args()
    print_header(f"A class board: {args.runs} runs, {args.viewers} viewers {' '.join(args.env)}".strip())
    if args.cpus:
        others = set(range(os.cpu_count() or 1)) - {int(c) for c in args.cpus.split(",")}
        if others:
            os.sched_setaffinity(0, others)
    env = {"MINIGPT_MAX_RUNS": "2", **dict(pair.split("=", 1) for pair in args.env)}
    with Box(args.memory_mb, args.cpus) as box, LiveServer(env, box=box, app_dir=APP_DIR) as server:
        result = asyncio.run(play(server.url, server, args))
        rss, peak = server.rss_mb(), server.peak_rss_mb()
        box_peak, oom, alive = box.peak_mb(), box.oom_kills(), server.proc.poll() is None
    waits, interval = result["waits"], result["interval"] or float("nan")
    refreshes = result["seconds"] / interval  # one refresh of every viewer
    extra = result["watched"] - result["quiet"]
    print_table(["", *WAIT_HEADERS], [wait_row("open the board", result["open"]), wait_row("a viewer's redraw", waits)])
    print(f"\nthe board asks every viewer to redraw every {interval:.0f} s: {refreshes:.0f} refreshes in "
          f"{result['seconds']:.0f} s; {len(waits) / (args.viewers + 1) / refreshes:.2f} redraws per viewer per refresh")
    print(f"server CPU but training's: {result['quiet']:.1f} s quiet, {result['watched']:.1f} s watched, over {result['seconds']:.0f} s "
          f"each; watching cost {extra:.1f} s = {extra / refreshes:.3f} s per refresh of all "
          f"{args.viewers + 1} viewers = {1000 * extra / max(len(waits), 1):.1f} ms per viewer's redraw")
    print(f"RSS {rss:.0f} MB at the end, peak {peak:.0f} MB; control group peak {box_peak or 0:.0f} MB, OOM kills {oom}; "
          f"server {'alive' if alive else 'DEAD'}")
    if result["errors"]:
        print(f"{len(result['errors'])} errors, first: {result['errors'][:3]}")


if __name__ == "__main__":
    main()
