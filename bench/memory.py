"""Memory: peak resident memory (RSS) of a training process, and of the idle dashboard server.

Training: each case runs in a fresh child process (`python -m bench.memory --child CASE`),
and the parent reads that child's peak RSS from os.wait4's resource usage (ru_maxrss).
"import only" is the floor every case pays: the interpreter, torch and minigpt.

Dashboard: `streamlit run streamlit_app.py` on a free loopback port; its RSS is read from
/proc once /_stcore/health answers, and again after a plain HTTP GET of the page. Streamlit
runs the app script only when a browser session connects over its websocket, so those two
figures are the server alone; --browser also opens the page once in headless chromium
(through playwright, where installed) and reads the RSS after the Home page has rendered.

    python -m bench.memory --data ../shared/data/tinyshakespeare.txt
    python -m bench.memory --steps 100 --no-dashboard
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from . import REPO
from .common import BABY, Stats, add_common_args, print_header, print_table
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50, help="training steps per child process")
    parser.add_argument("--data", default=None, help="text for the baby config (default: Python's docs)")
    parser.add_argument("--dashboard", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--browser", action=argparse.BooleanOptionalAction, default=True,
                        help="also render the page once in headless chromium (needs playwright and chromium)")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    add_common_args(parser, repeats=5)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps, args.data, args.threads)
        return
    print_header("Memory")
    bench_training(args)
    if args.dashboard:
        bench_dashboard(args)


if __name__ == "__main__":
    main()
