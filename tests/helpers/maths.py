"""The maths written out by hand: references that share no code with minigpt.

`hand_forward` is a second implementation of the forward pass. It reads only the weights and
four numbers of the config, and spells out every formula of the reference demo in plain tensor
arithmetic (no nn.functional): the tests compare the model, the look-inside views and the
knock-outs against it. `hand_lr` is the warmup + cosine schedule, `DEMO_SCALING` the numbers the
reference demo prints for √d_k.
"""
from __future__ import annotations

import math

import torch


def hand_positions(max_len: int, d_model: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same), one number at a time."""
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            angle = pos / 10000 ** (i / d_model)
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe


def hand_layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased variance, as LayerNorm uses
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def hand_gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def hand_softmax(scores: torch.Tensor) -> torch.Tensor:
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def hand_forward(model, ids: list[int], scale: bool | None = None, zero_heads=(), positions: bool = True,
                 window: int | None = None, head_weight: torch.Tensor | None = None) -> dict:
    """Logits (T, vocab), and per layer the attention weights (H, T, T), Q, K, V (H, T, d_k) and the
    attention output (T, d_model) before W_O, in float64. scale=None follows the model's config.

    The knock-outs, written out: zero_heads, (layer, head) pairs whose outputs are dropped;
    positions=False, no positional encoding; window, each query sees its last `window` keys;
    head_weight (vocab, d_model), an LM head of its own instead of the embedding."""
    w = {k: v.detach().double().cpu() for k, v in model.state_dict().items()}
    cfg = model.config
    d, H = cfg.d_model, cfg.num_heads
    d_k = d // H
    divide = cfg.scale_attention if scale is None else scale
    T = len(ids)
    x = w["token_embed.weight"][ids] * math.sqrt(d) + (hand_positions(T, d) if positions else 0)  # (T, d)
    allowed = torch.tensor([[k <= q and (window is None or q - k < window) for k in range(T)] for q in range(T)])
    layers = []
    for layer in range(cfg.num_layers):
        p = f"blocks.{layer}."
        h = hand_layer_norm(x, w[p + "norm1.weight"], w[p + "norm1.bias"])
        qkv = h @ w[p + "self_attn.W_QKV.weight"].T  # (T, 3d): W_Q, W_K, W_V stacked in that order
        Q, K, V = (qkv[:, i * d : (i + 1) * d].reshape(T, H, d_k).transpose(0, 1) for i in range(3))
        scores = Q @ K.transpose(1, 2)  # (H, T, T)
        if divide:
            scores = scores / math.sqrt(d_k)
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = hand_softmax(scores)
        heads = weights @ V  # (H, T, d_k)
        for zeroed in [h for l, h in zero_heads if l == layer]:
            heads[zeroed] = 0
        concat = heads.transpose(0, 1).reshape(T, d)
        x = x + concat @ w[p + "self_attn.W_O.weight"].T
        h = hand_layer_norm(x, w[p + "norm2.weight"], w[p + "norm2.bias"])
        hidden = hand_gelu(h @ w[p + "ffn.linear1.weight"].T + w[p + "ffn.linear1.bias"])
        x = x + hidden @ w[p + "ffn.linear2.weight"].T + w[p + "ffn.linear2.bias"]
        layers.append({"weights": weights, "Q": Q, "K": K, "V": V, "output": concat})
    x = hand_layer_norm(x, w["final_norm.weight"], w["final_norm.bias"])
    head = w["token_embed.weight"] if head_weight is None else head_weight.double().cpu()
    logits = x @ head.T  # the head is the embedding, transposed (weight tying)
    return {"logits": logits, "layers": layers}


def hand_lr(step: int, lr: float, min_lr: float, warmup: int, max_steps: int) -> float:
    """The learning rate of optimizer step `step` (0-based): the (step+1)-th of `warmup` equal
    increments up to lr, then half a cosine from lr down to min_lr at max_steps."""
    if step < warmup:
        return lr * (step + 1) / warmup
    done = (step - warmup) / (max_steps - warmup)
    return min_lr + (lr - min_lr) * (1 + math.cos(math.pi * min(done, 1.0))) / 2


# Printed by the reference demo (seed_demo.py, section 6) at d_k 4/16/64/256, seq_len 16, seed 42:
# d_k -> (entropy unscaled, max weight unscaled, entropy scaled, max weight scaled)
DEMO_SCALING = {
    4: (1.9813, 0.3648, 2.5084, 0.1928),
    16: (0.8247, 0.7157, 2.2914, 0.2786),
    64: (0.4516, 0.8304, 2.4147, 0.2258),
    256: (0.2362, 0.9022, 2.3424, 0.2591),
}
