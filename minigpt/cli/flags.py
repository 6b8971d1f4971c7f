"""The flags generated from GPTConfig and TrainConfig: one flag per field, one source of defaults."""
from __future__ import annotations

import argparse
import dataclasses

from ..config import GPTConfig, TrainConfig

MODEL_FLAGS = [f for f in dataclasses.fields(GPTConfig) if f.name != "vocab_size"]
TRAIN_FLAGS = [f for f in dataclasses.fields(TrainConfig) if f.name != "betas"]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_config_flags(parser: argparse.ArgumentParser, fields: list, title: str) -> None:
    """One flag per config field; default None means 'the config's default' (or the checkpoint's)."""
    group = parser.add_argument_group(title)
    for field in fields:
        if isinstance(field.default, bool):
            group.add_argument(_flag(field.name), type=parse_bool, default=None, metavar="true|false",
                               nargs="?", const=True, help=f"default {field.default}; the flag alone means true")
        else:
            group.add_argument(_flag(field.name), type=type(field.default), default=None,
                               help=f"default {field.default}")


def parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def overrides(args: argparse.Namespace, fields: list) -> dict:
    """The fields whose flags were given."""
    return {f.name: getattr(args, f.name) for f in fields if getattr(args, f.name) is not None}
