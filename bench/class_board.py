"""A class board on one server: thirty posted runs, thirty viewers watching it, runs still training.

The sessions speak Streamlit's own protocol (bench.live_server.Session). A teacher's session starts a
class; learners' sessions each train a short run to its end on Train (two at a time: the server's
cap) and post it, and `--live` more post runs that keep training throughout, so the board changes
at every refresh. Then two stretches of the same length, one after the other:

    quiet    nobody looks at the board (the runs train on);
    watched  `--viewers` sessions have the board open, each rerunning its live fragments whenever the
             server asks for them, as a browser does (and a projector: the teacher's session too): the
             board's, and the lesson's look at the class's step beside it (`--board-only`: the board's alone).

It reports how many runs the board shows (a board's limit may refuse posts), the viewers' waits per
board redraw (p50, p95, max) and per rerun of the page's other fragments, how often each viewer's board
was redrawn, the server's CPU seconds in each stretch and the difference, per board refresh (one
refresh of every viewer) and per fragment's rerun, its RSS and the control group's peak memory. It
asserts nothing.

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
from minigpt.viz import board_title

SHORT = to_param(GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32),
                 TrainConfig(max_steps=60, eval_interval=20, batch_size=4, block_size=16))
LONG = to_param(GPTConfig(d_model=32, num_heads=2, num_layers=1, d_ff=64, max_len=32),
                TrainConfig(max_steps=20_000, eval_interval=50, batch_size=8, block_size=32, early_stop_patience=0))
CODE = re.compile(r"(?:^|&)class=([A-Z2-9]{4})(?:&|$)")


class Watcher(Session):
    """A session that reruns its page's live fragments when asked, as a browser does."""

    async def refresh(self, fragment: str | None = None) -> float:
        """Rerun one of the page's live fragments (the first drawn unless named), as the browser does
        when the server's interval for it is up."""
        return await self.rerun([], fragment=next(iter(self.auto), "") if fragment is None else fragment)


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


BOARD = board_title()  # the first line the board's fragment draws, in English: which of a page's fragments it is


async def watch(s: Watcher, until: float, waits: list[float], others: list[float], board_only: bool) -> str | None:
    """Rerun each of the page's live fragments when its own interval is up, as a browser's timers do
    (the board's, and the lesson's look at the class's step beside it), one at a time; `waits` gets the
    board's redraws, `others` the rest. `board_only`: the board's fragment alone, once it is known.
    Returns the board's fragment."""
    due = {fragment: time.monotonic() + every for fragment, every in s.auto.items()}
    board = None
    while time.monotonic() < until and due:
        fragment, when = min(due.items(), key=lambda item: item[1])
        await asyncio.sleep(max(0.0, when - time.monotonic()))
        wait = await s.refresh(fragment)
        if any(BOARD in text for _kind, text in s.texts):
            board = fragment
        (waits if fragment == board else others).append(wait)
        now = time.monotonic()  # a rerun may change a fragment's pace, or the fragments (a whole page's rerun)
        due = {f: now + every if f == fragment else due.get(f, now + every) for f, every in s.auto.items()
               if not (board_only and board is not None and f != board)}
    return board


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
    shown = board_runs(teacher)
    seconds = args.minutes * 60

    def serving() -> float:  # the server's CPU time but its training threads'
        return server.cpu_seconds() - server.thread_cpu_seconds(THREAD_NAME)

    cpu = serving()
    await asyncio.sleep(seconds)  # quiet: the live runs train, nobody watches
    quiet = serving() - cpu

    viewers = [Watcher(url) for _ in range(args.viewers)]
    opened = [await v.open("Board", f"class={code}") for v in viewers]
    waits: list[float] = []
    others: list[float] = []
    cpu, client, started = serving(), time.process_time(), time.monotonic()
    training = server.thread_cpu_seconds(THREAD_NAME)
    until = started + seconds
    boards = await asyncio.gather(*(watch(v, until, waits, others, args.board_only) for v in viewers + [teacher]))
    watched = serving() - cpu
    client, lasted = time.process_time() - client, time.monotonic() - started  # the last reruns finish after `until`
    training = server.thread_cpu_seconds(THREAD_NAME) - training
    errors = [e for s in posters + viewers + [teacher] for e in s.errors]
    for s in posters + viewers + [teacher]:
        await s.close()
    return {"open": opened, "waits": waits, "others": others, "quiet": quiet, "watched": watched, "seconds": seconds,
            "interval": teacher.auto.get(boards[-1]), "errors": errors, "shown": shown, "client": client,
            "lasted": lasted, "training": training}


def board_runs(s: Watcher) -> int | None:
    """How many runs the board shows, from its progress line ("0 runs waiting … · 2 training · 298 done"):
    fewer than were posted where the server's limit on a board's runs refused the rest."""
    for _kind, text in reversed(s.texts):
        if " · " in text and text.rstrip().endswith("done"):
            return sum(int(n) for n in re.findall(r"(\d+) ", text))
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="runs posted to the board")
    parser.add_argument("--live", type=int, default=2, help="of which, still training throughout")
    parser.add_argument("--viewers", type=int, default=30)
    parser.add_argument("--minutes", type=float, default=2.0, help="length of each stretch, quiet and watched")
    parser.add_argument("--memory-mb", type=int, default=None)
    parser.add_argument("--cpus", default=None, help='the server\'s cores, e.g. "0"; the bench takes the others')
    parser.add_argument("--board-only", action="store_true",
                        help="viewers rerun the board's fragment alone, not the lesson's look beside it: the "
                             "server's CPU per redraw is then the board's own")
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
    waits, others, interval = result["waits"], result["others"], result["interval"] or float("nan")
    refreshes = result["seconds"] / interval  # one refresh of every viewer
    extra = result["watched"] - result["quiet"]
    reruns = len(waits) + len(others)
    print(f"the board shows {result['shown']} runs of the {args.runs} posted")
    print_table(["", *WAIT_HEADERS], [wait_row("open the board", result["open"]), wait_row("a viewer's redraw", waits),
                                      wait_row("the page's other fragments", others)])
    print(f"\nthe board asks every viewer to redraw every {interval:.0f} s: {refreshes:.0f} refreshes in "
          f"{result['seconds']:.0f} s; {len(waits) / (args.viewers + 1) / refreshes:.2f} redraws per viewer per refresh")
    print(f"server CPU but training's: {result['quiet']:.1f} s quiet, {result['watched']:.1f} s watched, over {result['seconds']:.0f} s "
          f"each; watching cost {extra:.1f} s = {extra / refreshes:.3f} s per refresh of all "
          f"{args.viewers + 1} viewers = {1000 * extra / max(reruns, 1):.1f} ms per fragment's rerun "
          f"({len(waits)} of the board's, {len(others)} others)")
    print(f"the watched stretch lasted {result['lasted']:.0f} s (its last reruns finish after it): the server's "
          f"training threads used {result['training']:.1f} s of CPU in it, beside the serving's; the viewers' own "
          f"process {result['client']:.1f} s (near the stretch's length, they, not the server, would be the limit)")
    print(f"RSS {rss:.0f} MB at the end, peak {peak:.0f} MB; control group peak {box_peak or 0:.0f} MB, OOM kills {oom}; "
          f"server {'alive' if alive else 'DEAD'}")
    if result["errors"]:
        print(f"{len(result['errors'])} errors, first: {result['errors'][:3]}")


if __name__ == "__main__":
    main()
