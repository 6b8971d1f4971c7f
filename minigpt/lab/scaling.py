"""The sqrt(d_k) experiment: what dividing Q K^T by sqrt(d_k) does to the softmax.

For random unit-variance q and k, q . k has variance d_k, so unscaled scores grow
with d_k and the softmax saturates towards one-hot (low entropy, max weight near 1).
Dividing by sqrt(d_k) restores unit variance. `scaling_experiment` reproduces the
reference demo's table at its settings (d_k 4/16/64/256, seq_len 16, seed 42).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from ..config import ConfigError

if TYPE_CHECKING:
    import pandas as pd

DEMO_D_KS, DEMO_SEQ_LEN, DEMO_SEED = (4, 16, 64, 256), 16, 42  # the demo's settings


def softmax_stats(scores: torch.Tensor, eps: float = 1e-9) -> tuple[float, float]:
    """Mean row entropy (nats) and mean row max of softmax(scores) over the last axis."""
    probs = torch.softmax(scores, dim=-1)
    entropy = -(probs * torch.log(probs + eps)).sum(dim=-1)
    return entropy.mean().item(), probs.max(dim=-1).values.mean().item()


def scaling_experiment(
    d_ks: Sequence[int] = DEMO_D_KS, seq_len: int = DEMO_SEQ_LEN, seed: int = DEMO_SEED, num_samples: int = 1
) -> pd.DataFrame:
    """One row per d_k: score std and softmax entropy / max weight, unscaled and scaled.

    Q and K are drawn in order from one generator seeded with `seed`, a (num_samples,
    seq_len, d_k) pair per d_k, exactly as the demo draws them with num_samples=1.
    """
    if not d_ks or any(not isinstance(d, int) or d < 1 for d in d_ks):
        raise ConfigError("d_k values must be positive integers.")
    if seq_len < 1 or num_samples < 1:
        raise ConfigError("seq_len and num_samples must be at least 1.")
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for d_k in d_ks:
        Q = torch.randn(num_samples, seq_len, d_k, generator=generator)
        K = torch.randn(num_samples, seq_len, d_k, generator=generator)
        scores = Q @ K.transpose(-2, -1)  # (N, T, T), variance d_k
        scaled = scores / math.sqrt(d_k)
        entropy_raw, max_raw = softmax_stats(scores)
        entropy_scaled, max_scaled = softmax_stats(scaled)
        rows.append(
            {
                "d_k": d_k,
                "score_std_unscaled": scores.std().item(),
                "score_std_scaled": scaled.std().item(),
                "entropy_unscaled": entropy_raw,
                "entropy_scaled": entropy_scaled,
                "max_weight_unscaled": max_raw,
                "max_weight_scaled": max_scaled,
            }
        )
    import pandas as pd  # here, not at the top: the command line's start-up does without it

    return pd.DataFrame(rows)
