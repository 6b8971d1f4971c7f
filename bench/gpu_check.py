"""A check for a CUDA machine: does the library train there as it does on the CPU, and how fast?

One short script that needs nothing beyond `requirements.txt` (a CUDA build of the same torch where
there is a GPU). It trains the Train page's default preset (Small, early stopping off) on the default
corpus, from the same seed:

1. in float32 on the CPU and on CUDA, and compares every logged train loss and every validation
   loss, within `--tolerance` relative (default 1e-4). TF32 is turned off for it, and dropout too:
   the masks come from each device's own generator, which CPU and CUDA draw differently;
2. on CUDA with the library's autocast (`dtype="auto"`: bf16 where the GPU has it; the library has
   no fp16 autocast, so elsewhere this is float32 again): its final validation loss within 2% of
   float32's;
3. steps/s on CUDA in float32 and with autocast (the preset as the Train page runs it, dropout on);
4. how many such runs one GPU trains at once, each in a process of its own, while each keeps at
   least 0.9 of its speed alone: 1, 2, 4, ... runs, until one falls below.

It prints every figure and exits 0 when the losses match, 1 on a mismatch, and 2 where there is
no CUDA device (nothing was checked). `--device cpu` runs the same script with the CPU in CUDA's
place: a check of the script itself, not of a GPU.

    python -m bench.gpu_check                      # on a CUDA machine
    python -m bench.gpu_check --device cpu --steps 40 --most 2   # the script, on any machine
"""
from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from dataclasses import replace

import torch

from minigpt import DEFAULT_CORPUS, DEFAULT_PRESET, PRESETS, CharTokenizer, GPTConfig, TrainConfig, load_corpus
from minigpt.train import Trainer, build_model

from .common import print_header, print_table

NO_DEVICE, MISMATCH = 2, 1
AUTOCAST_TOLERANCE = 0.02  # autocast's final validation loss against float32's, relative
KEEPS_PACE = 0.9           # a run among others counts while it keeps this share of its speed alone


def configs(steps: int, device: str, dtype: str, dropout: bool) -> tuple[str, CharTokenizer, GPTConfig, TrainConfig]:
    preset = PRESETS[DEFAULT_PRESET]
    text = load_corpus(DEFAULT_CORPUS)
    tokenizer = CharTokenizer.from_text(text)
    model = replace(preset.model, vocab_size=tokenizer.vocab_size, **({} if dropout else {"dropout": 0.0})).validate()
    train = replace(preset.train, max_steps=steps, early_stop_patience=0, device=device, dtype=dtype,
                    eval_interval=max(1, steps // 4)).validate(model)
    return text, tokenizer, model, train


def train(steps: int, device: str, dtype: str = "float32", dropout: bool = False) -> dict:
    """One run: its logged (step, train loss), its (step, val loss) and its steps/s over the trainer's
    own time (its evaluations included; a logged loss's .item() waits for the device)."""
    text, tokenizer, model, cfg = configs(steps, device, dtype, dropout)
    trainer = Trainer(build_model(model, cfg.seed, device), tokenizer, text, cfg, log_interval=10)
    events = list(trainer.events())
    sync(device)
    return {"train": [(e.step, e.train_loss) for e in events],
            "val": [(e.step, e.val_loss) for e in events if e.val_loss is not None],
            "steps_per_s": steps / trainer.elapsed if trainer.elapsed else 0.0,
            "autocast": str(trainer.autocast_dtype).replace("torch.", "") if trainer.autocast_dtype else "float32"}


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def worst_relative(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> tuple[float, int | None]:
    """The largest |a - b| / |b| over the steps both logged, and its step."""
    if [s for s, _ in a] != [s for s, _ in b]:
        return float("inf"), None
    worst = max(((abs(x - y) / max(abs(y), 1e-12), s) for (s, x), (_, y) in zip(a, b)), default=(0.0, None))
    return worst


def _timed_run(args: tuple) -> float:
    """A child's run (spawned: CUDA does not survive a fork), started with the others: its steps/s."""
    steps, device, barrier = args
    torch.set_num_threads(1)
    text, tokenizer, model, cfg = configs(steps, device, "auto", dropout=True)
    trainer = Trainer(build_model(model, cfg.seed, device), tokenizer, text, replace(cfg, eval_interval=steps),
                      log_interval=steps)
    barrier.wait()
    started = time.perf_counter()
    for _ in trainer.events():
        pass
    sync(device)
    return steps / (time.perf_counter() - started)


def together(n: int, steps: int, device: str) -> list[float]:
    """n runs at once, each in a process of its own: each one's steps/s."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(n)
        with ctx.Pool(n) as pool:
            return pool.map(_timed_run, [(steps, device, barrier)] * n)


def runs_at_once(steps: int, device: str, most: int) -> None:
    """4.: 2, 4, 8... runs at once until one falls below KEEPS_PACE of a run's speed alone."""
    alone = statistics.median(together(1, steps, device))
    rows, fits, n = [], 1, 2
    while n <= most:
        speeds = together(n, steps, device)
        share = statistics.median(speeds) / alone
        rows.append([n, f"{statistics.median(speeds):.1f}", f"{min(speeds):.1f}", f"{share:.2f}"])
        if share < KEEPS_PACE:
            break
        fits, n = n, n * 2  # doubling: the first count that falls behind ends the search
    print(f"4. runs at once, each in its own process (alone: {alone:.1f} steps/s):")
    print_table(["runs", "median steps/s", "slowest", "share of alone"], rows)
    print(f"   one {device} trains {fits} Small run(s) at once at >= {KEEPS_PACE} of their speed alone")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="optimizer steps of each compared run")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="float32 losses, relative (default 1e-4)")
    parser.add_argument("--device", default="cuda", help="cuda (default), or cpu to check the script itself")
    parser.add_argument("--most", type=int, default=32, help="the most runs tried at once on the device")
    args = parser.parse_args()
    print_header("MiniGPT Lab on a CUDA device, against the CPU")
    device = args.device
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            print(f"no CUDA device here (torch {torch.__version__}, CUDA build: {torch.version.cuda}): nothing checked")
            return NO_DEVICE
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 means float32 for the comparison
        torch.backends.cudnn.allow_tf32 = False
        print(f"device: {torch.cuda.get_device_name(0)}, CUDA {torch.version.cuda}, "
              f"bf16 {'yes' if torch.cuda.is_bf16_supported() else 'no'}")
    else:
        print("device: the CPU in CUDA's place: this checks the script, not a GPU")
    torch.set_num_threads(1)

    cpu, gpu = train(args.steps, "cpu"), train(args.steps, device)  # the same seed and batches: the losses must agree
    worst_train, at_train = worst_relative(gpu["train"], cpu["train"])
    worst_val, at_val = worst_relative(gpu["val"], cpu["val"])
    fp32_ok = max(worst_train, worst_val) <= args.tolerance
    print(f"\n1. float32, dropout off, {args.steps} steps, the same seed: worst train loss difference "
          f"{worst_train:.2e} relative (step {at_train}), val loss {worst_val:.2e} (step {at_val}); "
          f"tolerance {args.tolerance:g}: {'match' if fp32_ok else 'MISMATCH'}")
    print_table(["step", "CPU val loss", f"{device} val loss"],
                [[s, f"{a:.6f}", f"{b:.6f}"] for (s, a), (_, b) in zip(cpu["val"], gpu["val"])])

    mixed = train(args.steps, device, dtype="auto")  # what a run on this device gets by default
    final, final_mixed = gpu["val"][-1][1], mixed["val"][-1][1]
    gap = abs(final_mixed - final) / final
    mixed_ok = gap <= AUTOCAST_TOLERANCE
    print(f"2. autocast ({mixed['autocast']}): final val loss {final_mixed:.4f} against float32's {final:.4f}, "
          f"{gap:.2%} apart; tolerance {AUTOCAST_TOLERANCE:.0%}: {'match' if mixed_ok else 'MISMATCH'}")

    plain, autocast = train(args.steps, device, dropout=True), train(args.steps, device, "auto", dropout=True)
    print(f"3. steps/s on {device}, the preset as the Train page runs it: float32 {plain['steps_per_s']:.1f}, "
          f"autocast ({autocast['autocast']}) {autocast['steps_per_s']:.1f}; the CPU (one thread) "
          f"{cpu['steps_per_s']:.1f}")

    runs_at_once(args.steps, device, args.most)
    return 0 if fp32_ok and mixed_ok else MISMATCH


if __name__ == "__main__":
    sys.exit(main())
