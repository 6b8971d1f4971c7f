"""The Train page's presets on the default corpus: wall time, final losses and the best val loss
against ln(vocab), the loss of guessing uniformly. What the preset buttons promise ("~10 s",
"~30 s", "a few minutes") and what the first-hour note quotes are measured here.

    python -m bench.presets                      # every preset, one run each, one torch thread
    python -m bench.presets --presets small --repeats 3
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import torch

from bench.common import print_header
from minigpt import DEFAULT_CORPUS, PRESETS, CharTokenizer, Trainer, build_model, load_corpus, uniform_loss


def run_preset(name: str, text: str) -> dict:
    preset = PRESETS[name]
    tokenizer = CharTokenizer.from_text(text)
    model_cfg = replace(preset.model, vocab_size=tokenizer.vocab_size)
    train_cfg = replace(preset.train, device="cpu")
    trainer = Trainer(build_model(model_cfg, train_cfg.seed), tokenizer, text, train_cfg)
    started = time.perf_counter()
    events = list(trainer.events())
    wall = time.perf_counter() - started
    evals = [e for e in events if e.val_loss is not None]
    return {"wall": wall, "steps": trainer.step, "train": evals[-1].train_eval_loss, "val": evals[-1].val_loss,
            "best": min(e.val_loss for e in evals), "uniform": uniform_loss(tokenizer.vocab_size),
            "early": trainer.stopped_early, "params": model_cfg.num_params()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print_header("Presets on the default corpus")
    text = load_corpus(args.corpus)
    print(f"corpus {args.corpus}: {len(text):,} characters\n")
    print("| preset | parameters | steps | wall s (median of runs) | train loss | val loss | best val | ln V |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.presets:
        runs = [run_preset(name, text) for _ in range(args.repeats)]
        r = runs[-1]
        wall = statistics.median(x["wall"] for x in runs)
        steps = f"{r['steps']:,}" + (" (stopped early)" if r["early"] else "")
        print(f"| {name} | {r['params']:,} | {steps} | {wall:.1f} | {r['train']:.3f} | {r['val']:.3f} | "
              f"{r['best']:.3f} | {r['uniform']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
