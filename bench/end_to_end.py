"""End to end against nanoGPT's own train.py: two processes, the same run, wall clock.

`python -m minigpt train` with no speed flags, against karpathy/nanoGPT's real `train.py`
with `--device=cpu --compile=False`, at nanoGPT's CPU "baby" recipe from its README
(4 layers x 4 heads x 128, block 64, batch 12, dropout 0, lr 1e-3 to 1e-4 over max_iters,
warmup 100, weight decay 0.1, beta2 0.99, clip 1.0, an evaluation of 20 batches per split
every 250 steps, a checkpoint when it improves) on the same text and the same 90/10 split.
Each process is timed from its start to its exit: interpreter and imports, data, training,
evaluations and checkpoints. Rounds alternate the order (A B, B A, ...), and the speed-up is
nanoGPT's wall time over the project's, round by round.

nanoGPT is not part of this repository: pass the folder of a checkout with `--nanogpt`
(`git clone https://github.com/karpathy/nanoGPT`); the bench works on a copy of its
`train.py`, `model.py` and `configurator.py` in a temporary folder, with the text written
to `data/shakespeare_char/input.txt` and encoded by nanoGPT's own `prepare.py`.

    python -m bench.end_to_end --nanogpt ../nanoGPT --data ../shared/data/tinyshakespeare.txt
    python -m bench.end_to_end --nanogpt ../nanoGPT --data PATH --steps 300 2000 --repeats 3
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import REPO
from .common import BABY, Stats, paired_ratio, print_header, print_table

NANO_FILES = ("train.py", "model.py", "configurator.py", "config/train_shakespeare_char.py",
              "data/shakespeare_char/prepare.py")
NANO_BABY = dict(n_layer=BABY.num_layers, n_head=BABY.num_heads, n_embd=BABY.d_model, block_size=BABY.block_size,
                 batch_size=BABY.batch_size, dropout=BABY.dropout)  # train.py's flags


def nano_command(steps: int, out: Path) -> list[str]:
    """nanoGPT README's CPU command, with max_iters and lr_decay_iters set to `steps`."""
    flags = {"device": "cpu", "compile": False, "eval_iters": 20, "log_interval": 1, **NANO_BABY,  # as the project's
             "max_iters": steps, "lr_decay_iters": steps, "out_dir": str(out)}
    return [sys.executable, "train.py", "config/train_shakespeare_char.py",
            *(f"--{name}={value}" for name, value in flags.items())]


def project_command(steps: int, data: Path, out: Path, compile_: bool = False) -> list[str]:
    """The same run with `python -m minigpt train`: the recipe's settings, no speed flags
    (compile_: the one speed flag this bench tries, --compile, to find where it pays back)."""
    flags = {"corpus": data, "out": out, "d-model": BABY.d_model, "num-heads": BABY.num_heads,
             "num-layers": BABY.num_layers, "d-ff": BABY.d_ff, "max-len": BABY.block_size, "block-size": BABY.block_size,
             "batch-size": BABY.batch_size, "dropout": BABY.dropout, "max-steps": steps,
             "lr": 1e-3, "min-lr": 1e-4, "warmup-steps": 100, "weight-decay": 0.1, "eval-interval": 250,
             "eval-iters": 20, "device": "cpu", **({"compile": "true"} if compile_ else {})}
    return [sys.executable, "-m", "minigpt", "train", *(f"--{name}={value}" for name, value in flags.items())]


def prepare_nanogpt(checkout: Path, data: Path, work: Path) -> Path:
    """A working copy of nanoGPT's scripts with the text encoded by its own prepare.py."""
    missing = [f for f in NANO_FILES if not (checkout / f).is_file()]
    if missing:
        sys.exit(f"--nanogpt {checkout} is not a nanoGPT checkout: missing {', '.join(missing)}")
    nano = work / "nanoGPT"
    for name in NANO_FILES:
        (nano / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(checkout / name, nano / name)
    shutil.copy(data, nano / "data/shakespeare_char/input.txt")  # present: prepare.py downloads nothing
    subprocess.run([sys.executable, "prepare.py"], cwd=nano / "data/shakespeare_char", check=True,
                   stdout=subprocess.DEVNULL)
    return nano


def timed(command: list[str], cwd: Path, env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()  # the whole process: start-up, imports and evaluations count, as for a learner
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done.stdout + done.stderr


def last_val_loss(log: str) -> float | None:
    """The last validation loss either program printed ('val loss 1.8812' / 'val loss 1.8812,')."""
    found = re.findall(r"val loss (\d+\.\d+)", log)  # both programs print it this way
    return float(found[-1]) if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nanogpt", type=Path, required=True, help="folder of a karpathy/nanoGPT checkout")
    parser.add_argument("--data", type=Path, required=True, help="the text to train on (Tiny Shakespeare)")
    parser.add_argument("--steps", type=int, nargs="+", default=[300, 2000])
    parser.add_argument("--repeats", type=int, default=3, help="rounds per step count (each runs both)")
    parser.add_argument("--compile", action="store_true",
                        help="also run the project with --compile (torch.compile) and print where it breaks even")
    args = parser.parse_args()
    print_header("End to end against nanoGPT's train.py")
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # `python -m minigpt` runs in nanoGPT's folder
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        nano = prepare_nanogpt(args.nanogpt.resolve(), args.data.resolve(), work)
        cases = ["nanoGPT", "project"] + ["project --compile"] * args.compile  # --compile: a third case, opt-in
        compiled: dict[int, Stats] = {}
        plain: dict[int, Stats] = {}
        for steps in args.steps:
            times: dict[str, list[float]] = {case: [] for case in cases}
            losses: dict[str, list[float | None]] = {case: [] for case in cases}
            for round_ in range(args.repeats):
                order = cases if round_ % 2 == 0 else cases[::-1]
                for case in order:
                    out = work / f"{case.replace(' --', '-')}-{steps}-{round_}"
                    command = (nano_command(steps, out) if case == "nanoGPT"
                               else project_command(steps, args.data.resolve(), out, compile_=case != "project"))
                    # a fresh compile cache each time: what a first --compile run costs, not a warm rerun
                    cache = {"TORCHINDUCTOR_CACHE_DIR": str(out) + "-inductor"} if case.endswith("compile") else {}
                    seconds, log = timed(command, nano if case == "nanoGPT" else REPO, {**env, **cache})
                    times[case].append(seconds)
                    losses[case].append(last_val_loss(log))
                    print(f"  {steps} steps, round {round_ + 1}, {case}: {seconds:.1f} s, "
                          f"last val loss {losses[case][-1]}", file=sys.stderr)
            nano_s, proj_s = Stats(times["nanoGPT"]), Stats(times["project"])
            plain[steps] = proj_s
            rows.append([steps, nano_s.fmt(1), proj_s.fmt(1), paired_ratio(nano_s, proj_s).fmt(2),
                         _losses(losses["nanoGPT"]), _losses(losses["project"])])
            if args.compile:
                compiled[steps] = Stats(times["project --compile"])
                rows.append([f"{steps} --compile", nano_s.fmt(1), compiled[steps].fmt(1),
                             paired_ratio(nano_s, compiled[steps]).fmt(2), _losses(losses["nanoGPT"]),
                             _losses(losses["project --compile"])])
    print(f"process wall seconds, start-up included ({args.repeats} alternating rounds); "
          f"speed-up = nanoGPT's time / the project's (goal >= 1.3). The project trained in {precision()} "
          f"(dtype auto here); nanoGPT's train.py always trains in float32 on a CPU. nanoGPT also runs one "
          f"step more (iterations 0..N) and evaluates at step 0 too; its model has no biases and learned positions")
    print_table(["steps", "nanoGPT train.py s", "python -m minigpt train s", "speed-up",
                 "nanoGPT last val loss", "project last val loss"], rows)
    if args.compile and len(args.steps) > 1:
        print(break_even(args.steps[0], args.steps[-1], plain, compiled))


def precision() -> str:
    import torch

    from minigpt.train import autocast_dtype

    return "bf16 autocast" if autocast_dtype("auto", torch.device("cpu")) == torch.bfloat16 else "float32"


def break_even(short: int, long: int, plain: dict[int, Stats], compiled: dict[int, Stats]) -> str:
    """Where --compile pays back: its fixed cost over what it saves per step, from two run lengths."""
    per_step = {k: (d[long].median - d[short].median) / (long - short) for k, d in (("plain", plain),
                                                                                  ("compiled", compiled))}
    fixed = {k: d[short].median - per_step[k] * short for k, d in (("plain", plain), ("compiled", compiled))}
    saving = per_step["plain"] - per_step["compiled"]
    extra = fixed["compiled"] - fixed["plain"]
    where = f"after {extra / saving:,.0f} steps" if saving > 0 else "never (a compiled step is not faster)"
    return (f"--compile: {extra:.1f} s more to start (compiling), {1e3 * per_step['compiled']:.1f} ms per step against "
            f"{1e3 * per_step['plain']:.1f} ms; it pays back {where}")


def _losses(values: list[float | None]) -> str:
    return " / ".join("n/a" if v is None else f"{v:.3f}" for v in values)


if __name__ == "__main__":
    main()
