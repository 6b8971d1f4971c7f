"""Checkpoint folders and zips for the tests, good and bad: tiny untrained models over CKPT_TEXT."""
from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from pathlib import Path

import pytest
import torch

from minigpt import CharTokenizer, GPTConfig, MiniGPT
from minigpt.checkpoint import save_pretrained
from minigpt.header import CONFIG_NAME, WEIGHTS_NAME

CKPT_TEXT = "hello world, tiny checkpoints"
TOKENIZER = CharTokenizer.from_text(CKPT_TEXT)


def checkpoint_model(seed: int = 0, num_layers: int = 1) -> MiniGPT:
    """A tiny untrained model over CKPT_TEXT's characters."""
    config = GPTConfig(vocab_size=TOKENIZER.vocab_size, d_model=16, num_heads=2,
                       num_layers=num_layers, d_ff=32, max_len=16, dropout=0.0)
    return MiniGPT(config, seed=seed)


def logits_of(model: MiniGPT) -> torch.Tensor:
    ids = torch.tensor([TOKENIZER.encode("hello tiny")])
    model.eval()
    with torch.no_grad():
        return model(ids)[0]


def train_step(model: MiniGPT, optimizer: torch.optim.Optimizer) -> None:
    ids = torch.tensor([TOKENIZER.encode("tiny world, hello")])
    optimizer.zero_grad()
    _, loss = model(ids[:, :-1], ids[:, 1:])
    loss.backward()
    optimizer.step()


def saved(tmp_path: Path, seed: int = 0, name: str = "ckpt", **kwargs) -> Path:
    return save_pretrained(tmp_path / name, checkpoint_model(seed), TOKENIZER, **kwargs)


def saved_with_optimizer(tmp_path: Path, name: str = "ckpt", **kwargs) -> tuple[Path, torch.nn.Module]:
    """A checkpoint saved after one AdamW step, so that it carries an optimizer state; and its model."""
    model = checkpoint_model()
    optimizer = torch.optim.AdamW(model.parameters())
    train_step(model, optimizer)
    return save_pretrained(tmp_path / name, model, TOKENIZER, optimizer=optimizer, **kwargs), model


def read_config(path: Path) -> dict:
    return json.loads((path / CONFIG_NAME).read_text(encoding="utf-8"))


def write_config(path: Path, config: dict) -> None:
    (path / CONFIG_NAME).write_text(json.dumps(config), encoding="utf-8")


def weights_path(path: Path) -> Path:
    return path / WEIGHTS_NAME


def replace_weights(path: Path, data: bytes) -> None:
    """Swap in other weight bytes and make config.json's hash agree, to reach later checks."""
    weights_path(path).write_bytes(data)
    config = read_config(path)
    config["weights_sha256"] = hashlib.sha256(data).hexdigest()
    write_config(path, config)


def folder_files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.iterdir()}


def make_zip(entries: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def bomb_zip(tmp_path: Path, size: int = 200 * 2**20) -> bytes:
    """Zeros that deflate about 1000-fold."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open("config.json", "w") as out:
            chunk = bytes(2**20)
            for _ in range(size // len(chunk)):
                out.write(chunk)
    return buffer.getvalue()


def edit(**changes):
    """A builder of a saved checkpoint whose config.json has `section__field=value` changed."""
    def build(tmp_path):
        path = saved(tmp_path)
        config = read_config(path)
        for key, value in changes.items():
            section, _, name = key.partition("__")
            (config[section] if name else config)[name or section] = value
        write_config(path, config)
        return path
    return build


def mutate(fn):
    """A builder of a saved checkpoint, then changed by fn(path)."""
    def build(tmp_path):
        path = saved(tmp_path)
        fn(path)
        return path
    return build


class RunsCode:
    """Unpickling this runs a shell command; a safe loader never does."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


def assert_same_curve(resumed: list, straight: list) -> None:
    """Two loss curves, (step, train loss, val loss or None) rows, equal to float32 rounding."""
    assert [row[0] for row in resumed] == [row[0] for row in straight]
    for (step, loss, val), (_, want, want_val) in zip(resumed, straight):
        assert loss == pytest.approx(want, rel=1e-5, abs=1e-6), step
        assert (val is None) == (want_val is None), step
        assert val is None or val == pytest.approx(want_val, rel=1e-5, abs=1e-6), step
