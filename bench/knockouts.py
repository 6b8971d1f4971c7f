"""How long a learner waits on the Experiments page's knock-outs, on the shipped default model:
one knock-out re-evaluated (the copy, then the validation loss on the model's own validation
windows), and
the importance of every head (each zeroed alone in turn). Medians of a few rounds, one thread;
the budgets are 1 s and 5 s, printed beside the figures, never asserted.

    python -m bench.knockouts
    python -m bench.knockouts --repeats 9 --corpus tinystories-en
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from bench.common import print_header, print_table
from minigpt import DEFAULT_CORPUS, estimate_loss, load_corpus, load_pretrained, validation_windows
from minigpt.lab.knockout import Knockout, head_importance, knocked_out
from minigpt.lab.tasks import task_for_corpus


def timed(fn, repeats: int) -> tuple[float, object]:  # the result too: the table prints what the last call computed
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the server's pages compute: one thread each
    checkpoint = load_pretrained(args.corpus)
    model, tokenizer = checkpoint.model, checkpoint.tokenizer
    ids = torch.tensor(tokenizer.encode(load_corpus(args.corpus)))
    task = task_for_corpus(args.corpus)
    # the Experiments page's fixed windows: every round scores the same text
    windows = validation_windows(ids, checkpoint.train_config, task.line_length if task is not None else 1)
    config = model.config
    print_header(f"Knock-outs on the shipped {args.corpus} model: {config.num_layers} layers x {config.num_heads} "
                 f"heads, {model.num_params():,} parameters, {len(windows)} x {windows[0][0].shape} windows")
    one = Knockout(heads=frozenset({(0, 0)}), positions=True)  # a head and the positions: the page's most common pair
    knock, after = timed(lambda: estimate_loss(knocked_out(model, one), windows), args.repeats)
    importance, rise = timed(lambda: head_importance(model, windows), args.repeats)
    base = estimate_loss(model, windows)  # untimed: the page has the whole model's loss already
    print_table(["what", "median s", "budget s", "result"], [
        ["one knock-out re-evaluated (head 1.1 + positions)", f"{knock:.3f}", "1", f"val loss {base:.3f} -> {after:.3f}"],
        ["importance of every head", f"{importance:.3f}", "5",
         f"largest rise {rise.max():+.3f} (layer {rise.argmax() // rise.shape[1] + 1}, "
         f"head {rise.argmax() % rise.shape[1] + 1})"],
    ])
    return 0  # figures only: a budget missed is printed, never failed


if __name__ == "__main__":
    sys.exit(main())
