"""Training throughput: tokens per second of one optimizer step, four implementations side by side.

- project fused: minigpt's Trainer step as it ships (SDPA attention, batches from one
  tensor, fused AdamW, no host sync beyond the divergence check), float32;
- project fused bf16: the same with TrainConfig.dtype="bfloat16" (autocast), where the
  CPU has native bf16 dot products (avx512_bf16 / amx);
- project eager: the Trainer's step with attention written out (softmax(QK^T/sqrt(d_k))V);
- demo: the reference demo's step, re-implemented in bench/baselines.py;
- nanoGPT: nanoGPT's model and train.py step on CPU, re-implemented in bench/baselines.py.

    python -m bench.train_throughput                    # demo and baby configs
    python -m bench.train_throughput --configs baby --steps 20 --repeats 7

"demo" is the reference demo's model (d_model 64, 4 heads, 3 layers, d_ff 256, block 30,
batch 16, dropout 0.1) on its own Chinese paragraph; "baby" is nanoGPT's baby Shakespeare
model (4 x 4 x 128, block 64, batch 12, dropout 0) on --data or, without it, on Python's docs.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

from minigpt import CharTokenizer, TrainConfig, Trainer, build_model, load_corpus

from .baselines import DemoGPT, DemoStep, NanoGPT, NanoStep, nano_config
from .common import (
    BABY, DEMO, Shape, add_common_args, apply_threads, clock_from, has_bf16_matmul, interleave, paired_ratio,
    print_header, print_table,
)

CONFIGS = {"demo": DEMO, "baby": BABY}
DEMO_WINDOWS = 20_000  # the demo's DataLoader holds one Python list per window: keep the corpus small


def project_case(shape: Shape, text: str, tokenizer: CharTokenizer, steps: int, batch_size: int,
                 attn_implementation: str = "sdpa", dtype: str = "float32") -> Callable[[], None]:
    """`steps` Trainer steps; "eager" re-does compute_gradients with attn_implementation="eager"."""
    # the demo's max_len 128: the same embedding table in every case
    model_cfg = shape.model(tokenizer.vocab_size, max_len=max(128, shape.block_size))
    train_cfg = TrainConfig(batch_size=batch_size, block_size=shape.block_size, max_steps=10**9,
                            # never stops, never evaluates: the step alone is timed
                            eval_interval=10**9, dtype=dtype, device="cpu")
    trainer = Trainer(build_model(model_cfg, seed=0), tokenizer, text, train_cfg)

    def eager_gradients() -> None:
        trainer.optimizer.zero_grad(set_to_none=True)
        x, y = trainer.next_batch()
        with trainer._autocast():  # the Trainer's own autocast, so eager differs from fused by attention alone
            _, loss = trainer.model(x, y, attn_implementation="eager")
        loss.backward()

    # the update is the same either way
    gradients = trainer.compute_gradients if attn_implementation == "sdpa" else eager_gradients

    def run() -> None:
        for _ in range(steps):
            gradients()
            trainer.apply_update()

    return run


def demo_case(shape: Shape, ids: list[int], vocab_size: int, steps: int) -> Callable[[], None]:
    torch.manual_seed(0)
    model = DemoGPT(vocab_size, shape.d_model, shape.num_heads, shape.num_layers, shape.d_ff,
                    max_len=max(128, shape.block_size), dropout=shape.dropout)
    # the demo's DataLoader, as it trains
    step = DemoStep(model, ids[:DEMO_WINDOWS], shape.batch_size, shape.block_size)

    def run() -> None:
        for _ in range(steps):
            step()

    return run


def nano_case(shape: Shape, ids: torch.Tensor, vocab_size: int, steps: int) -> Callable[[], None]:
    torch.manual_seed(0)
    model = NanoGPT(nano_config(shape, vocab_size))  # seeded above: the same initial weights every round
    step = NanoStep(model, ids, shape.batch_size, shape.block_size)

    def run() -> None:
        for _ in range(steps):
            step()

    return run


def bench_config(name: str, shape: Shape, args: argparse.Namespace) -> None:
    text = load_corpus(args.data if args.data and name == "baby" else shape.corpus)
    tokenizer = CharTokenizer.from_text(text)
    ids = tokenizer.encode(text)
    # about 30k tokens a round, any shape
    steps = args.steps or max(10, 30_000 // (shape.batch_size * shape.block_size))
    tokens = steps * shape.batch_size * shape.block_size
    cases = {
        "demo (re-implemented)": demo_case(shape, ids, tokenizer.vocab_size, steps),
        "nanoGPT (re-implemented)": nano_case(shape, torch.tensor(ids), tokenizer.vocab_size, steps),
        "project eager": project_case(shape, text, tokenizer, steps, shape.batch_size, attn_implementation="eager"),
        "project fused": project_case(shape, text, tokenizer, steps, shape.batch_size),
    }
    if args.bf16:
        cases["project fused bf16"] = project_case(shape, text, tokenizer, steps, shape.batch_size, dtype="bfloat16")
    big = args.big_batch
    if big and big != shape.batch_size:  # the same tokens in fewer, larger steps
        big_steps = max(1, tokens // (big * shape.block_size))
        for dtype in ("float32", "bfloat16") if args.bf16 else ("float32",):
            label = f"project fused{' bf16' if dtype == 'bfloat16' else ''}, batch {big}"
            cases[label] = project_case(shape, text, tokenizer, big_steps, big, dtype=dtype)
    counts = {label: tokens for label in cases}  # tokens per round of each case: the big batch's differ by rounding
    if big and big != shape.batch_size:
        for label in cases:
            if label.endswith(f"batch {big}"):
                counts[label] = big_steps * big * shape.block_size

    results = interleave(cases, repeats=args.repeats, warmup=1, clock=clock_from(args.clock))
    demo, nano = results["demo (re-implemented)"], results["nanoGPT (re-implemented)"]
    rows = []
    for label, secs in results.items():
        # compared per token: cases of different batch sizes line up
        per_token = secs.map(lambda s, n=counts[label]: s / n)
        rows.append([
            label, secs.map(lambda s, n=counts[label]: n / s).fmt(0),
            per_token.map(lambda s: s * shape.batch_size * shape.block_size * 1e3).fmt(2),
            paired_ratio(demo.map(lambda s: s / tokens), per_token).fmt(2),
            paired_ratio(nano.map(lambda s: s / tokens), per_token).fmt(2),
        ])
    print(f"{name} config: d_model {shape.d_model}, {shape.num_heads} heads, {shape.num_layers} layers, "
          f"d_ff {shape.d_ff}, block {shape.block_size}, batch {shape.batch_size}, dropout {shape.dropout}, "
          f"vocab {tokenizer.vocab_size}; {steps} steps ({tokens:,} tokens) per round, {args.repeats} rounds")
    print_table(["implementation", "tokens/s", f"ms per {shape.batch_size}x{shape.block_size}",
                 "x demo", "x nanoGPT"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument("--steps", type=int, default=0, help="optimizer steps per round (0: about 30k tokens)")
    parser.add_argument("--data", default=None, help="text file for the baby config (e.g. Tiny Shakespeare)")
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=has_bf16_matmul(),
                        help="add the bf16-autocast fast path (default: on where the CPU has bf16 dot products)")
    parser.add_argument("--big-batch", type=int, default=64,
                        help="also run the fast path at this batch size over the same tokens (0: skip)")
    add_common_args(parser, repeats=5)
    args = parser.parse_args()
    apply_threads(args.threads)
    print_header("Training throughput")
    print("ratios are per round (each round runs every implementation once, in rotating order); "
          f"clock: {args.clock}\n")
    for name in args.configs:
        bench_config(name, CONFIGS[name], args)


if __name__ == "__main__":
    main()
