"""The Train page's presets on the default corpus: wall time, final losses and the best val loss
against ln(vocab), the loss of guessing uniformly. The buttons promise no time (it depends on the
server and how busy it is: a run's ETA comes from its own speed); this says what one machine
takes. The task preset
trains on its own corpora instead (every task by default), and adds the held-out accuracy.

    python -m bench.presets                      # every preset, one run each, one torch thread
    python -m bench.presets --presets small --repeats 3
    python -m bench.presets --presets task --tasks reverse
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import torch

from bench.common import print_header, print_row, print_table
from minigpt import DEFAULT_CORPUS, PRESETS, CharTokenizer, Trainer, build_model, load_corpus
from minigpt.lab.diagnosis import uniform_loss
from minigpt.lab.tasks import TASKS, Task, training_hooks


def run_preset(name: str, text: str, task: Task | None = None) -> dict:
    preset = PRESETS[name]
    tokenizer = CharTokenizer.from_text(text)
    model_cfg = replace(preset.model, vocab_size=tokenizer.vocab_size)
    # the page's preset as it is, but always on the CPU the results quote
    train_cfg = replace(preset.train, device="cpu")
    trainer = Trainer(build_model(model_cfg, train_cfg.seed), tokenizer, text, train_cfg, **training_hooks(task))
    started = time.perf_counter()
    events = list(trainer.events())  # the whole run; its evaluations are the events with a val loss
    wall = time.perf_counter() - started
    evals = [e for e in events if e.val_loss is not None]
    result = {"wall": wall, "steps": trainer.step, "train": evals[-1].train_eval_loss, "val": evals[-1].val_loss,
              "best": min(e.val_loss for e in evals), "uniform": uniform_loss(tokenizer.vocab_size),
              "early": trainer.stopped_early, "params": model_cfg.num_params()}
    if task is not None:
        # None: never every answer character right
        first_full = next((e.step for e in evals if e.score.chars == 1.0), None)
        result.update(chars=evals[-1].score.chars, lines=evals[-1].score.lines, first_full=first_full,
                      floor=task.loss_floor(train_cfg.block_size))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS),
                        help="the task corpora the task preset trains on")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print_header("Presets on the default corpus")
    text = load_corpus(args.corpus)
    chosen = [p for p in args.presets if p != "task"]  # the task preset trains on its own corpora, below
    if chosen:
        print(f"corpus {args.corpus}: {len(text):,} characters\n")
        headers = ["preset", "parameters", "steps", "wall s (median of runs)", "train loss", "val loss", "best val",
                   "ln V"]
        rows = []
        for name in chosen:
            runs = [run_preset(name, text) for _ in range(args.repeats)]
            r = runs[-1]
            wall = statistics.median(x["wall"] for x in runs)
            steps = f"{r['steps']:,}" + (" (stopped early)" if r["early"] else "")
            rows.append([name, f"{r['params']:,}", steps, f"{wall:.1f}", f"{r['train']:.3f}", f"{r['val']:.3f}",
                         f"{r['best']:.3f}", f"{r['uniform']:.3f}"])
            print_row(headers, rows[-1])
        print()
        print_table(headers, rows)
    if "task" not in args.presets:
        return
    headers = ["task preset on", "steps", "wall s (median of runs)", "val loss", "lowest possible",
               "answer characters right", "whole answers right", "first evaluation at 100%"]
    rows = []
    for task_name in args.tasks:
        task = TASKS[task_name]
        runs = [run_preset("task", task.corpus(), task) for _ in range(args.repeats)]
        r = runs[-1]
        wall = statistics.median(x["wall"] for x in runs)
        first = f"{r['first_full']:,}" if r["first_full"] is not None else None
        rows.append([task_name, f"{r['steps']:,}", f"{wall:.1f}", f"{r['val']:.3f}", f"{r['floor']:.3f}",
                     f"{r['chars']:.1%}", f"{r['lines']:.1%}", first])
        print_row(headers, rows[-1])
    print()
    print_table(headers, rows)


if __name__ == "__main__":
    main()
