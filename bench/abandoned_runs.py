"""Start and abandon 20 training runs; show that the server's memory comes back.

A learner who presses Start and closes the tab leaves a run training with nobody watching.
The run registry releases a run once its owner has not looked for MINIGPT_RUN_IDLE_SECONDS
(30 minutes by default) on the next page view. This script measures the resident memory (RSS)
before, at the peak with 20 runs training, and after the release; two rounds, so that a second
round's figures no higher than the first's show that abandoned runs do not pile up.
MINIGPT_MAX_RUNS is raised to 20 for the measurement (the default cap of 2 would refuse 18 of
the Starts). Every run uses the Train page's default settings on demo-zh.

Two ways, both by default:
- server: `streamlit run` on a free loopback port; each run is started by its own headless
  chromium context (a separate browser session) pressing Start, which is then closed right
  away: abandoned. Starting 20 takes about 100 s on a 2-core box, so the idle timeout here is
  --server-idle (150 s): long enough that all 20 train at once, and longer than the 120 s
  after which Streamlit drops a disconnected session, as in production (30 min).
- inprocess: the same pages through AppTest sessions in this process, the owners "looking"
  (as their Train pages' polling does) until all 20 train, then abandoned, with --idle (5 s);
  the script also runs gc.collect() and glibc's malloc_trim(0) and shows what each gives back.

    python -m bench.abandoned_runs [--runs 20] [--rounds 2] [--idle 5] [--server-idle 150]
                                   [--mode server|inprocess|both]
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import os
import re
import time
from pathlib import Path

from bench import REPO
from bench.common import print_table
from bench.live_server import CHROMIUM, CHROMIUM_ARGS, CONNECTED, IDLE, LiveServer

TRAIN = "/Train"
TIMEOUT_MS = 120_000  # a page shown, on a busy box: a bound, never waited out
START_TIMEOUT_MS = 180_000  # a run started, with up to --runs others training


# ------------------------------------------------------------------ the real server

def open_train(browser, url: str, timeout_ms: int = TIMEOUT_MS):
    context = browser.new_context(viewport={"width": 1400, "height": 1600})
    page = context.new_page()
    page.goto(url + TRAIN, wait_until="domcontentloaded", timeout=timeout_ms)
    page.wait_for_selector(CONNECTED, timeout=timeout_ms)
    page.get_by_role("heading", name="Train", level=1).wait_for(timeout=timeout_ms)
    page.wait_for_selector(IDLE, timeout=timeout_ms)
    return context, page


def slots_in_use(page) -> str:
    """The Train page's own count, '3 of 20 training slots in use on this server'."""
    text = page.get_by_text(re.compile(r"training slots in use")).first.inner_text()
    return re.search(r"(\d+) of (\d+) training slots", text).group(1)


def server_mode(runs: int, idle: int, rounds: int) -> list[tuple]:
    from playwright.sync_api import sync_playwright

    env = {"MINIGPT_MAX_RUNS": str(runs), "MINIGPT_RUN_IDLE_SECONDS": str(idle), "OMP_NUM_THREADS": "1"}
    rows = []
    with LiveServer(env) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context, page = open_train(browser, server.url)  # warm-up: torch, the shipped model, the pages
        context.close()
        time.sleep(2)
        rows.append(("server", "before", f"{server.rss_mb():.0f}", server.threads(), "0"))
        for round_ in range(1, rounds + 1):
            t0 = time.monotonic()
            for i in range(runs):
                context, page = open_train(browser, server.url)
                page.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Start", exact=True) \
                    .click(timeout=START_TIMEOUT_MS)
                page.locator('[data-testid="stMetricValue"]').first.filter(has_text="running") \
                    .wait_for(timeout=START_TIMEOUT_MS)
                if i == runs - 1:
                    in_use = slots_in_use(page)
                context.close()  # abandoned: the tab is closed, its run goes on training
                print(f"round {round_}: run {i + 1} started and abandoned after {time.monotonic() - t0:.0f} s, "
                      f"server RSS {server.rss_mb():.0f} MB", flush=True)
            started = time.monotonic() - t0
            if started >= idle:
                print(f"warning: starting took {started:.0f} s, longer than the idle timeout ({idle} s): "
                      f"the first runs were released before the last started", flush=True)
            rows.append(("server", f"round {round_} peak: {in_use} runs training ({started:.0f} s to start them)",
                         f"{server.rss_mb():.0f}", server.threads(), in_use))
            time.sleep(idle + 1)  # every run is now idle: its owner last looked before closing the tab
            context, page = open_train(browser, server.url)  # any page view releases idle runs
            time.sleep(3)
            page.reload(wait_until="domcontentloaded")
            page.wait_for_selector(IDLE, timeout=TIMEOUT_MS)
            rows.append(("server", f"round {round_} released: idle timeout passed, one page view later",
                         f"{server.rss_mb():.0f}", server.threads(), slots_in_use(page)))
            context.close()
        browser.close()
        code, seconds = server.stop()
        print(f"server stopped by SIGTERM: exit code {code} in {seconds:.1f} s")
    return rows


# ------------------------------------------------------------------ one process, AppTest sessions

def own_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def malloc_trim() -> bool:
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def inprocess_mode(runs: int, idle: int, rounds: int) -> list[tuple]:
    os.environ["MINIGPT_MAX_RUNS"], os.environ["MINIGPT_RUN_IDLE_SECONDS"] = str(runs), str(idle)
    import logging
    import threading

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from app.chrome.site import TRAIN as TRAIN_PAGE
    from app.state import runs as app_runs
    from minigpt.serve.runs.thread import THREAD_NAME

    logging.getLogger("streamlit").setLevel(logging.ERROR)  # AppTest's "missing ScriptRunContext" noise
    app = str(REPO / "streamlit_app.py")

    def row(phase: str) -> tuple:
        trainers = sum(t.name == THREAD_NAME for t in threading.enumerate())
        return ("in-process", phase, f"{own_rss_mb():.0f}", trainers, app_runs.registry().active_count())

    AppTest.from_file(app, default_timeout=120).run().switch_page(TRAIN_PAGE.script).run()  # warm-up
    gc.collect()
    rows = [row("before")]
    for round_ in range(1, rounds + 1):
        owners = []
        for _ in range(runs):
            at = AppTest.from_file(app, default_timeout=120).run()
            at.switch_page(TRAIN_PAGE.script).run()
            at.button(key="start").click().run()
            owners.append(at.session_state[app_runs.OWN_RUN_KEY])
            for run_id, key in owners:  # what the open Train pages' polling does: their owners still look
                app_runs.registry().get(run_id, key)
            del at
        time.sleep(1)
        rows.append(row(f"round {round_} peak: {runs} runs training"))
        del owners  # abandoned: nobody looks any more
        time.sleep(idle + 1)
        app_runs.registry().get(None)  # what the next page view does: release the idle runs
        time.sleep(1)
        rows.append(row(f"round {round_} released (next page view)"))
        gc.collect()
        rows.append(row(f"round {round_} after gc.collect()"))
        trimmed = malloc_trim()
        rows.append(row(f"round {round_} after malloc_trim(0)" if trimmed else "malloc_trim unavailable"))
    st.cache_resource.clear()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--idle", type=int, default=5, help="in-process MINIGPT_RUN_IDLE_SECONDS")
    parser.add_argument("--server-idle", type=int, default=150, help="server MINIGPT_RUN_IDLE_SECONDS")
    parser.add_argument("--rounds", type=int, default=2, help="start-and-abandon rounds")
    parser.add_argument("--mode", choices=("server", "inprocess", "both"), default="both")
    args = parser.parse_args()
    rows = []
    if args.mode in ("server", "both"):
        rows += server_mode(args.runs, args.server_idle, args.rounds)
    if args.mode in ("inprocess", "both"):
        rows += inprocess_mode(args.runs, args.idle, args.rounds)
    print(f"\n{args.runs} runs started and abandoned per round (default Train settings, demo-zh), "
          f"MINIGPT_MAX_RUNS={args.runs}, MINIGPT_RUN_IDLE_SECONDS={args.server_idle} (server) / "
          f"{args.idle} (in-process)")
    print_table(["where", "phase", "RSS MB", "threads", "runs training"], rows)
    print("threads: the process's OS threads (server) or its minigpt-trainer threads (in-process).")


if __name__ == "__main__":
    main()
