"""MiniGPT: the reference demo's decoder-only Transformer, in nanoGPT's shape.

Token embedding x sqrt(d_model) plus sinusoidal positions, Pre-LN blocks
(multi-head self-attention without bias, GELU feed-forward), a final LayerNorm
and an LM head tied to the embedding, under a causal mask.

Attention has two paths that compute the same function:
- explicit: softmax(Q K^T / sqrt(d_k)) V with the mask written out; it returns the
  weights, so the heatmaps and learners read this one;
- fused: torch's scaled_dot_product_attention, for speed.
A `KVCache` lets generation feed one new token per step.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import GPTConfig

ATTENTION_PATHS = ("fused", "explicit")


def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same)."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * inv_freq)
    pe[:, 1::2] = torch.cos(position * inv_freq)
    return pe  # (max_len, d_model)


def causal_mask(t_query: int, t_key: int, device: torch.device | None = None) -> torch.Tensor:
    """True where a query may NOT look: keys in its future. Queries are the last t_query keys."""
    q_pos = torch.arange(t_key - t_query, t_key, device=device)[:, None]
    k_pos = torch.arange(t_key, device=device)[None, :]
    return k_pos > q_pos  # (t_query, t_key)


def explicit_attention(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, mask: torch.Tensor | None, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T * scale) V, returning the output and the attention weights."""
    scores = (Q @ K.transpose(-2, -1)) * scale  # (B, H, Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    return weights @ V, weights  # (B, H, Tq, d_k), (B, H, Tq, Tk)


def fused_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, **sdpa_kwargs) -> torch.Tensor:
    """torch's scaled_dot_product_attention, kept in float32 under CPU autocast: there the
    weight matmuls gain from bfloat16, but the bfloat16 attention backward is far slower."""
    if Q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        with torch.autocast("cpu", enabled=False):
            return F.scaled_dot_product_attention(Q.float(), K.float(), V.float(), **sdpa_kwargs)
    return F.scaled_dot_product_attention(Q, K, V, **sdpa_kwargs)  # (B, H, Tq, d_k)


class KVCache:
    """Keys and values of every layer for the tokens seen so far, preallocated to max_len."""

    def __init__(self, config: GPTConfig, batch_size: int, device: torch.device, dtype: torch.dtype):
        shape = (batch_size, config.num_heads, config.max_len, config.d_k)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.num_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.num_layers)]
        self.length = 0  # positions filled; advanced by MiniGPT.forward after all layers
        self.max_len = config.max_len

    def update(self, layer: int, K: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store this step's K, V (B, H, T, d_k) and return all keys and values so far."""
        end = self.length + K.size(2)
        self.keys[layer][:, :, self.length : end] = K
        self.values[layer][:, :, self.length : end] = V
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.num_heads, self.d_k = config.num_heads, config.d_k
        # W_Q, W_K and W_V stacked into one matrix: one matmul instead of three.
        self.W_QKV = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.W_O = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        *,
        path: str,
        scale: float,
        cache: KVCache | None = None,
        layer: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T, d_model = x.shape
        Q, K, V = self.W_QKV(x).split(d_model, dim=-1)  # each (B, T, d_model)
        Q, K, V = (t.view(B, T, self.num_heads, self.d_k).transpose(1, 2) for t in (Q, K, V))  # (B, H, T, d_k)
        past = 0
        if cache is not None:
            past = cache.length
            K, V = cache.update(layer, K, V)  # (B, H, past + T, d_k)
        if path == "explicit":
            mask = causal_mask(T, past + T, x.device) if T > 1 else None
            out, weights = explicit_attention(Q, K, V, mask, scale)
        else:
            weights = None
            if past == 0 or T == 1:
                out = fused_attention(Q, K, V, is_causal=T > 1, scale=scale)
            else:
                allowed = ~causal_mask(T, past + T, x.device)
                out = fused_attention(Q, K, V, attn_mask=allowed, scale=scale)
        out = out.transpose(1, 2).contiguous().view(B, T, d_model)  # concatenate heads
        return self.W_O(out), weights


class FeedForward(nn.Module):
    """FFN(x) = GELU(x W_1 + b_1) W_2 + b_2, d_model -> d_ff -> d_model."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.linear1 = nn.Linear(config.d_model, config.d_ff)
        self.linear2 = nn.Linear(config.d_ff, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(F.gelu(self.linear1(x))))


class Block(nn.Module):
    """Pre-LN: x + Attn(LN(x)), then x + FFN(LN(x))."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(config.d_model)
        self.self_attn = MultiHeadSelfAttention(config)
        self.norm2 = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, **attn_kwargs) -> tuple[torch.Tensor, torch.Tensor | None]:
        attn_out, weights = self.self_attn(self.norm1(x), **attn_kwargs)
        x = x + self.dropout(attn_out)
        x = x + self.dropout(self.ffn(self.norm2(x)))
        return x, weights


class MiniGPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config.validate()
        self.token_embed = nn.Embedding(config.vocab_size, config.d_model)
        self.register_buffer("pos_encoding", sinusoidal_positions(config.max_len, config.d_model), persistent=False)
        self.dropout_embed = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.num_layers))
        self.final_norm = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.token_embed.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith(("W_O.weight", "linear2.weight")):  # residual projections, GPT-2 style
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.num_layers))

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            # std d_model^-1/2: after the sqrt(d_model) scale, tokens and positions have unit size.
            nn.init.normal_(module.weight, mean=0.0, std=self.config.d_model**-0.5)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        *,
        return_attention: bool = False,
        attention: str = "fused",
        kv_cache: KVCache | None = None,
        scale_attention: bool | None = None,
    ):
        """Logits (B, T, vocab) and the mean cross-entropy against `targets` (or None).

        return_attention=True takes the explicit path and also returns the per-layer
        attention weights, a list of (B, H, T, T) tensors from this same forward pass.
        scale_attention overrides the config's 1/sqrt(d_k) switch for this call.
        """
        if attention not in ATTENTION_PATHS:
            raise ValueError(f"attention must be one of {ATTENTION_PATHS}, got {attention!r}")
        B, T = idx.shape
        past = kv_cache.length if kv_cache is not None else 0
        if past + T > self.config.max_len:
            raise ValueError(f"sequence of {past + T} tokens exceeds max_len {self.config.max_len}")
        scaled = self.config.scale_attention if scale_attention is None else scale_attention
        scale = 1.0 / math.sqrt(self.config.d_k) if scaled else 1.0
        path = "explicit" if return_attention else attention

        x = self.token_embed(idx) * math.sqrt(self.config.d_model) + self.pos_encoding[past : past + T]
        x = self.dropout_embed(x)  # (B, T, d_model)
        attentions = []
        for layer, block in enumerate(self.blocks):
            x, weights = block(x, path=path, scale=scale, cache=kv_cache, layer=layer)
            attentions.append(weights)
        if kv_cache is not None:
            kv_cache.length += T
        logits = self.lm_head(self.final_norm(x))  # (B, T, vocab)

        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        if return_attention:
            return logits, loss, attentions
        return logits, loss

    @torch.no_grad()
    def attention_maps(self, idx: torch.Tensor, scale_attention: bool | None = None) -> torch.Tensor:
        """Attention weights of one sequence idx (1, T), stacked (layers, heads, T, T), in eval mode."""
        was_training = self.training
        self.eval()
        _, _, maps = self(idx, return_attention=True, scale_attention=scale_attention)
        self.train(was_training)
        return torch.stack([m[0] for m in maps]).float()

    def new_kv_cache(self, batch_size: int = 1) -> KVCache:
        p = self.token_embed.weight
        return KVCache(self.config, batch_size, p.device, p.dtype)
