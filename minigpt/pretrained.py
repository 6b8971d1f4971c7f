"""The small checkpoints shipped inside the package, one per built-in corpus.

They let the dashboard generate and show attention on first visit, before anyone
trains. docs/pretrained.md records the exact command that produced each one.
"""
from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from .header import Header, folder_header


def shipped_checkpoints() -> list[str]:
    """The corpora a checkpoint ships for: the package's own folders, not the corpus registry, which
    holds the task corpora only once minigpt.lab.tasks is imported."""
    return sorted(entry.name for entry in resources.files("minigpt").joinpath("pretrained").iterdir() if entry.is_dir())


def pretrained_dir(corpus: str) -> Path:
    """Folder of the shipped checkpoint for a built-in corpus."""
    if corpus not in shipped_checkpoints():
        raise KeyError(f"no pretrained checkpoint for {corpus!r}; shipped: {', '.join(shipped_checkpoints())}")
    return Path(str(resources.files("minigpt").joinpath("pretrained", corpus)))


def load_pretrained(corpus: str, device: str = "cpu"):
    """The shipped checkpoint for a built-in corpus, as a `Checkpoint`."""
    from .checkpoint import from_pretrained

    return from_pretrained(pretrained_dir(corpus), device=device)


@functools.cache
def shipped_header(corpus: str) -> Header:
    """What the shipped checkpoint's config.json says (its model config, vocabulary, training
    metadata), read once per process without loading the weights or torch."""
    return folder_header(pretrained_dir(corpus))
