"""Memory: peak resident memory (RSS) of a training process, and of the idle dashboard server.

Training: each case runs in a fresh child process (`python -m bench.memory --child CASE`),
and the parent reads that child's peak RSS from os.wait4's resource usage (ru_maxrss).
"import only" is the floor every case pays: the interpreter, torch and minigpt.

Dashboard: `streamlit run streamlit_app.py` on a free loopback port; its RSS is read from
/proc once /_stcore/health answers, and again after a plain HTTP GET of the page. Streamlit
runs the app script only when a browser session connects over its websocket, so those two
figures are the server alone; --browser also opens the page once in headless chromium
(through playwright, where installed) and reads the RSS after the Home page has rendered.

Abandoned runs (`--abandoned`): a learner who presses Start and closes the tab leaves a run
training with nobody watching. The run registry releases a run once its owner has not looked for
MINIGPT_RUN_IDLE_SECONDS (30 minutes by default) on the next page view. This reads the resident
memory before, at the peak with --runs runs training, and after the release; two rounds, so that
a second round's figures no higher than the first's show that abandoned runs do not pile up.
MINIGPT_MAX_RUNS is raised to --runs for the measurement (the default cap would refuse most of
the Starts). Every run uses the Train page's default settings on demo-zh. Two ways:
- server: `streamlit run` on a free loopback port; each run is started by its own headless
  chromium context (a separate browser session) pressing Start, which is then closed right
  away: abandoned. Starting 20 takes about 100 s on a 2-core box, so the idle timeout here is
  --server-idle (150 s): long enough that all 20 train at once, and longer than the 120 s
  after which Streamlit drops a disconnected session, as in production (30 min).
- inprocess: the same pages through AppTest sessions in this process, the owners "looking"
  (as their Train pages' polling does) until all 20 train, then abandoned, with --idle (5 s);
  it also runs gc.collect() and glibc's malloc_trim(0) and shows what each gives back.

    python -m bench.memory --data ../shared/data/tinyshakespeare.txt
    python -m bench.memory --steps 100 --no-dashboard
    python -m bench.memory --abandoned both --runs 20 --rounds 2 --idle 5 --server-idle 150
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from . import REPO
from .common import BABY, Stats, add_common_args, print_header, print_table, status_kb
from .live_server import CHROMIUM, CHROMIUM_ARGS, CONNECTED, IDLE, LiveServer

TIMEOUT_MS = 60_000  # the Home page drawn in chromium: a bound, never waited out
CASES = {
    "import only": "python, torch and minigpt imported, nothing built",
    "project baby fp32": f"Trainer, {BABY.num_layers}x{BABY.num_heads}x{BABY.d_model}, block {BABY.block_size}, "
                         f"batch {BABY.batch_size}, float32",
    "project baby bf16": "the same with dtype bfloat16 (autocast)",
    "nanoGPT baby": "nanoGPT's model and step, same shape",
    "project demo config": "Trainer at the demo's config (64 wide, 3 layers, block 30, batch 16)",
}


# ---------------------------------------------------------------- the child side
def child(case: str, steps: int, data: str | None, threads: int) -> None:
    import torch

    from minigpt import CharTokenizer, GPTConfig, TrainConfig, Trainer, build_model, load_corpus

    from .baselines import NanoGPT, NanoStep, nano_config

    if threads > 0:
        torch.set_num_threads(threads)
    if case == "import only":
        return
    text = load_corpus(data or BABY.corpus) if "baby" in case else load_corpus("demo-zh")
    tokenizer = CharTokenizer.from_text(text)
    if case == "nanoGPT baby":
        step = NanoStep(NanoGPT(nano_config(BABY, tokenizer.vocab_size)), torch.tensor(tokenizer.encode(text)),
                        BABY.batch_size, BABY.block_size)
        for _ in range(steps):
            step()
        return
    if "baby" in case:
        model_cfg = BABY.model(tokenizer.vocab_size)
        train_cfg = TrainConfig(batch_size=BABY.batch_size, block_size=BABY.block_size, max_steps=steps, device="cpu",
                                dtype="bfloat16" if "bf16" in case else "float32")
    else:
        model_cfg, train_cfg = GPTConfig(vocab_size=tokenizer.vocab_size), TrainConfig(max_steps=steps, device="cpu")
    trainer = Trainer(build_model(model_cfg, seed=0), tokenizer, text, train_cfg)
    for _ in range(steps):
        trainer.compute_gradients()
        trainer.apply_update()


# ---------------------------------------------------------------- the parent side
def peak_rss_mb(case: str, args: argparse.Namespace) -> float:
    command = [sys.executable, "-m", "bench.memory", "--child", case, "--steps", str(args.steps),
               "--threads", str(args.threads)]
    if args.data:
        command += ["--data", args.data]
    proc = subprocess.Popen(command, cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"the {case!r} child exited with status {proc.returncode}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def bench_training(args: argparse.Namespace) -> None:
    samples: dict[str, list[float]] = {case: [] for case in CASES}
    for _ in range(args.repeats):
        for case in CASES:
            samples[case].append(peak_rss_mb(case, args))
    floor = Stats(samples["import only"]).median
    rows = [[case, Stats(mb).fmt(0), f"{Stats(mb).median - floor:+.0f}", CASES[case]] for case, mb in samples.items()]
    print(f"peak RSS of a child process training {args.steps} steps, MB (median (min-max) of {args.repeats})")
    print_table(["case", "peak RSS MB", "over import", "what runs"], rows)


def open_in_browser(url: str) -> bool:
    """Render the Home page once in headless chromium, to its end; False where playwright or chromium is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return False
    if not Path(CHROMIUM).exists():
        return False
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(url)
        page.wait_for_selector(CONNECTED, timeout=TIMEOUT_MS)
        page.get_by_text("MiniGPT Lab").first.wait_for(timeout=TIMEOUT_MS)
        page.wait_for_selector(IDLE, timeout=TIMEOUT_MS)
        browser.close()
    return True


def dashboard_once(args: argparse.Namespace) -> dict[str, float]:
    started = time.perf_counter()
    with LiveServer() as server:
        out = {"start s": time.perf_counter() - started, "healthy": server.rss_mb()}
        with urllib.request.urlopen(server.url, timeout=10) as reply:
            reply.read()
        out["after GET /"] = server.rss_mb()
        if args.browser and open_in_browser(server.url):
            out["after a browser session"] = server.rss_mb()
        out["peak"] = server.peak_rss_mb()
    return out


def bench_dashboard(args: argparse.Namespace) -> None:
    if not (REPO / "streamlit_app.py").exists():
        print("no streamlit_app.py: dashboard memory skipped\n")
        return
    runs = [dashboard_once(args) for _ in range(args.repeats)]
    keys = [k for k in runs[0] if k != "start s"]
    rows = [[k, Stats([r[k] for r in runs if k in r]).fmt(0)] for k in keys]
    rows.append(["seconds to healthy", Stats([r["start s"] for r in runs]).fmt(1)])
    print(f"dashboard server RSS, MB (median (min-max) of {args.repeats} starts; goal: under 600 MB idle). "
          f"Streamlit runs the app script only for a websocket session.")
    print_table(["state", "RSS MB"], rows)


# ------------------------------------------------------------------ abandoned runs (--abandoned)
TRAIN = "/Train"
PAGE_TIMEOUT_MS = 120_000  # a Train page shown, on a busy box: a bound, never waited out
START_TIMEOUT_MS = 180_000  # a run started, with up to --runs others training


# ------------------------------------------------------------------ the real server

def open_train(browser, url: str, timeout_ms: int = PAGE_TIMEOUT_MS):
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
            page.reload(wait_until="domcontentloaded")  # the Train page again, its slot count after the release
            page.wait_for_selector(IDLE, timeout=PAGE_TIMEOUT_MS)
            rows.append(("server", f"round {round_} released: idle timeout passed, one page view later",
                         f"{server.rss_mb():.0f}", server.threads(), slots_in_use(page)))
            context.close()
        browser.close()
        code, seconds = server.stop()
        print(f"server stopped by SIGTERM: exit code {code} in {seconds:.1f} s")
    return rows


# ------------------------------------------------------------------ one process, AppTest sessions

def own_rss_mb() -> float:
    return status_kb() / 1024


def malloc_trim() -> bool:
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def inprocess_mode(runs: int, idle: int, rounds: int) -> list[tuple]:
    # before the app's modules read them
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
            del at  # the session goes; its run, held by the registry, trains on
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
    st.cache_resource.clear()  # the registry with it: the next round in this process starts clean
    return rows


def bench_abandoned(args: argparse.Namespace) -> None:
    """--abandoned: runs started and abandoned, and the memory that comes back once they are released."""
    rows = []
    if args.abandoned in ("server", "both"):
        rows += server_mode(args.runs, args.server_idle, args.rounds)
    if args.abandoned in ("inprocess", "both"):
        rows += inprocess_mode(args.runs, args.idle, args.rounds)
    print(f"\n{args.runs} runs started and abandoned per round (default Train settings, demo-zh), "
          f"MINIGPT_MAX_RUNS={args.runs}, MINIGPT_RUN_IDLE_SECONDS={args.server_idle} (server) / "
          f"{args.idle} (in-process)")
    print_table(["where", "phase", "RSS MB", "threads", "runs training"], rows)
    print("threads: the process's OS threads (server) or its minigpt-trainer threads (in-process).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50, help="training steps per child process")
    parser.add_argument("--data", default=None, help="text for the baby config (default: Python's docs)")
    parser.add_argument("--dashboard", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--browser", action=argparse.BooleanOptionalAction, default=True,
                        help="also render the page once in headless chromium (needs playwright and chromium)")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--abandoned", choices=("server", "inprocess", "both"), default=None,
                        help="instead: start and abandon --runs runs, --rounds times, served for real or through "
                             "AppTest sessions in this process, and read the memory that comes back")
    parser.add_argument("--runs", type=int, default=20, help="with --abandoned: runs per round")
    parser.add_argument("--idle", type=int, default=5, help="with --abandoned: in-process MINIGPT_RUN_IDLE_SECONDS")
    parser.add_argument("--server-idle", type=int, default=150, help="with --abandoned: the server's idle seconds")
    parser.add_argument("--rounds", type=int, default=2, help="with --abandoned: start-and-abandon rounds")
    add_common_args(parser, repeats=5)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps, args.data, args.threads)
        return
    if args.abandoned:
        bench_abandoned(args)
        return
    print_header("Memory")
    bench_training(args)
    if args.dashboard:
        bench_dashboard(args)


if __name__ == "__main__":
    main()
