"""What the model predicts, on the learner's own model.

- `beliefs`: the next-character distribution before and after the sampling settings, its entropy
  and effective number of choices; `next_logits` reads the scores off the model;
- `logit_lens`: the prediction read out after every layer;
- for the lesson: each character's id and embedding length (`character_table`), and the loss of
  each next character in a text (`surprisal`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..model import MiniGPT, eval_mode
from ..sample import Sampling, next_token_distribution


def entropy(rows: np.ndarray) -> np.ndarray:
    """The entropy of each distribution along the last axis, in nats (0 · log 0 taken as 0)."""
    p = np.clip(rows, 1e-12, 1.0)
    return -(rows * np.log(p)).sum(axis=-1)


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
    return Beliefs(tempered, final, float(entropy(final)) + 0.0)  # + 0.0: no -0.0 for a sure choice


@torch.no_grad()
def next_logits(model: MiniGPT, ids: list[int], block_size: int | None = None) -> np.ndarray:
    """The logits (V,) for the character after `ids`, reading at most the last block_size of them."""
    window = ids[-(block_size or model.config.max_len):]
    with eval_mode(model):
        logits, _ = model(torch.tensor([window], device=next(model.parameters()).device))
    return logits[0, -1].double().cpu().numpy()


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
