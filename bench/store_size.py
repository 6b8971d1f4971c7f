"""What the store (minigpt/serve/store/database.py) holds on disk after a class: the SQLite file and the
checkpoint folders beside it, as the app's default keeps them.

A class of `--learners` learners: each trains one run of the class challenge's settings (the default
Small preset, 300 steps, early stop off, as bench/kept_runs.py) on the default corpus through a
registry with the store, posts it to the class's board, answers every question of the lesson, and
keeps one run for comparison. The runs train `--slots` at a time, on threads. It reports the
database's and the checkpoints' bytes, per learner and in all, with the default retention (one
checkpoint per run).

    python -m bench.store_size --learners 40
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from bench.common import print_header, print_table, run_settings
from minigpt import DEFAULT_CORPUS, probe_text
from minigpt.lab.run_records import RunRecord, RunShelf
from minigpt.serve.classes.classes import Classes
from minigpt.serve.line.registry import RunRegistry
from minigpt.serve.store.database import Store
from minigpt.serve.runs.process import build_run
from minigpt.serve.runs.recipe import RunSpec

LESSON_STEPS = 15  # questions a learner answers: one per lesson step
MB = 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=40)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print_header("the store's size after a class")
    folder = Path(tempfile.mkdtemp(prefix="minigpt-store-"))
    store = Store.from_url(f"sqlite:///{folder / 'minigpt.db'}")  # the default engine, in a folder of its own
    text, tokenizer, model, train = run_settings(DEFAULT_CORPUS, args.steps)
    spec = RunSpec("", model, train, tuple(tokenizer.chars), text, DEFAULT_CORPUS,
                   probe_text(tokenizer, text)[: train.block_size], text[:1], 80, nice=0, threads=1)
    registry = RunRegistry(max_runs=args.slots, store=store, builder=lambda s, r: build_run(s, r, in_process=False),
                           waiting_idle_seconds=24 * 3600)  # every learner waits as long as it takes
    classes, shelf = Classes(store=store), RunShelf(store=store)
    opened = classes.open()
    started = time.perf_counter()
    # the whole class presses Start
    entries = [registry.submit(spec, corpus=DEFAULT_CORPUS) for _ in range(args.learners)]
    for n, entry in enumerate(entries):
        classes.post(opened.code, entry, entry.key, f"learner {n}", learner=str(n), corpus=DEFAULT_CORPUS)
        for step in range(1, LESSON_STEPS + 1):
            classes.answer(opened.code, str(n), step, n % 4)  # one answer per question, as a learner gives
    while True:  # a bench, not a test: it looks every second until the class has finished training
        states = [registry.get(e.run_id, e.key).run.state for e in entries]  # each owner's sign of life
        if all(state in ("finished", "error", "stopped", "closed") for state in states):
            break
        time.sleep(1.0)
    if states.count("finished") != args.learners:
        raise SystemExit(f"not every run finished: {sorted(states)}")
    for entry in entries:
        shelf.put(RunRecord.of_run("kept", DEFAULT_CORPUS, model, train, entry.run.snapshot()))
    registry.dispatch()  # the last writes queued by the runs' ends
    registry.stop_all()
    store.flush(60)  # every write on disk before the sizes are read
    seconds = time.perf_counter() - started
    database = sum(p.stat().st_size for p in folder.glob("minigpt.db*"))  # the file, its WAL and shared memory
    checkpoints = sum(p.stat().st_size for p in (folder / "checkpoints").rglob("*") if p.is_file())
    total = store.size_on_disk()
    print(f"{args.learners} learners, {args.steps} steps each ({model.num_params():,} parameters), trained in "
          f"{seconds:.0f} s on {args.slots} slots; store in {folder}")
    print_table(["", "MB in all", "KB per learner"], [
        ["database (SQLite file, WAL included)", f"{database / MB:.2f}", f"{database / args.learners / 1024:.0f}"],
        ["checkpoints (one per run)", f"{checkpoints / MB:.2f}", f"{checkpoints / args.learners / 1024:.0f}"],
        ["total", f"{total / MB:.2f}", f"{total / args.learners / 1024:.0f}"],
    ])
    store.close()
    os.environ.pop("MINIGPT_DATA_DIR", None)


if __name__ == "__main__":
    main()
