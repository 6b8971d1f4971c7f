"""What attention does, on the learner's own model.

- `attention_row`: one query's attention in one head, step by step, with the real numbers:
  q and every k, the scores q·k, the scores ÷ √d_k, the causal mask, the softmax weights, and
  the output Σ weight·v;
- `head_stats` / `head_table`: what each head does, as numbers (mean entropy, mean max weight,
  the mass on the previous, the same and the first key) and the pattern a head clearly matches;
- `last_query_attention`: the attention rows behind the next character's prediction.

What the model predicts is `predictions`; what its tables hold, `embeddings`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..messages import N_
from ..model import MiniGPT
from .predictions import entropy

# a head "clearly matches" a pattern when, averaged over its queries, this much of its weight
# lands where the pattern says (or, for near-uniform, its entropy is this close to the most possible)
CLEAR = 0.5
NEAR_UNIFORM = 0.9
PATTERNS = {"previous": N_("previous-character head"), "first": N_("first-character (sink) head"),
            "uniform": N_("near-uniform head")}


@dataclass(frozen=True)
class AttentionRow:
    layer: int
    head: int
    query: int             # the query's position
    q: np.ndarray          # (d_k,)
    k: np.ndarray          # (T, d_k): every key, the masked future ones too
    v: np.ndarray          # (T, d_k)
    scores: np.ndarray     # (T,) q·k
    divisor: float         # √d_k, or 1 without the scaling
    scaled: np.ndarray     # (T,) scores / divisor
    allowed: np.ndarray    # (T,) bool: the keys the causal mask lets this query see
    weights: np.ndarray    # (T,) softmax over the allowed keys; 0 on the masked ones
    output: np.ndarray     # (d_k,) Σ weights · v: this head's share of the layer's output


@torch.no_grad()
def attention_row(model: MiniGPT, ids: list[int], layer: int, head: int, query: int,
                  scale_attention: bool | None = None) -> AttentionRow:
    """The computation behind row `query` of head `head` in layer `layer` (all 0-based).

    scale_attention=False recomputes the whole forward pass without 1/√d_k, as the Attention
    page's checkbox does, so every layer's input is the unscaled model's."""
    config = model.config
    if not (0 <= layer < config.num_layers and 0 <= head < config.num_heads and 0 <= query < len(ids)):
        raise IndexError(f"layer {layer}, head {head}, query {query} outside the model or the text")
    device = next(model.parameters()).device
    idx = torch.tensor([ids], device=device)
    x = model.residual_stream(idx, scale_attention)[layer]  # (1, T, d_model): the input to this block
    block = model.blocks[layer]
    Q, K, V = block.self_attn.W_QKV(block.norm1(x))[0].split(config.d_model, dim=-1)  # each (T, d_model)
    cols = slice(head * config.d_k, (head + 1) * config.d_k)
    q, k, v = (t[:, cols].double().cpu().numpy() for t in (Q, K, V))  # (T, d_k) each
    divisor = 1.0 / model.attention_scale(scale_attention)  # √d_k, or 1
    scores = k @ q[query]
    allowed = np.arange(len(ids)) <= query
    scaled = scores / divisor
    exp = np.where(allowed, np.exp(scaled - scaled[allowed].max()), 0.0)
    weights = exp / exp.sum()
    return AttentionRow(layer, head, query, q[query], k, v, scores, divisor, scaled, allowed, weights, weights @ v)


@dataclass(frozen=True)
class HeadStats:
    entropy: float       # mean entropy of the rows, nats
    max_weight: float    # mean of each row's largest weight
    previous: float      # mean weight on key t−1
    same: float          # mean weight on key t (the query itself)
    first: float         # mean weight on key 0
    pattern: str | None  # a key of PATTERNS, or None


def head_stats(weights: np.ndarray) -> HeadStats:
    """Statistics of one head's attention (T, T), over the queries t ≥ 1 (query 0 can only look at
    itself, so it says nothing about the head)."""
    w = np.asarray(weights, dtype=np.float64)
    T = w.shape[-1]
    if T < 2:
        raise ValueError("a head's statistics need at least two positions")
    t = np.arange(1, T)
    rows = w[1:]
    row_entropy = entropy(rows)
    stats = dict(entropy=float(row_entropy.mean()), max_weight=float(rows.max(axis=-1).mean()),
                 previous=float(w[t, t - 1].mean()), same=float(w[t, t].mean()), first=float(w[t, 0].mean()))
    evenness = float((row_entropy / np.log(t + 1)).mean())  # 1 when every row is uniform over what it may see
    return HeadStats(**stats, pattern=_pattern(stats["previous"], stats["first"], evenness))


def _pattern(previous: float, first: float, evenness: float) -> str | None:
    if max(previous, first) >= CLEAR:
        return "previous" if previous >= first else "first"
    return "uniform" if evenness >= NEAR_UNIFORM else None


def head_table(attention: np.ndarray) -> pd.DataFrame:
    """One row per (layer, head) of attention (layers, heads, T, T): the statistics and pattern."""
    attention = np.asarray(attention)
    rows = []
    for layer in range(attention.shape[0]):
        for head in range(attention.shape[1]):
            stats = head_stats(attention[layer, head])
            rows.append({"layer": layer + 1, "head": head + 1, **{k: v for k, v in vars(stats).items()}})
    return pd.DataFrame(rows)


@torch.no_grad()
def last_query_attention(model: MiniGPT, ids: list[int], block_size: int | None = None) -> np.ndarray:
    """(layers, T): each layer's attention (mean of its heads) of the last character over the ones
    it read: the rows the model used to choose the next character."""
    window = ids[-(block_size or model.config.max_len):]
    maps = model.attention_maps(torch.tensor([window], device=next(model.parameters()).device))
    return maps[:, :, -1].mean(dim=1).cpu().numpy()


