"""How close training comes to the machine: model FLOPs utilisation against measured peaks.

The peaks are measured here, not taken from a datasheet: the best of square matmuls
(n = 512 ... 2048) in float32 and in bfloat16, `repeats` calls each, with the threads
training uses. The training path is the Trainer's step with the config defaults
(dtype "auto", fused AdamW, sdpa) at nanoGPT's baby shape (4 x 4 x 128, block 64), at
batch 12 and at batch 64, timed over `steps` steps after a warm-up. Its achieved FLOP/s
uses nanoGPT's estimate (minigpt.train.flops_per_token: 6N + 12 * layers * d_model * block),
and MFU is that over each peak. The dtype line says what "auto" chose on this machine.

    python -m bench.mfu
    python -m bench.mfu --steps 30 --repeats 5 --threads 1
"""
from __future__ import annotations

import argparse
import time

import torch

from minigpt import CharTokenizer, GPTConfig, TrainConfig, Trainer, build_model, load_corpus
from minigpt.train import autocast_dtype, flops_per_token

from .common import BABY, Stats, add_common_args, apply_threads, print_header, print_table

SIZES = (512, 1024, 2048)


def matmul_peak(dtype: torch.dtype, repeats: int) -> tuple[float, int]:
    """The best FLOP/s of an n x n matmul over SIZES, and the n that reached it."""
    best, best_n = 0.0, SIZES[0]
    for n in SIZES:
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        a @ b  # warm-up: the first call allocates and picks its kernel
        calls = max(2, int(2e10 / (2 * n**3)))  # about 20 GFLOP per timing
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(calls):
                a @ b
            rate = calls * 2 * n**3 / (time.perf_counter() - t0)
            if rate > best:
                best, best_n = rate, n
    return best, best_n


def training_rate(batch_size: int, steps: int, repeats: int) -> tuple[Stats, TrainConfig, GPTConfig]:
    """Tokens/s of the default training step (TrainConfig's defaults but the shape) over `repeats` timings."""
    text = load_corpus(BABY.corpus)
    tokenizer = CharTokenizer.from_text(text)
    model_cfg = BABY.model(tokenizer.vocab_size)
    train_cfg = TrainConfig(batch_size=batch_size, block_size=BABY.block_size, max_steps=10**9, eval_interval=10**9,
                            device="cpu")
    trainer = Trainer(build_model(model_cfg, seed=0), tokenizer, text, train_cfg)

    def run() -> None:
        for _ in range(steps):
            trainer.compute_gradients()
            trainer.apply_update()

    run()  # warm-up
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        rates.append(steps * trainer.tokens_per_step / (time.perf_counter() - t0))
    return Stats(rates), train_cfg, model_cfg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="training steps per timing")
    parser.add_argument("--batches", type=int, nargs="+", default=[BABY.batch_size, 64])
    add_common_args(parser, repeats=5)
    args = parser.parse_args()
    apply_threads(args.threads)
    print_header("MFU against measured matmul peaks")
    peaks = {name: matmul_peak(dtype, args.repeats) for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))}
    print_table(["dtype", "peak GFLOP/s", "at n"], [[k, f"{v:,.0f}", n] for k, (v, n) in
                                                    ((k, (v / 1e9, n)) for k, (v, n) in peaks.items())])
    rows = []
    for batch in args.batches:
        rates, train_cfg, model_cfg = training_rate(batch, args.steps, args.repeats)
        chosen = autocast_dtype(train_cfg.dtype, torch.device("cpu"))
        flops = flops_per_token(model_cfg, train_cfg.block_size)
        achieved = rates.map(lambda r: r * flops / 1e9)
        rows.append([batch, "bf16 autocast" if chosen == torch.bfloat16 else "float32", rates.fmt(0),
                     achieved.fmt(1), achieved.map(lambda g: 100 * g * 1e9 / peaks["fp32"][0]).fmt(1),
                     achieved.map(lambda g: 100 * g * 1e9 / peaks["bf16"][0]).fmt(1)])
    print(f"training step, baby shape, block {BABY.block_size}, dtype 'auto'; "
          f"{flops_per_token(model_cfg, BABY.block_size):,} FLOPs per token "
          f"(nanoGPT's estimate); median (min-max) of {args.repeats} timings of {args.steps} steps")
    print_table(["batch", "auto chose", "tokens/s", "GFLOP/s", "% of fp32 peak", "% of bf16 peak"], rows)


if __name__ == "__main__":
    main()
