"""How attention's results come about, on the learner's own model.

- `attention_row`: one query's attention in one head, step by step, with the real numbers:
  q and every k, the scores q·k, the scores ÷ √d_k, the causal mask, the softmax weights, and
  the output Σ weight·v;
- `head_stats` / `head_table`: what each head does, as numbers (mean entropy, mean max weight,
  the mass on the previous, the same and the first key) and the pattern a head clearly matches;
- `beliefs`: the next-character distribution before and after temperature, top-k and top-p,
  its entropy and effective number of choices; `next_logits` and `last_query_attention` read
  them, and the attention rows behind them, off the model;
- the other parts: how alike the position encodings are (`position_similarity`), the
  embedding table on its principal axes (`embedding_pca`), and the prediction read out after
  every layer (`logit_lens`);
- for the lesson: each character's id and embedding length (`character_table`), and the loss
  of each next character in a text (`surprisal`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..messages import N_
from ..model import MiniGPT, eval_mode
from ..sample import Sampling, next_token_distribution

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


def _entropy(rows: np.ndarray) -> np.ndarray:
    p = np.clip(rows, 1e-12, 1.0)
    return -(rows * np.log(p)).sum(axis=-1)


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
    entropy = _entropy(rows)
    stats = dict(entropy=float(entropy.mean()), max_weight=float(rows.max(axis=-1).mean()),
                 previous=float(w[t, t - 1].mean()), same=float(w[t, t].mean()), first=float(w[t, 0].mean()))
    evenness = float((entropy / np.log(t + 1)).mean())  # 1 when every row is uniform over what it may see
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


@dataclass(frozen=True)
class Beliefs:
    """What the model believes the next character is, before and after the sampling settings."""
    tempered: np.ndarray   # (V,) softmax(logits / T), before top-k and top-p (one-hot on the argmax at T = 0)
    final: np.ndarray      # (V,) what a character is drawn from: after top-k and top-p, renormalised
    entropy: float         # of `final`, nats

    @property
    def effective_choices(self) -> float:
        """exp(entropy): as unsure as a fair choice among this many characters."""
        return float(np.exp(self.entropy))

    @property
    def removed(self) -> np.ndarray:
        """(V,) bool: characters the temperature leaves a chance but top-k or top-p cut off."""
        return (self.tempered > 0) & (self.final == 0)


def beliefs(logits: np.ndarray | torch.Tensor, sampling: Sampling) -> Beliefs:
    """The next-character distribution of these logits (V,) under the sampling settings, as
    `stream` draws from it, and under the temperature alone."""
    logits = torch.as_tensor(np.asarray(logits, dtype=np.float64))
    final = next_token_distribution(logits, sampling).numpy()
    tempered = next_token_distribution(logits, sampling.temperature_only()).numpy()
    return Beliefs(tempered, final, float(_entropy(final)) + 0.0)  # + 0.0: no -0.0 for a sure choice


@torch.no_grad()
def next_logits(model: MiniGPT, ids: list[int], block_size: int | None = None) -> np.ndarray:
    """The logits (V,) for the character after `ids`, reading at most the last block_size of them."""
    window = ids[-(block_size or model.config.max_len):]
    with eval_mode(model):
        logits, _ = model(torch.tensor([window], device=next(model.parameters()).device))
    return logits[0, -1].double().cpu().numpy()


@torch.no_grad()
def last_query_attention(model: MiniGPT, ids: list[int], block_size: int | None = None) -> np.ndarray:
    """(layers, T): each layer's attention (mean of its heads) of the last character over the ones
    it read: the rows the model used to choose the next character."""
    window = ids[-(block_size or model.config.max_len):]
    maps = model.attention_maps(torch.tensor([window], device=next(model.parameters()).device))
    return maps[:, :, -1].mean(dim=1).cpu().numpy()


def position_similarity(pe: np.ndarray) -> np.ndarray:
    """(T, T) cosine similarity between the position vectors: nearby positions look alike."""
    pe = np.asarray(pe, dtype=np.float64)
    unit = pe / np.linalg.norm(pe, axis=1, keepdims=True)
    return unit @ unit.T


def embedding_pca(embeddings: np.ndarray, components: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """The rows of an embedding table (V, d_model) on their `components` principal axes, and the
    share of the variance each axis holds (numpy's SVD of the centred table)."""
    centred = np.asarray(embeddings, dtype=np.float64)
    centred = centred - centred.mean(axis=0)
    _u, s, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:components].T, (s**2 / (s**2).sum())[:components]


def nearest_rows(embeddings: np.ndarray, row: int, k: int = 5) -> list[int]:
    """The k rows of an embedding table (V, d_model) most alike row `row` (cosine similarity in all
    d_model dimensions, not in a 2-D picture of them), most alike first; never the row itself."""
    table = np.asarray(embeddings, dtype=np.float64)
    unit = table / np.clip(np.linalg.norm(table, axis=1, keepdims=True), 1e-12, None)
    similarity = unit @ unit[row]
    similarity[row] = -np.inf
    return [int(i) for i in np.argsort(-similarity, kind="stable")[:k]]


@torch.no_grad()
def logit_lens(model: MiniGPT, ids: list[int]) -> np.ndarray:
    """(num_layers + 1, T, V): the next-character probabilities read out of the residual stream
    after the embedding and after each block, through the final LayerNorm and the tied head. The
    last read-out is the model's own prediction."""
    idx = torch.tensor([ids], device=next(model.parameters()).device)
    with eval_mode(model):
        stream = model.residual_stream(idx)
        probs = [torch.softmax(model.lm_head(model.final_norm(x))[0], dim=-1) for x in stream]
    return torch.stack(probs).double().cpu().numpy()


@torch.no_grad()
def character_table(model: MiniGPT, ids: list[int], chars: list[str]) -> pd.DataFrame:
    """The way in, character by character: its id, the length of its embedding row, and that
    length after the ×√d_model scale (what is added to the position's encoding)."""
    rows = model.token_embed.weight[torch.tensor(ids, dtype=torch.long)].double().cpu()
    length = torch.linalg.vector_norm(rows, dim=-1).numpy()
    return pd.DataFrame({"char": chars, "id": ids, "length": length,
                         "scaled": length * model.config.d_model ** 0.5})


@torch.no_grad()
def surprisal(model: MiniGPT, ids: list[int]) -> np.ndarray:
    """(T - 1,): −ln p of each next character given the ones before it, in nats: its share of
    the cross-entropy loss (their mean is the loss on this text)."""
    with eval_mode(model):
        logits, _ = model(torch.tensor([ids], device=next(model.parameters()).device))
    log_p = torch.log_softmax(logits[0, :-1].double(), dim=-1)
    return (-log_p[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]).cpu().numpy()
