"""The √d_k race's settings: where do the two loss curves part visibly, within a learner's wait?

For each d_k, number of heads, learning rate and step count, the race the Experiments page runs
(app/views/scaling_race.py: the same model with and without 1/√d_k, the same weights and batches, on the
default corpus) is run once, timed, and its last point read: the validation batch's loss of
both models, their gap, and the gap as a share of the scaled model's loss. One torch thread.

    python -m bench.race_grid                          # the grid the page's defaults were chosen from
    python -m bench.race_grid --d-k 64 128 --lr 0.01 --steps 200
"""
from __future__ import annotations

import argparse
import itertools
import time

import torch

from bench.common import print_header, print_row, print_table
from minigpt import DEFAULT_CORPUS, CharTokenizer, load_corpus
from minigpt.lab.scaling_race import race_configs, scaling_race


def race(text: str, d_k: int, heads: int, lr: float, steps: int, layers: int) -> tuple[float, float, float]:
    """(seconds, loss scaled, loss unscaled) of one race at its last step."""
    tokenizer = CharTokenizer.from_text(text)
    config, train = race_configs(tokenizer.vocab_size, d_k, layers, steps, lr, heads=heads)
    started = time.perf_counter()
    # the page reports ten times a race
    last = list(scaling_race(config, train, tokenizer, text, every=max(1, steps // 10)))[-1]
    return time.perf_counter() - started, last.scaled.loss, last.unscaled.loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d-k", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--heads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--lr", type=float, nargs="+", default=[3e-3, 1e-2, 3e-2])
    parser.add_argument("--steps", type=int, nargs="+", default=[100, 200, 400])
    parser.add_argument("--layers", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the page's race runs on one of the server's threads
    text = load_corpus(DEFAULT_CORPUS)
    print_header(f"The √d_k race on {DEFAULT_CORPUS}, {args.layers} layer(s), batch 16 x 32")
    headers = ["d_k", "heads", "lr", "steps", "s", "loss scaled", "loss unscaled", "gap", "gap %"]
    rows = []
    # every combination: the grid the page's defaults came from
    for d_k, heads, lr, steps in itertools.product(args.d_k, args.heads, args.lr, args.steps):
        seconds, scaled, unscaled = race(text, d_k, heads, lr, steps, args.layers)
        rows.append([d_k, heads, f"{lr:g}", steps, f"{seconds:.1f}", f"{scaled:.3f}", f"{unscaled:.3f}",
                     # > 0: the scaled head learned more
                     f"{unscaled - scaled:+.3f}", f"{(unscaled - scaled) / scaled:+.1%}"])
        print_row(headers, rows[-1])
    print()
    print_table(headers, rows)


if __name__ == "__main__":
    main()
