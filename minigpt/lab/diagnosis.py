"""What a run's numbers say: overfitting, characters validation holds that training never shows,
and a loss worse than guessing. Plain data in, plain data out; the pages put it into words.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..corpus import split_sizes

if TYPE_CHECKING:
    import numpy as np

RISE = 0.05  # nats above its lowest before a val loss counts as rising


@dataclass(frozen=True)
class Overfitting:
    """Val loss has risen since its lowest point while train loss kept falling."""

    best_step: int
    best_val: float
    step: int
    val: float
    train_at_best: float
    train: float


def overfitting(evals: Sequence[tuple[int, float, float]], rise: float = RISE) -> Overfitting | None:
    """evals: (step, train loss, val loss) at each evaluation, in order."""
    if len(evals) < 3:
        return None
    best = min(evals, key=lambda e: e[2])
    step, train, val = evals[-1]
    if step > best[0] and val > best[2] + rise and train < best[1]:
        return Overfitting(best[0], best[2], step, val, best[1], train)
    return None


def uniform_loss(vocab_size: int) -> float:
    """The cross-entropy of guessing every character with the same probability: ln(vocab_size)."""
    return math.log(vocab_size)


@dataclass(frozen=True)
class UnseenCharacters:
    """Characters of the validation split that the training split never shows."""

    chars: list[str]      # distinct, in order of appearance
    occurrences: int      # how many of the validation split's characters they make up
    val_length: int


def unseen_validation_chars(text: str, val_fraction: float) -> UnseenCharacters:
    """The split Trainer makes (the last val_fraction of the text is held out), checked by character."""
    n_train, _ = split_sizes(len(text), val_fraction, 0)
    seen = set(text[:n_train])
    held_out = text[n_train:]
    unseen = [c for c in held_out if c not in seen]
    return UnseenCharacters(list(dict.fromkeys(unseen)), len(unseen), len(held_out))


def top_key_changes(scaled: np.ndarray, unscaled: np.ndarray) -> list[tuple[int, int]]:
    """Per layer, (rows whose most-attended key differs, rows), over every head, between two
    attention arrays shaped (layers, heads, T, T). Without 1/sqrt(d_k) the first layer ranks keys
    as before (the scores only grow), but later layers see other inputs, so their rankings move."""
    changed = scaled.argmax(axis=-1) != unscaled.argmax(axis=-1)  # (layers, heads, T)
    return [(int(layer.sum()), int(layer.size)) for layer in changed]
