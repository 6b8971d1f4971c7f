"""A checkpoint's header, `config.json`, and the names of its files: read and checked without torch.

The header holds the format tag and version, the model config, the tokenizer's vocabulary, the
training config and metadata. Every refusal is a `CheckpointError`, a sentence saying why.
minigpt.checkpoint loads the weights beside it; this module imports no torch, so that Home can
describe the shipped model before torch has loaded.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import ConfigError, GPTConfig, TrainConfig
from .messages import LabError
from .tokenizer import CharTokenizer

FORMAT = "minigpt"
FORMAT_VERSION = 2
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
OPTIMIZER_NAME = "optimizer.safetensors"
MAX_POSITION_TABLE = 2**25           # max_len * d_model: the one allocation the weights don't bound
_REQUIRED_KEYS = {"format", "format_version", "model", "vocab", "weights_sha256"}
_OPTIONAL_KEYS = {"train", "meta", "optimizer"}


class CheckpointError(LabError, ValueError):
    """A checkpoint that cannot be saved or loaded, with a sentence saying why."""


@dataclass(frozen=True)
class Header:
    """What config.json says of a checkpoint, checked: enough to describe the model without building it."""

    model_config: GPTConfig
    tokenizer: CharTokenizer
    train_config: TrainConfig | None
    meta: dict[str, Any]
    config: dict[str, Any] = field(repr=False)  # the whole of config.json, its envelope checked


def read_header(data: bytes) -> Header:
    """config.json's bytes, checked as a load checks them (CheckpointError says why not)."""
    config = parse_config(data)
    model = model_config(config["model"])
    tokenizer = tokenizer_of(config["vocab"], model.vocab_size)
    train = train_config_of(config.get("train"))
    meta = config.get("meta") or {}
    if not isinstance(meta, dict):
        raise CheckpointError("config.json's meta must be a JSON object, got {type}.", type=type(meta).__name__)
    return Header(model, tokenizer, train, meta, config)


def folder_header(folder: str | Path) -> Header:
    """The header of a checkpoint folder (its config.json)."""
    return read_header((Path(folder) / CONFIG_NAME).read_bytes())


def parse_config(data: bytes) -> dict[str, Any]:
    """Check config.json's envelope: format, version and keys."""
    try:
        config = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise CheckpointError("config.json is not valid UTF-8 JSON ({error}).", error=error) from None
    if not isinstance(config, dict):
        raise CheckpointError("config.json must hold a JSON object, got {type}.", type=type(config).__name__)
    if config.get("format") != FORMAT:
        raise CheckpointError(
            "config.json is not a MiniGPT checkpoint: its format is {format!r}, expected {expected!r}.",
            format=config.get("format"), expected=FORMAT,
        )
    version = config.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError("config.json's format_version must be a positive integer, got {version!r}.",
                              version=version)
    if version > FORMAT_VERSION:
        raise CheckpointError("this checkpoint uses format version {version}, written by a newer MiniGPT: "
                              "update MiniGPT to load it; this one reads version {supported}.",
                              version=version, supported=FORMAT_VERSION)
    if version < FORMAT_VERSION:
        raise CheckpointError("this checkpoint uses format version {version}, written by an older MiniGPT; "
                              "this one reads version {supported}.", version=version, supported=FORMAT_VERSION)
    unknown = sorted(set(config) - _REQUIRED_KEYS - _OPTIONAL_KEYS)
    if unknown:
        raise CheckpointError("config.json has unknown keys: {keys}.", keys=", ".join(unknown))
    missing = sorted(_REQUIRED_KEYS - set(config))
    if missing:
        raise CheckpointError("config.json lacks required keys: {keys}.", keys=", ".join(missing))
    return config


def model_config(data: Any) -> GPTConfig:
    try:
        config = GPTConfig.from_dict(data)
    except ConfigError as error:
        raise CheckpointError("config.json's model config is invalid: {error}", error=error) from None
    if config.max_len * config.d_model > MAX_POSITION_TABLE:
        raise CheckpointError(
            "config.json asks for max_len x d_model = {values} position values, more than the {limit} this "
            "loader allows.", values=config.max_len * config.d_model, limit=MAX_POSITION_TABLE,
        )
    return config


def tokenizer_of(vocab: Any, vocab_size: int) -> CharTokenizer:
    if not isinstance(vocab, list):
        raise CheckpointError("config.json's vocab must be a list of characters, got {type}.",
                              type=type(vocab).__name__)
    try:
        tokenizer = CharTokenizer(vocab)
    except ValueError as error:
        raise CheckpointError("config.json's vocab is invalid: {error}.", error=error) from None
    if tokenizer.vocab_size != vocab_size:
        raise CheckpointError(
            "config.json lists {chars} vocabulary characters but the model's vocab_size is {vocab_size}.",
            chars=tokenizer.vocab_size, vocab_size=vocab_size,
        )
    return tokenizer


def train_config_of(data: Any) -> TrainConfig | None:
    if data is None:
        return None
    try:
        return TrainConfig.from_dict(data)
    except ConfigError as error:
        raise CheckpointError("config.json's training config is invalid: {error}", error=error) from None
