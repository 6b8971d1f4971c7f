"""√d_k on a real model: what the 1/√d_k factor changes while a model learns.

`softmax_signal` measures, for one batch, each layer's mean attention entropy, mean max weight
and the norm of the loss's gradient with respect to the attention scores (the softmax's input,
after the scaling): the signal that reaches W_Q and W_K. A saturated softmax passes almost none
back, which is why unscaled attention learns slowly. `race` trains two copies of one model, the
same seed, data and batches, one with and one without the factor, and measures both as they go.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from ..config import GPTConfig, TrainConfig
from ..data import get_batch
from ..train import Trainer, build_model
from ..model import eval_mode


@dataclass(frozen=True)
class Signal:
    """One measurement of a model's attention, per layer (arrays of num_layers)."""

    loss: float
    entropy: np.ndarray       # mean softmax entropy of a query's row (nats)
    max_weight: np.ndarray    # mean largest weight of a row
    score_grad: np.ndarray    # ‖∂loss/∂scores‖ (Frobenius, over the batch, heads, queries and keys)
    jacobian: np.ndarray      # mean over rows of ‖∂softmax/∂scores‖_F: how much of a score change gets through


def softmax_signal(model, x: torch.Tensor, y: torch.Tensor) -> Signal:
    """Loss, entropy, max weight and score-gradient norm of one batch, in eval mode (no dropout).

    The gradient with respect to the scores s comes from the gradient g with respect to the
    weights w = softmax(s) through softmax's Jacobian: ∂L/∂s = w ⊙ (g − Σ_k w g), exact, and 0
    where the causal mask set a score to −∞."""
    with eval_mode(model):
        model.zero_grad(set_to_none=True)
        _, loss, weights = model(x, y, return_attention=True)
        for w in weights:
            w.retain_grad()
        loss.backward()
        entropy, max_weight, score_grad, jacobian = [], [], [], []
        with torch.no_grad():
            for w in weights:  # (B, H, T, T)
                g = w.grad
                ds = w * (g - (w * g).sum(-1, keepdim=True))
                score_grad.append(ds.norm().item())
                entropy.append(-(w * torch.log(w.clamp_min(1e-30))).sum(-1).mean().item())
                max_weight.append(w.max(-1).values.mean().item())
                jacobian.append(softmax_jacobian_norm(w).mean().item())
        model.zero_grad(set_to_none=True)
    return Signal(loss.item(), np.array(entropy), np.array(max_weight), np.array(score_grad), np.array(jacobian))


def softmax_jacobian_norm(w: torch.Tensor) -> torch.Tensor:
    """‖J‖_F of each row's softmax Jacobian J_ij = w_i (δ_ij − w_j), from the weights alone:
    ‖J‖_F² = Σ w_i² − 2 Σ w_i³ + (Σ w_i²)². 0 for a one-hot row (saturated: nothing gets through)."""
    squares = (w * w).sum(-1)
    return (squares - 2 * (w ** 3).sum(-1) + squares ** 2).clamp_min(0).sqrt()


@dataclass(frozen=True)
class RacePoint:
    step: int
    scaled: Signal
    unscaled: Signal


RACE_BATCH, RACE_BLOCK, RACE_WARMUP = 16, 32, 10  # every race's batches: small enough for a shared CPU


def race_configs(vocab_size: int, d_k: int, layers: int, steps: int, lr: float, heads: int = 1,
                 device: str = "cpu") -> tuple[GPTConfig, TrainConfig]:
    """The model and training of a race: `heads` heads of `d_k` per layer (d_model = heads · d_k),
    the FFN four times as wide, no dropout, and the learning rate decaying to the default's share
    of its peak. The Experiments page races one head; the grid bench (bench/race_grid.py) more."""
    config = GPTConfig(vocab_size=vocab_size, d_model=d_k * heads, num_heads=heads, num_layers=layers,
                       d_ff=4 * d_k * heads, max_len=RACE_BLOCK, dropout=0.0)
    train = TrainConfig(batch_size=RACE_BATCH, block_size=RACE_BLOCK, max_steps=steps, warmup_steps=RACE_WARMUP,
                        eval_interval=steps, lr=lr, min_lr=lr * TrainConfig.min_lr / TrainConfig.lr, device=device)
    return config, train


def scaling_race(config: GPTConfig, train: TrainConfig, tokenizer, text: str, every: int = 25):
    """Train the same model (config, train.seed) twice, with and without 1/√d_k, in lockstep on
    the same batches; yield a RacePoint at step 0 and every `every` steps, measured on one fixed
    validation batch."""
    trainers = {scaled: Trainer(build_model(replace(config, scale_attention=scaled), train.seed, train.device),
                                tokenizer, text, train) for scaled in (True, False)}
    generator = torch.Generator().manual_seed(train.seed + 3)  # the fixed batch both are measured on
    x, y = get_batch(trainers[True].val_data, train.batch_size, train.block_size, generator,
                     trainers[True].device)
    for step in range(train.max_steps + 1):
        if step % every == 0 or step == train.max_steps:
            yield RacePoint(step, *(softmax_signal(trainers[s].model, x, y) for s in (True, False)))
        if step < train.max_steps:
            for trainer in trainers.values():  # the same seed: the same batches, in the same order
                trainer.compute_gradients()
                trainer.apply_update()
