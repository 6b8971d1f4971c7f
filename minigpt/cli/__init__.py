"""Command line: `python -m minigpt train | sample | scaling`, one module per command.

Model and training flags are generated from GPTConfig and TrainConfig (one source
of defaults): `--d-model`, `--num-heads`, ..., `--batch-size`, `--max-steps`,
`--lr`, `--seed`, `--device`. Progress and warnings go to stderr, samples and
tables to stdout, so `sample` can be piped. Bad input exits with status 2 and
one line saying what is wrong, never a traceback.
Under torchrun (`torchrun --nproc_per_node=N -m minigpt train ...`) the same `train`
command trains one model with DistributedDataParallel; rank 0 alone logs and writes the
checkpoint (see distributed.py).

The CLI sits above the core and the instruments: it may import minigpt.lab and minigpt.serve,
and the core never imports it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..config import ConfigError
from ..corpus import BUILTIN_CORPORA, DEFAULT_CORPUS, CorpusError
from ..device import DeviceError
from ..header import CheckpointError
from ..lab.scaling import DEMO_D_KS, DEMO_SEED, DEMO_SEQ_LEN
from ..sample import SamplingError
from ..tokenizer import UnknownCharactersError
from ..train import TrainingDiverged
from .flags import MODEL_FLAGS, TRAIN_FLAGS, add_config_flags, parse_bool
from .sample import cmd_sample
from .scaling import cmd_scaling
from .train import cmd_train

USER_ERRORS = (ConfigError, CorpusError, DeviceError, SamplingError, UnknownCharactersError, TrainingDiverged)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m minigpt", description="Train, sample and explain a tiny character-level GPT.")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train a model and write a checkpoint folder")
    train.add_argument("--corpus", default=None,
                       help=f"built-in corpus ({', '.join(BUILTIN_CORPORA)}) or a path to a UTF-8 text file "
                            f"(default {DEFAULT_CORPUS}, or the resumed checkpoint's)")
    train.add_argument("--out", type=Path, required=True,
                       help="run folder: each save is OUT/checkpoint-<step>, and only the newest is kept")
    train.add_argument("--resume", type=Path, default=None, help="checkpoint folder to continue from")
    train.add_argument("--log-interval", type=int, default=10, help="steps between progress updates")
    train.add_argument("--peak-tflops", type=float, default=None,
                       help="peak TFLOP/s of one device in the training dtype (e.g. 989 for an H100 in bf16): "
                            "adds model FLOPs utilisation (MFU) to the progress line")
    train.add_argument("--save-optimizer", type=parse_bool, default=True, metavar="true|false",
                       help="keep optimizer state in the checkpoint so --resume continues exactly (default true)")
    add_config_flags(train, MODEL_FLAGS, "model (GPTConfig)")
    add_config_flags(train, TRAIN_FLAGS, "training (TrainConfig)")

    sample = sub.add_parser("sample", help="generate text from a checkpoint")
    sample.add_argument("--checkpoint", type=Path, required=True)
    sample.add_argument("--prompt", default="")
    sample.add_argument("--temperature", type=float, default=0.8, help="0 = greedy")
    sample.add_argument("--top-k", type=int, default=None, help="keep the k likeliest tokens (0 = off)")
    sample.add_argument("--top-p", type=float, default=None, help="keep the smallest set with this much mass")
    sample.add_argument("--seed", type=int, default=None)
    sample.add_argument("--max-new-tokens", type=int, default=200)
    sample.add_argument("--device", default="auto")

    scaling = sub.add_parser("scaling", help="print the sqrt(d_k) scaling experiment")
    scaling.add_argument("--d-k", type=int, nargs="+", default=list(DEMO_D_KS))
    scaling.add_argument("--seq-len", type=int, default=DEMO_SEQ_LEN)
    scaling.add_argument("--seed", type=int, default=DEMO_SEED)
    scaling.add_argument("--num-samples", type=int, default=1)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    commands = {"train": cmd_train, "sample": cmd_sample, "scaling": cmd_scaling}
    try:
        return commands[args.command](args)
    except (*USER_ERRORS, CheckpointError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
