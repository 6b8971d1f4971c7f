"""What a finished run costs the server once it is kept in its small form (minigpt/serve/runs/kept.py).

Trains one run of the class challenge's settings (the default Small preset, 300 steps, early stop
off) on the default corpus, keeps it small, and reports what the KeptRun holds (`nbytes`: weights,
the probe's attention maps, samples, history, validation windows) against the run it replaced
(with its optimizer state and data), the resident memory that `--copies` kept runs add to this
process, and how many kept runs the app's budget allows on boxes of several sizes
(minigpt/serve/server.py: KEPT_RUN_BYTES, SERVER_BYTES, MIN_KEPT, MAX_KEPT).

    python -m bench.kept_runs --copies 40
"""
from __future__ import annotations

import argparse
import copy
import gc
import resource

from bench.common import print_header, print_table, run_settings, status_kb
from minigpt import DEFAULT_CORPUS, Trainer, build_model
from minigpt.serve.host.capacity import Capacity
from minigpt.serve.runs.kept import KeptRun
from minigpt.serve.runs.thread import TrainingRun

MB = 2**20
SERVER_START_MB = 300  # the server's RSS when its registry is made: a class's first visits have loaded torch


def _rss_mb() -> float:
    return status_kb() / 1024


def challenge_run(steps: int) -> TrainingRun:
    text, tokenizer, model, train = run_settings(DEFAULT_CORPUS, steps)
    return TrainingRun(Trainer(build_model(model, train.seed), tokenizer, text, train), probe_text=text[:32],
                       sample_prompt=text[:2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--copies", type=int, default=40, help="kept runs held at once for the memory figure")
    args = parser.parse_args()
    print_header("A finished run kept in its small form")
    run = challenge_run(args.steps)
    run.start()
    run._thread.join()  # to its end: a kept run is a finished one
    optimizer = sum(t.numel() * t.element_size() for s in run.trainer.optimizer.state.values()
                    for t in s.values() if hasattr(t, "numel"))
    data = sum(t.numel() * t.element_size() for t in (run.trainer.train_data, run.trainer.val_data))
    gc.collect()
    before = _rss_mb()
    first = KeptRun(run)
    kept = [copy.deepcopy(first) for _ in range(args.copies)]  # each its own arrays, as runs of a class are
    gc.collect()
    added = _rss_mb() - before
    size = kept[0].nbytes()
    snap = kept[0].snapshot()
    print_table(["what", "figure"], [
        ["run", f"{args.steps} steps, {len(snap.evals)} evaluations, {len(snap.history)} history events"],
        ["a kept run's nbytes", f"{size / MB:.2f} MB"],
        ["the optimizer state and token data it drops", f"{(optimizer + data) / MB:.2f} MB"],
        [f"resident memory {args.copies} kept runs add", f"{added:.1f} MB ({added / args.copies:.2f} MB each)"],
        ["peak RSS of this process", f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"],
    ])
    from minigpt.serve.server import KEPT_RUN_BYTES, server_sizes

    rows = []
    for box_mb, cpus in ((690, 1), (1024, 1), (2700, 2), (16384, 16)):
        free = box_mb * MB - SERVER_START_MB * MB  # a limit less what the server uses when it sizes itself
        slots, count = server_sizes(Capacity(float(cpus), free, "box"))
        rows.append([f"{box_mb} MB, {cpus} CPU", slots, count, f"{count * KEPT_RUN_BYTES / MB:.0f} MB",
                     f"{count * size / MB:.0f} MB"])
    print_table(["box", "slots", "finished runs kept", "budget", "if each holds what this one does"], rows)
    run.close()


if __name__ == "__main__":
    main()
