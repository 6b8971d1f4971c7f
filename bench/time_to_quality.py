"""Time to quality on Tiny Shakespeare: the project's recipe against nanoGPT's "baby" recipe.

Both models learn the same 65-character vocabulary on the same 90/10 split, and both
are scored on the same fixed validation batches (eval_iters batches of 12 x 64, as
nanoGPT's baby run scores itself). The clock runs during training only and stops for
each evaluation, for both recipes alike. A recipe's time to quality is the training
time at its first evaluation with val loss <= --target.

    python -m bench.time_to_quality --data ../shared/data/tinyshakespeare.txt

nanoGPT's recipe: 4 layers x 4 heads x 128, block 64, batch 12, dropout 0, AdamW
(lr 1e-3, betas 0.9/0.99, weight decay 0.1), warmup 100, cosine to 1e-4 at 2000 iters,
grad clip 1. The project's recipe is `PROJECT_MODEL` + `PROJECT_TRAIN` below, run by
minigpt's own Trainer, so `python -m minigpt train` reproduces it (the command is printed).
"""
from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from minigpt import CharTokenizer, GPTConfig, TrainConfig, Trainer, build_model, load_corpus
from minigpt.data import get_batch, split_tokens

from .baselines import NanoGPT, NanoStep, nano_config
from .common import BABY, Stats, add_common_args, apply_threads, clock_from, paired_ratio, print_header, print_table
from minigpt.model import eval_mode

PROJECT_MODEL = GPTConfig(d_model=128, num_heads=4, num_layers=4, d_ff=512, max_len=64, dropout=0.0)
PROJECT_TRAIN = TrainConfig(
    batch_size=16, block_size=64, lr=3e-3, min_lr=3e-4, weight_decay=0.1, betas=(0.9, 0.99),
    # bf16: AMX CPUs
    max_steps=1500, warmup_steps=100, schedule="cosine", grad_clip=1.0, dtype="bfloat16", device="cpu",
)
NANO_STEPS = 2000  # nanoGPT's recipe: BABY, nanoGPT's model, its max_iters
EVAL_BATCH, EVAL_BLOCK = BABY.batch_size, BABY.block_size  # both recipes scored on the same windows


@dataclass
class Point:
    step: int
    seconds: float  # training time so far, evaluations excluded
    val_loss: float


@dataclass
class Run:
    recipe: str
    curve: list[Point]

    def time_to(self, target: float) -> float | None:
        return next((p.seconds for p in self.curve if p.val_loss <= target), None)  # None: never reached

    @property
    def final(self) -> Point:
        return self.curve[-1]


@torch.no_grad()
def val_loss(model: torch.nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Mean loss over fixed batches, in eval mode and float32, for either model."""
    with eval_mode(model):
        loss = sum(model(x, y)[1].item() for x, y in batches) / len(batches)  # both models return (logits, loss)
    return loss


def train_with_evals(
    recipe: str, step: Callable[[], object], model: torch.nn.Module, steps: int, eval_interval: int,
    batches: list, clock: Callable[[], float],
) -> Run:
    """Run `steps` optimizer steps, scoring the model at step 0, every eval_interval steps and at the end."""
    curve, seconds = [Point(0, 0.0, val_loss(model, batches))], 0.0
    for i in range(1, steps + 1):
        t0 = clock()
        step()
        seconds += clock() - t0  # the step alone: evaluations are not training time
        if i % eval_interval == 0 or i == steps:
            curve.append(Point(i, seconds, val_loss(model, batches)))
    return Run(recipe, curve)


def run_nano(text_ids: torch.Tensor, seed: int, args: argparse.Namespace, batches: list) -> Run:
    torch.manual_seed(seed)
    model = NanoGPT(nano_config(BABY, args.vocab_size))
    train, _ = split_tokens(text_ids, 0.1, BABY.block_size)  # the project's split: both recipes see the same text
    step = NanoStep(model, train, BABY.batch_size, BABY.block_size, lr=1e-3, min_lr=1e-4, warmup=100,
                    max_iters=NANO_STEPS, weight_decay=0.1, betas=(0.9, 0.99), seed=seed)
    return train_with_evals("nanoGPT", step, model, NANO_STEPS, args.eval_interval, batches, args.clock_fn)


def run_project(text: str, tokenizer: CharTokenizer, seed: int, args: argparse.Namespace, batches: list) -> Run:
    model_cfg = dataclasses.replace(PROJECT_MODEL, vocab_size=tokenizer.vocab_size)
    train_cfg = project_train_config(args, seed)
    trainer = Trainer(build_model(model_cfg, seed, train_cfg.device), tokenizer, text, train_cfg)

    def step() -> None:
        trainer.compute_gradients()
        trainer.apply_update()

    return train_with_evals("project", step, trainer.model, train_cfg.max_steps, args.eval_interval, batches, args.clock_fn)


def project_train_config(args: argparse.Namespace, seed: int = PROJECT_TRAIN.seed) -> TrainConfig:
    overrides = {k: v for k, v in dict(lr=args.lr, max_steps=args.steps, batch_size=args.batch, dtype=args.dtype,
                                        warmup_steps=args.warmup).items() if v is not None}
    if args.lr is not None:
        overrides["min_lr"] = args.lr / 10  # nanoGPT's ratio of the floor to the peak
    return dataclasses.replace(PROJECT_TRAIN, seed=seed, **overrides)


def reproduce_command(args: argparse.Namespace) -> str:
    """The `python -m minigpt train` line that runs the project's recipe."""
    cfg = project_train_config(args)
    flags = {
        "d-model": PROJECT_MODEL.d_model, "num-heads": PROJECT_MODEL.num_heads, "num-layers": PROJECT_MODEL.num_layers,
        "d-ff": PROJECT_MODEL.d_ff, "max-len": PROJECT_MODEL.max_len, "dropout": PROJECT_MODEL.dropout,
        "batch-size": cfg.batch_size, "block-size": cfg.block_size, "lr": cfg.lr, "min-lr": cfg.min_lr,
        "weight-decay": cfg.weight_decay, "max-steps": cfg.max_steps, "warmup-steps": cfg.warmup_steps,
        "dtype": cfg.dtype, "device": cfg.device,
    }
    return (f"python -m minigpt train --corpus {args.data} --out runs/shakespeare "
            + " ".join(f"--{k} {v}" for k, v in flags.items()))


def fmt_time(seconds: float | None) -> str:
    return "not reached" if seconds is None else f"{seconds:.1f}"


def print_curves(runs: list[Run]) -> None:
    by_recipe: dict[str, list[Run]] = {}
    for run in runs:
        by_recipe.setdefault(run.recipe, []).append(run)
    for recipe, recipe_runs in by_recipe.items():
        print(f"{recipe}: val loss against training time (median over {len(recipe_runs)} runs)")
        rows = []
        for i, point in enumerate(recipe_runs[0].curve):  # every run of a recipe evaluates at the same steps
            secs = Stats([r.curve[i].seconds for r in recipe_runs])
            loss = Stats([r.curve[i].val_loss for r in recipe_runs])
            rows.append([point.step, secs.fmt(1), loss.fmt(3)])
        print_table(["step", "train s", "val loss"], rows)


def print_summary(nano: list[Run], project: list[Run], target: float) -> None:
    rows = []
    for runs in (nano, project):
        reached = [r.time_to(target) for r in runs]
        hits = [t for t in reached if t is not None]
        rows.append([
            runs[0].recipe, runs[0].final.step, Stats([r.final.val_loss for r in runs]).fmt(3),
            Stats([r.final.seconds for r in runs]).fmt(1), f"{len(hits)}/{len(runs)}",
            Stats(hits).fmt(1) if hits else "not reached",
        ])
    print(f"time to val loss <= {target}")
    print_table(["recipe", "steps", "final val loss", "train s (total)", "runs reaching", f"s to <= {target}"], rows)
    # nanoGPT's reference time: when it reaches the target, else the time its full recipe takes
    nano_ref = Stats([r.time_to(target) or r.final.seconds for r in nano])
    proj_hit = [r.time_to(target) for r in project]
    if all(t is not None for t in proj_hit):
        ratio = paired_ratio(Stats(proj_hit), nano_ref)  # project time / nanoGPT time, run by run
        print(f"project time / nanoGPT time: {ratio.fmt(2)} (goal <= 0.75; nanoGPT's time is its time to "
              f"the target, or its whole run where it never gets there)")
    else:
        print("project time / nanoGPT time: n/a (the project's recipe missed the target in some runs)")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="Tiny Shakespeare text file (e.g. ../shared/data/tinyshakespeare.txt)")
    parser.add_argument("--target", type=float, default=1.88, help="val loss to reach")
    parser.add_argument("--eval-interval", type=int, default=250, help="steps between evaluations (both recipes)")
    parser.add_argument("--eval-iters", type=int, default=20, help="validation batches of 12 x 64 per evaluation")
    parser.add_argument("--recipes", nargs="+", choices=("nanogpt", "project"), default=["nanogpt", "project"])
    group = parser.add_argument_group("project recipe overrides (for exploring; defaults are PROJECT_TRAIN)")
    group.add_argument("--lr", type=float, default=None, help="peak lr (min_lr becomes lr / 10)")
    group.add_argument("--steps", type=int, default=None)
    group.add_argument("--batch", type=int, default=None)
    group.add_argument("--warmup", type=int, default=None)
    group.add_argument("--dtype", choices=("float32", "bfloat16"), default=None)
    add_common_args(parser, repeats=5)
    args = parser.parse_args()
    apply_threads(args.threads)
    args.clock_fn = clock_from(args.clock)

    text = load_corpus(args.data)
    tokenizer = CharTokenizer.from_text(text)
    args.vocab_size = tokenizer.vocab_size
    ids = torch.tensor(tokenizer.encode(text), dtype=torch.long)
    _, val = split_tokens(ids, 0.1, EVAL_BLOCK)
    generator = torch.Generator().manual_seed(0)
    batches = [tuple(t.contiguous() for t in get_batch(val, EVAL_BATCH, EVAL_BLOCK, generator)) for _ in range(args.eval_iters)]

    print_header("Time to quality on Tiny Shakespeare")
    print(f"corpus {len(text):,} characters, vocabulary {tokenizer.vocab_size}; clock: {args.clock}, "
          f"evaluations excluded; {args.repeats} runs per recipe, seeds 1337.., interleaved")
    print(f"project recipe: {dataclasses.replace(PROJECT_MODEL, vocab_size=tokenizer.vocab_size)}")
    print(f"                {project_train_config(args)}")
    print(f"reproduce it:   {reproduce_command(args)}")
    print()

    runs: list[Run] = []
    for r in range(args.repeats):
        seed = 1337 + r
        order = args.recipes if r % 2 == 0 else args.recipes[::-1]
        for recipe in order:
            run = run_nano(ids, seed, args, batches) if recipe == "nanogpt" else run_project(text, tokenizer, seed, args, batches)
            runs.append(run)
            print(f"  run {r + 1}/{args.repeats} {run.recipe}: val {run.final.val_loss:.3f} after {run.final.seconds:.1f} s, "
                  f"<= {args.target} at {fmt_time(run.time_to(args.target))} s", flush=True)
    print()
    print_curves(runs)
    nano = [r for r in runs if r.recipe == "nanoGPT"]
    project = [r for r in runs if r.recipe == "project"]
    if nano and project:
        print_summary(nano, project, args.target)


if __name__ == "__main__":
    main()
