"""MiniGPT: the reference demo's decoder-only Transformer, in nanoGPT's shape.

Token embedding x sqrt(d_model) plus sinusoidal positions, Pre-LN blocks
(multi-head self-attention without bias, GELU feed-forward), a final LayerNorm
and an LM head tied to the embedding, under a causal mask.

Attention has two implementations of the same function (Hugging Face's `attn_implementation`):
- "eager": softmax(Q K^T / sqrt(d_k)) V with the mask written out; it returns the
  weights, so the heatmaps and learners read this one;
- "sdpa": torch's scaled_dot_product_attention, fused, for speed.
A `KVCache` lets generation feed one new token per step; `MiniGPT.decode_one` is that step
written with as few tensor ops as the maths allows, because one token costs little arithmetic
and mostly per-op overhead. Dropout draws its masks from a
generator the trainer hands over (`use_generator`), so two runs in one process never share
torch's global random state; `MiniGPT(config, seed=...)` initialises from its own generator too.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import GPTConfig


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """`model` in eval mode (no dropout) inside the block, and back in the mode it was in after it,
    even when the block raises: how every measurement of a model that may be training runs."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)

ATTN_IMPLEMENTATIONS = ("sdpa", "eager")
_SQRT_HALF = math.sqrt(0.5)


def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same)."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * inv_freq)
    pe[:, 1::2] = torch.cos(position * inv_freq)
    return pe  # (max_len, d_model)


def causal_mask(t_query: int, t_key: int, device: torch.device | None = None) -> torch.Tensor:
    """True where a query may look: itself and earlier keys. Queries are the last t_query keys.
    (scaled_dot_product_attention reads a boolean mask the same way.)"""
    q_pos = torch.arange(t_key - t_query, t_key, device=device)[:, None]
    k_pos = torch.arange(t_key, device=device)[None, :]
    return k_pos <= q_pos  # (t_query, t_key)


def allowed_keys(t_query: int, t_key: int, window: int | None, device: torch.device | None = None) -> torch.Tensor:
    """The causal mask, and with a window only the last `window` keys of each query (itself included)."""
    allowed = causal_mask(t_query, t_key, device)
    if window is not None:
        q_pos = torch.arange(t_key - t_query, t_key, device=device)[:, None]
        allowed &= torch.arange(t_key, device=device)[None, :] > q_pos - window
    return allowed  # (t_query, t_key)


def eager_attention(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, allowed: torch.Tensor | None, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T * scale) V, returning the output and the attention weights."""
    scores = (Q @ K.transpose(-2, -1)) * scale  # (B, H, Tq, Tk)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    return weights @ V, weights  # (B, H, Tq, d_k), (B, H, Tq, Tk)


def sdpa_attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, **sdpa_kwargs) -> torch.Tensor:
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
        self.rows = [(k[0], v[0]) for k, v in zip(self.keys, self.values)]  # batch row 0, for decode_one

    def update(self, layer: int, K: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store this step's K, V (B, H, T, d_k) and return all keys and values so far."""
        end = self.length + K.size(2)
        self.keys[layer][:, :, self.length : end] = K
        self.values[layer][:, :, self.length : end] = V
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def view_rows(self, start: int, count: int = 1, length: int = 0) -> "KVCache":
        """Batch rows start..start+count-1 as a cache of their own, `length` positions filled, over
        this one's storage: what a forward pass writes to it lands in those rows here."""
        view = object.__new__(KVCache)
        view.keys = [k[start : start + count] for k in self.keys]
        view.values = [v[start : start + count] for v in self.values]
        view.length = length
        view.rows = [(k[0], v[0]) for k, v in zip(view.keys, view.values)]
        return view

    def move_row(self, source: int, target: int, length: int) -> None:
        """Copy row `source`'s first `length` positions into row `target`, every layer."""
        for k, v in zip(self.keys, self.values):
            k[target, :, :length] = k[source, :, :length]
            v[target, :, :length] = v[source, :, :length]


@dataclass
class DecodeWeights:
    """What MiniGPT.decode_one reads per token, looked up once (nn.Module attribute lookups
    cost more than some of the ops they feed)."""

    embedding: torch.Tensor
    positions: torch.Tensor
    layers: list[tuple]  # per block: (LN1 weight, bias, eps), W_QKV, W_O, (LN2 ...), W_1, b_1, W_2, b_2
    final_norm: tuple
    head: torch.Tensor
    scale: float
    empty: torch.Tensor  # baddbmm's ignored input (beta=0)


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
        attn_implementation: str,
        scale: float,
        cache: KVCache | None = None,
        layer: int = 0,
        window: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """window: each query sees only itself and the window - 1 keys before it (None: every
        earlier key). Nothing in the model passes it: a knock-out does, through a forward pre-hook
        on its copy's attention layers (minigpt/lab/knockout.py), so the model holds no such state."""
        B, T, d_model = x.shape
        Q, K, V = self.W_QKV(x).split(d_model, dim=-1)  # each (B, T, d_model)
        Q, K, V = (t.view(B, T, self.num_heads, self.d_k).transpose(1, 2) for t in (Q, K, V))  # (B, H, T, d_k)
        past = 0
        if cache is not None:
            past = cache.length
            K, V = cache.update(layer, K, V)  # (B, H, past + T, d_k)
        if window is not None:  # the knock-out's mask, in either path
            allowed = allowed_keys(T, past + T, window, x.device)
            if attn_implementation == "eager":
                out, weights = eager_attention(Q, K, V, allowed, scale)
            else:
                weights, out = None, sdpa_attention(Q, K, V, attn_mask=allowed, scale=scale)
        elif attn_implementation == "eager":
            allowed = causal_mask(T, past + T, x.device) if T > 1 else None  # one query, the newest: sees all
            out, weights = eager_attention(Q, K, V, allowed, scale)
        else:
            weights = None
            # is_causal aligns its mask top-left, right only when queries and keys start together:
            # queries after a cached prefix need the mask written out, offset
            if past == 0 or T == 1:
                out = sdpa_attention(Q, K, V, is_causal=T > 1, scale=scale)
            else:
                out = sdpa_attention(Q, K, V, attn_mask=causal_mask(T, past + T, x.device), scale=scale)
        out = out.transpose(1, 2).contiguous().view(B, T, d_model)  # concatenate heads
        return self.W_O(out), weights


class Dropout(nn.Module):
    """nn.Dropout whose masks come from a generator of the model's own, once one is set."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p
        self.generator: torch.Generator | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        if self.generator is None:
            return F.dropout(x, self.p, training=True)
        keep = torch.empty_like(x).bernoulli_(1 - self.p, generator=self.generator)
        return x * keep.div_(1 - self.p)


class FeedForward(nn.Module):
    """FFN(x) = GELU(x W_1 + b_1) W_2 + b_2, d_model -> d_ff -> d_model."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.linear1 = nn.Linear(config.d_model, config.d_ff)
        self.linear2 = nn.Linear(config.d_ff, config.d_model)
        self.dropout = Dropout(config.dropout)

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
        self.dropout = Dropout(config.dropout)

    def forward(self, x: torch.Tensor, **attn_kwargs) -> tuple[torch.Tensor, torch.Tensor | None]:
        attn_out, weights = self.self_attn(self.norm1(x), **attn_kwargs)
        x = x + self.dropout(attn_out)
        x = x + self.dropout(self.ffn(self.norm2(x)))
        return x, weights


class MiniGPT(nn.Module):
    def __init__(self, config: GPTConfig, seed: int | None = None):
        """seed: initialise from a generator of its own (else from torch's global one)."""
        super().__init__()
        self.config = config.validate()
        self.token_embed = nn.Embedding(config.vocab_size, config.d_model)
        self.register_buffer("pos_encoding", sinusoidal_positions(config.max_len, config.d_model), persistent=False)
        self.dropout_embed = Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.num_layers))
        self.final_norm = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.token_embed.weight  # weight tying
        self._init_weights(None if seed is None else torch.Generator().manual_seed(seed))

    def _init_weights(self, generator: torch.Generator | None) -> None:
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear) and module is not self.lm_head:  # the head is the embedding
                std = 0.02
                if name.endswith(("W_O", "linear2")):  # residual projections, GPT-2 style
                    std /= math.sqrt(2 * self.config.num_layers)
                nn.init.normal_(module.weight, mean=0.0, std=std, generator=generator)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                # std d_model^-1/2: after the sqrt(d_model) scale, tokens and positions have unit size.
                nn.init.normal_(module.weight, mean=0.0, std=self.config.d_model**-0.5, generator=generator)

    def use_generator(self, generator: torch.Generator | None) -> None:
        """Draw every dropout mask from `generator` (None: torch's global generator)."""
        for module in self.modules():
            if isinstance(module, Dropout):
                module.generator = generator

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        *,
        return_attention: bool = False,
        attn_implementation: str = "sdpa",
        kv_cache: KVCache | None = None,
        scale_attention: bool | None = None,
    ):
        """Logits (B, T, vocab) and the mean cross-entropy against `targets` (or None).

        return_attention=True takes the eager implementation and also returns the per-layer
        attention weights, a list of (B, H, T, T) tensors from this same forward pass.
        scale_attention overrides the config's 1/sqrt(d_k) switch for this call.
        """
        if attn_implementation not in ATTN_IMPLEMENTATIONS:
            raise ValueError(f"attn_implementation must be one of {ATTN_IMPLEMENTATIONS}, got {attn_implementation!r}")
        B, T = idx.shape
        past = kv_cache.length if kv_cache is not None else 0
        if past + T > self.config.max_len:
            raise ValueError(f"sequence of {past + T} tokens exceeds max_len {self.config.max_len}")
        scale = self.attention_scale(scale_attention)
        implementation = "eager" if return_attention else attn_implementation

        x = self.dropout_embed(self.embed(idx, past))  # (B, T, d_model)
        attentions = []
        for layer, block in enumerate(self.blocks):
            x, weights = block(x, attn_implementation=implementation, scale=scale, cache=kv_cache, layer=layer)
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

    def attention_scale(self, scale_attention: bool | None = None) -> float:
        """The factor on q·k: 1/sqrt(d_k), or 1 where the config (or this override) turns it off."""
        scaled = self.config.scale_attention if scale_attention is None else scale_attention
        return 1.0 / math.sqrt(self.config.d_k) if scaled else 1.0

    def embed(self, idx: torch.Tensor, past: int = 0) -> torch.Tensor:
        """Token embeddings x sqrt(d_model) plus the positions they stand at (after `past` tokens)."""
        return self.token_embed(idx) * math.sqrt(self.config.d_model) + self.pos_encoding[past : past + idx.size(1)]

    @torch.no_grad()
    def residual_stream(self, idx: torch.Tensor, scale_attention: bool | None = None) -> list[torch.Tensor]:
        """The residual stream of one forward pass in eval mode: x before each block and after
        the last, num_layers + 1 tensors (B, T, d_model). The model's logits are the last one
        through final_norm and the tied head."""
        scale = self.attention_scale(scale_attention)
        with eval_mode(self):
            stream = [self.embed(idx)]
            for layer, block in enumerate(self.blocks):
                stream.append(block(stream[-1], attn_implementation="eager", scale=scale, layer=layer)[0])
        return stream

    @torch.no_grad()
    def attention_maps(self, idx: torch.Tensor, scale_attention: bool | None = None) -> torch.Tensor:
        """Attention weights of one sequence idx (1, T), stacked (layers, heads, T, T), in eval mode."""
        with eval_mode(self):
            _, _, maps = self(idx, return_attention=True, scale_attention=scale_attention)
        return torch.stack([m[0] for m in maps]).float()

    def decode_one(self, token: int, cache: KVCache, weights: "DecodeWeights | None" = None) -> torch.Tensor:
        """The logits (vocab,) for one new token after the `cache.length` tokens in `cache`, which
        gains its keys and values: forward() on a (1, 1) input in eval mode, the same maths.

        One token is a handful of matrix-vector products, so the time goes to calling ops, not to
        arithmetic: this path runs a dozen kernels per layer with no module calls, no batch or head
        reshapes and the residual adds fused into addmv. `weights` (decode_weights(): the
        parameters themselves, not copies) saves looking them up per token. It falls back to
        forward() while training (dropout), under autocast, and where a block's attention is hooked
        (a knock-out's window, an instrument reading it): this path calls no module, so no hook."""
        pos = cache.length
        if pos + 1 > self.config.max_len:
            raise ValueError(f"sequence of {pos + 1} tokens exceeds max_len {self.config.max_len}")
        device = self.token_embed.weight.device
        # the fast path reads batch row 0 only (cache.rows) and the weights in their own dtype
        if (self.training or cache.keys[0].size(0) != 1 or torch.is_autocast_enabled(device.type)
                or any(b.self_attn._forward_pre_hooks or b.self_attn._forward_hooks for b in self.blocks)):
            return self(torch.tensor([[token]], device=device), kv_cache=cache)[0][0, -1]
        w = weights or self.decode_weights()
        d, heads, d_k = self.config.d_model, self.config.num_heads, self.config.d_k
        x = torch.add(w.positions.select(0, pos), w.embedding.select(0, token), alpha=math.sqrt(d))  # (d,)
        for (ln1, W_QKV, W_O, ln2, W_1, b_1, W_2, b_2), (keys, values) in zip(w.layers, cache.rows):
            q, k, v = torch.mv(W_QKV, F.layer_norm(x, (d,), *ln1)).view(3, heads, 1, d_k).unbind(0)
            keys.narrow(1, pos, 1).copy_(k)  # keys, values: (H, max_len, d_k); k, v: (H, 1, d_k)
            values.narrow(1, pos, 1).copy_(v)
            scores = torch.baddbmm(w.empty, q, keys.narrow(1, 0, pos + 1).transpose(1, 2), beta=0, alpha=w.scale)
            out = torch.bmm(torch.softmax(scores, dim=-1), values.narrow(1, 0, pos + 1))  # (H, 1, d_k)
            x = torch.addmv(x, W_O, out.view(d))  # x + W_O · concat(heads)
            z = torch.addmv(b_1, W_1, F.layer_norm(x, (d,), *ln2))  # (d_ff,)
            # GELU(z) = z/2 (1 + erf(z/sqrt 2)): the 1/2 rides on W_2's product (F.gelu is slower here)
            x = torch.addmv(x, W_2, torch.addcmul(z, z, torch.erf(z * _SQRT_HALF)), alpha=0.5).add_(b_2)
        cache.length += 1
        return torch.mv(w.head, F.layer_norm(x, (d,), *w.final_norm))  # (vocab,)

    def decode_rows(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache,
                    weights: "DecodeWeights | None" = None) -> torch.Tensor:
        """The logits (B, vocab) of one new token for each of the first B rows of `cache`, row b's
        token at its own position positions[b] (the tokens before it are in that row's cache, which
        gains this one's keys and values). decode_one's maths for many sequences of different
        lengths at once: one matrix product per weight instead of one product per sequence, and
        attention over the longest row with the keys past each row's own length masked out.
        The caller keeps each row's length (cache.length is not used). Eval mode, no hooks."""
        B = tokens.numel()
        if B and int(positions.max()) + 1 > self.config.max_len:
            raise ValueError(f"sequence of {int(positions.max()) + 1} tokens exceeds max_len {self.config.max_len}")
        w = weights or self.decode_weights()
        d, heads, d_k = self.config.d_model, self.config.num_heads, self.config.d_k
        span = int(positions.max()) + 1 if B else 0  # keys up to the longest row
        rows = torch.arange(B, device=tokens.device)
        hidden = torch.arange(span, device=tokens.device) > positions.view(B, 1, 1, 1)  # (B, 1, 1, span)
        x = torch.add(w.positions.index_select(0, positions), w.embedding.index_select(0, tokens),
                      alpha=math.sqrt(d))  # (B, d)
        for (ln1, W_QKV, W_O, ln2, W_1, b_1, W_2, b_2), keys, values in zip(w.layers, cache.keys, cache.values):
            q, k, v = torch.mm(F.layer_norm(x, (d,), *ln1), W_QKV.t()).view(B, 3, heads, d_k).unbind(1)
            keys[rows, :, positions] = k  # keys, values: (rows, H, max_len, d_k); k, v: (B, H, d_k)
            values[rows, :, positions] = v
            scores = torch.matmul(q.unsqueeze(2), keys[:B, :, :span].transpose(2, 3)).mul_(w.scale)  # (B, H, 1, span)
            weights_ = torch.softmax(scores.masked_fill_(hidden, float("-inf")), dim=-1)
            out = torch.matmul(weights_, values[:B, :, :span])  # (B, H, 1, d_k)
            x = torch.addmm(x, out.view(B, d), W_O.t())
            z = torch.addmm(b_1, F.layer_norm(x, (d,), *ln2), W_1.t())  # (B, d_ff)
            x = torch.addmm(x, torch.addcmul(z, z, torch.erf(z * _SQRT_HALF)), W_2.t(), alpha=0.5).add_(b_2)
        return torch.mm(F.layer_norm(x, (d,), *w.final_norm), w.head.t())  # (B, vocab)

    def decode_weights(self) -> "DecodeWeights":
        """The tensors decode_one reads, gathered once: the parameters themselves, no copies, so an
        optimizer step or load_state_dict shows through. Gather them again after .to() or .double(),
        which replace the positions buffer (stream() gathers them per call)."""
        def norm(ln: nn.LayerNorm) -> tuple:
            return ln.weight, ln.bias, ln.eps

        layers = [
            (norm(b.norm1), b.self_attn.W_QKV.weight, b.self_attn.W_O.weight, norm(b.norm2), b.ffn.linear1.weight,
             b.ffn.linear1.bias, b.ffn.linear2.weight, b.ffn.linear2.bias)
            for b in self.blocks
        ]
        return DecodeWeights(self.token_embed.weight, self.pos_encoding, layers, norm(self.final_norm),
                             self.lm_head.weight, self.attention_scale(), self.token_embed.weight.new_empty(()))

    def new_kv_cache(self, batch_size: int = 1) -> KVCache:
        p = self.token_embed.weight
        return KVCache(self.config, batch_size, p.device, p.dtype)
