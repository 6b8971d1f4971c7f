"""How close training comes to the machine: model FLOPs utilisation against measured peaks.

The peaks are measured here, not taken from a datasheet: the best of square matmuls
(n = 512 ... 2048) in float32 and in bfloat16, `repeats` calls each, with the threads
training uses. The training path is the Trainer's step with the config defaults
(dtype "auto", fused AdamW, sdpa) at nanoGPT's baby shape (4 x 4 x 128, block 64), at
batch 12 and at batch 64, timed over `steps` steps after a warm-up. Its achieved FLOP/s
uses nanoGPT's estimate (minigpt.train.flops_per_token: 6N + 12 * layers * d_model * block),
and MFU is that over each peak. The dtype line says what "auto" chose on this machine.

`--profile` asks where a step's time goes. From nanoGPT's baby shape (4 layers, width 128,
d_ff 4 x width, batch 12, block 64, dropout 0), one sweep grows the block (64 -> 512) and
another the width (64 -> 512, heads of 32 dimensions). Each point is minigpt's Trainer step; the
points of a sweep are timed in interleaved rounds, and "x first" is the per-round ratio to the
first point.

The breakdown comes from torch.profiler over a few more steps: forward ops are labelled by
the module they run in (forward hooks open a record_function around each attention and
feed-forward module), backward ops inherit the label of the forward op that created them
(autograd's sequence numbers), and the optimizer step runs under its own label:
- attention core: scaled-dot-product attention itself, softmax(QK^T/sqrt(d_k))V (forward and backward);
- QKV+W_O: the attention module's projections and head reshuffles (forward and backward);
- FFN: linear1, GELU, linear2 (forward and backward);
- dropout: the random masks and their products (only where dropout > 0);
- optimizer: gradient clipping and the fused AdamW step;
- other ops: embedding, LayerNorms, LM head and loss, gradient accumulation, zero_grad, batches;
- overhead: step time outside any op (Python, autograd and dispatcher bookkeeping).

    python -m bench.mfu
    python -m bench.mfu --steps 30 --repeats 5 --threads 1
    python -m bench.mfu --profile
    python -m bench.mfu --profile --dtype bfloat16 --blocks 64 256 --widths 128 512
"""
from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

from minigpt import CharTokenizer, GPTConfig, TrainConfig, Trainer, build_model, load_corpus
from minigpt.train import autocast_dtype, flops_per_token

from .common import (
    BABY, DEMO, Stats, add_common_args, apply_threads, clock_from, interleave, paired_ratio, print_header, print_table,
)

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


# ---------------------------------------------------------------- where a step's time goes (--profile)
CATEGORIES = ("attention core", "QKV+W_O", "FFN", "dropout", "optimizer", "other ops", "overhead")
DROPOUT_OPS = ("aten::dropout", "aten::native_dropout", "aten::bernoulli_")


@dataclass(frozen=True)
class Point:
    width: int
    block: int
    layers: int
    batch: int
    dtype: str
    heads: int = 0       # 0: width / 32
    d_ff: int = 0        # 0: 4 x width
    dropout: float = 0.0

    @property
    def label(self) -> str:
        return f"width {self.width}, block {self.block}, batch {self.batch}, {self.dtype}"


def make_trainer(point: Point, text: str, tokenizer: CharTokenizer) -> Trainer:
    model_cfg = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=point.width,
                          num_heads=point.heads or max(1, point.width // 32), num_layers=point.layers,
                          d_ff=point.d_ff or 4 * point.width, max_len=point.block, dropout=point.dropout)
    train_cfg = TrainConfig(batch_size=point.batch, block_size=point.block, max_steps=10**9, eval_interval=10**9,
                            dtype=point.dtype, device="cpu")
    return Trainer(build_model(model_cfg, seed=0), tokenizer, text, train_cfg)


def train_steps(trainer: Trainer, steps: int, label_optimizer: bool = False) -> Callable[[], None]:
    def run() -> None:
        for _ in range(steps):
            trainer.compute_gradients()
            with record_function("optimizer") if label_optimizer else contextlib.nullcontext():
                trainer.apply_update()

    return run


def label_modules(trainer: Trainer) -> list:
    """Forward hooks that run each attention and FFN module inside a named record_function."""
    handles = []
    for block in trainer.model.blocks:
        for name, module in (("attention", block.self_attn), ("FFN", block.ffn)):
            def enter(mod, args, name=name):
                mod._bench_range = record_function(name)
                mod._bench_range.__enter__()

            def leave(mod, args, output):
                mod._bench_range.__exit__(None, None, None)

            handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave)]
    return handles


def _category(event) -> str | None:
    """The category of an op inside a labelled range or a dropout, else None (other ops)."""
    child = None
    while event is not None:
        if event.name in DROPOUT_OPS:
            return "dropout"
        if event.name == "attention":
            return "attention core" if child is not None and "scaled_dot_product" in child.name else "QKV+W_O"
        if event.name in ("FFN", "optimizer"):
            return event.name
        child, event = event, event.cpu_parent
    return None


def breakdown(trainer: Trainer, steps: int) -> dict[str, float]:
    """Fractions of the profiled step time per category (see the module docstring)."""
    handles = label_modules(trainer)
    run = train_steps(trainer, steps, label_optimizer=True)
    run()  # warm the hooks
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        run()
        wall_us = (time.perf_counter() - t0) * 1e6
    for handle in handles:
        handle.remove()
    events = list(prof.events())
    category_by_seq: dict[int, str] = {}
    for event in events:
        category = _category(event)
        if category is not None and event.sequence_nr >= 0 and not event.name.startswith("autograd::"):
            category_by_seq[event.sequence_nr] = category
    totals = dict.fromkeys(CATEGORIES, 0.0)
    for event in events:
        parent = event.cpu_parent
        if parent is not None and parent.name in ("attention", "FFN", "optimizer"):
            totals[_category(event)] += event.cpu_time_total  # ops directly inside a labelled range
        elif parent is not None:
            continue  # nested deeper: inside its parent's time
        elif event.name in DROPOUT_OPS:
            totals["dropout"] += event.cpu_time_total
        elif event.name in ("attention", "FFN", "optimizer"):
            inside = sum(child.cpu_time_total for child in event.cpu_children)
            totals["QKV+W_O" if event.name == "attention" else event.name] += event.cpu_time_total - inside
        elif event.name.startswith("autograd::engine::evaluate_function") and event.sequence_nr in category_by_seq:
            totals[category_by_seq[event.sequence_nr]] += event.cpu_time_total
        else:
            totals["other ops"] += event.cpu_time_total
    totals["overhead"] = max(0.0, wall_us - sum(totals.values()))
    whole = sum(totals.values())
    return {k: v / whole for k, v in totals.items()}


def sweep(title: str, points: list[Point], text: str, tokenizer: CharTokenizer, args: argparse.Namespace) -> None:
    trainers = {p: make_trainer(p, text, tokenizer) for p in points}
    cases = {p: train_steps(t, args.steps) for p, t in trainers.items()}
    results = interleave(cases, repeats=args.repeats, warmup=1, clock=clock_from(args.clock))
    base = results[points[0]]
    rows = []
    for point, secs in results.items():
        tokens = args.steps * point.batch * point.block
        shares = breakdown(trainers[point], args.profile_steps)
        rows.append([
            point.label, secs.map(lambda s: s / args.steps * 1e3).fmt(1), paired_ratio(secs, base).fmt(2),
            secs.map(lambda s, n=tokens: n / s).fmt(0), *(f"{shares[c] * 100:.0f}%" for c in CATEGORIES),
        ])
    print(f"{title} ({args.steps} steps per round, {args.repeats} rounds; shares of the step from "
          f"{args.profile_steps} profiled steps)")
    print_table(["shape", "ms/step", "x first", "tokens/s", *CATEGORIES], rows)


def bench_profile(args: argparse.Namespace) -> None:
    """--profile: the two sweeps from the baby shape, and the reference demo's config, each point profiled."""
    print_header("Step time against block size and width")
    text = load_corpus(args.data or BABY.corpus)
    tokenizer = CharTokenizer.from_text(text)
    shape = dict(layers=args.layers, batch=args.batch, dtype=args.dtype)
    sweep(f"block size, {args.layers} layers", [Point(args.base_width, b, **shape) for b in args.blocks],
          text, tokenizer, args)
    sweep(f"width, {args.layers} layers", [Point(w, args.base_block, **shape) for w in args.widths],
          text, tokenizer, args)
    if args.demo:
        demo = dict(width=DEMO.d_model, block=DEMO.block_size, layers=DEMO.num_layers, heads=DEMO.num_heads,
                    d_ff=DEMO.d_ff, dropout=DEMO.dropout)
        points = [Point(batch=DEMO.batch_size, dtype="float32", **demo),
                  Point(batch=DEMO.batch_size, dtype="bfloat16", **demo), Point(batch=64, dtype="bfloat16", **demo)]
        sweep(f"the reference demo's config ({DEMO.num_layers} layers, d_ff {DEMO.d_ff}, dropout {DEMO.dropout})",
              points, load_corpus(DEMO.corpus), CharTokenizer.from_text(load_corpus(DEMO.corpus)), args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=None,
                        help="training steps per timing (default 20), with --profile per timed round (default 5)")
    parser.add_argument("--batches", type=int, nargs="+", default=[BABY.batch_size, 64])
    parser.add_argument("--profile", action="store_true",
                        help="instead: step time as the block and the width grow, and where it goes")
    parser.add_argument("--blocks", nargs="+", type=int, default=[64, 128, 256, 512], help="with --profile")
    parser.add_argument("--widths", nargs="+", type=int, default=[64, 128, 256, 512], help="with --profile")
    parser.add_argument("--base-width", type=int, default=BABY.d_model, help="with --profile: the block sweep's")
    parser.add_argument("--base-block", type=int, default=BABY.block_size, help="with --profile: the width sweep's")
    parser.add_argument("--layers", type=int, default=BABY.num_layers, help="with --profile")
    parser.add_argument("--batch", type=int, default=BABY.batch_size, help="with --profile")
    parser.add_argument("--profile-steps", type=int, default=3, help="with --profile: steps under the profiler")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="with --profile")
    parser.add_argument("--demo", action=argparse.BooleanOptionalAction, default=True,
                        help="with --profile: also the reference demo's config (dropout 0.1) in float32 and bfloat16")
    parser.add_argument("--data", default=None,
                        help="with --profile: training text (default: Python's docs; only its vocabulary matters)")
    add_common_args(parser, repeats=5)
    args = parser.parse_args()
    apply_threads(args.threads)
    if args.profile:
        args.steps = args.steps or 5  # a profiled sweep has many points: fewer steps a round
        bench_profile(args)
        return
    args.steps = args.steps or 20
    print_header("MFU against measured matmul peaks")
    # measured, not a datasheet's: the peak this build of torch reaches here
    peaks = {name: matmul_peak(dtype, args.repeats) for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))}
    print_table(["dtype", "peak GFLOP/s", "at n"], [[k, f"{v:,.0f}", n] for k, (v, n) in
                                                    ((k, (v / 1e9, n)) for k, (v, n) in peaks.items())])
    rows = []
    for batch in args.batches:
        rates, train_cfg, model_cfg = training_rate(batch, args.steps, args.repeats)
        chosen = autocast_dtype(train_cfg.dtype, torch.device("cpu"))  # what dtype "auto" picks on this CPU
        flops = flops_per_token(model_cfg, train_cfg.block_size)
        # GFLOP/s by nanoGPT's estimate, so the figures compare with its MFU
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
