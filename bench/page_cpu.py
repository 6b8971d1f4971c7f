"""The server's CPU for one warm visit to a page: a figure a busy machine barely moves.

Wall-clock waits (dashboard_latency.py) swing with whatever else runs; the CPU a page's run costs
the server swings much less. This opens a page through Streamlit's AppTest in a fresh process per
checkout (the script runs in the process's own thread, with one torch thread and nothing
training), visits it twice to warm imports, the shipped model and the caches, then times
`--visits` more visits from Home by the process's CPU clock. With `--before CHECKOUT` it does the
same in the other checkout, in turn, `--rounds` times: a before/after in one run.

    python -m bench.page_cpu --page Attention --before ../old-checkout
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import print_header, print_table
from bench.live_server import APP_DIR

VISIT = r"""
import glob, json, os, sys, time
import torch
from streamlit.testing.v1 import AppTest

torch.set_num_threads(1)
home = os.path.join(os.getcwd(), "streamlit_app.py")
page = os.path.join(os.getcwd(), glob.glob(f"pages/*{sys.argv[1]}.py")[0])
at = AppTest.from_file(home, default_timeout=600)
at.query_params["lang"] = "en"
at.run()
seconds = []
for visit in range(2 + int(sys.argv[2])):
    at.switch_page(page)
    started = time.process_time()
    at.run()
    if visit >= 2:
        seconds.append(time.process_time() - started)
    assert not at.exception, at.exception
    at.switch_page(home).run()
print(json.dumps(seconds))
"""


def visits(app_dir: Path, page: str, count: int) -> list[float]:
    """VISIT in a fresh process in the checkout `app_dir`, importing its own packages (as LiveServer serves one)."""
    env = {**os.environ, "PYTHONPATH": str(app_dir)}  # the checkout's own minigpt and app, not this one's
    out = subprocess.run([sys.executable, "-c", VISIT, page, str(count)], cwd=app_dir, env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--page", default="Attention", help="the page file's name (after its number, in an older checkout)")
    parser.add_argument("--visits", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--before", type=Path, default=None)
    args = parser.parse_args()
    print_header(f"CPU of one warm visit to {args.page}")
    # in turn each round, so a busier stretch hits both
    trees = [("this checkout", APP_DIR)] + ([("before", args.before.resolve())] if args.before else [])
    rows = []
    for round_ in range(args.rounds):
        for name, tree in trees:
            started = time.perf_counter()  # the wall clock of the whole process: start-up included, for scale only
            seconds = visits(tree, args.page, args.visits)
            rows.append([round_ + 1, name, f"{statistics.median(seconds) * 1000:.1f}", f"{min(seconds) * 1000:.1f}",
                         f"{max(seconds) * 1000:.1f}", f"{time.perf_counter() - started:.0f}"])
    print_table(["round", "checkout", "median ms", "min ms", "max ms", "wall s (process)"], rows)


if __name__ == "__main__":
    main()
