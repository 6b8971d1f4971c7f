"""The two models the benchmarks race against, re-implemented here from their descriptions.

- `DemoGPT` + `DemoStep`: the reference demo's network and training step as the demo
  writes them: separate W_Q/W_K/W_V, attention written out with a masked softmax, a
  second no-grad pass per layer that recomputes the attention weights for plotting,
  dropout on the attention output and again on the residual branch, PyTorch's default
  initialisation, AdamW on every parameter, gradient clipping, `loss.item()` each step,
  and batches made by a DataLoader that builds one tensor per sample and stacks them.
- `NanoGPT` + `NanoStep`: karpathy/nanoGPT's model.py with bias=False: fused c_attn,
  learned positions, LayerNorm without bias, GELU MLP 4x, SDPA with is_causal, tied
  head, GPT-2 init; AdamW with nanoGPT's two groups and no fused/foreach argument;
  batches stacked from per-window slices as nanoGPT's get_batch does; warmup + cosine lr.

Neither imports the reference files: they are written from the architecture descriptions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from minigpt.model import sinusoidal_positions

from .common import BABY, Shape


# ---------------------------------------------------------------- the reference demo
class DemoAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads  # the demo's names, as in its source
        self.W_Q = nn.Linear(d_model, d_model, bias=False)
        self.W_K = nn.Linear(d_model, d_model, bias=False)
        self.W_V = nn.Linear(d_model, d_model, bias=False)
        self.W_O = nn.Linear(d_model, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, T, d_model = x.shape
        Q, K, V = (w(x).view(B, T, self.num_heads, self.d_k).transpose(1, 2) for w in (self.W_Q, self.W_K, self.W_V))
        scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)  # (B, H, T, T)
        weights = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)  # (B, H, T, T)
        out = torch.matmul(weights, V).transpose(1, 2).contiguous().view(B, T, d_model)  # heads side by side again
        out = self.dropout(self.W_O(out))
        with torch.no_grad():  # the demo recomputes the weights for its heatmaps on every call
            again = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)
            plotted = F.softmax(again.masked_fill(mask, float("-inf")), dim=-1)
        return out, plotted


class DemoBlock(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float):
        super().__init__()
        self.self_attn = DemoAttention(d_model, num_heads, dropout)
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)  # with biases, as the demo has
        self.ffn_dropout = nn.Dropout(dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        attn_out, weights = self.self_attn(self.norm1(x), mask)
        x = x + self.dropout(attn_out)  # second dropout on a branch already dropped inside
        ffn = self.linear2(self.ffn_dropout(F.gelu(self.linear1(self.norm2(x)))))
        return x + self.dropout(ffn), weights


class DemoGPT(nn.Module):
    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int, d_ff: int,
                 max_len: int, dropout: float):
        super().__init__()
        self.d_model, self.vocab_size = d_model, vocab_size
        self.token_embed = nn.Embedding(vocab_size, d_model)
        self.register_buffer("pe", sinusoidal_positions(max_len, d_model)[None])  # (1, max_len, d_model)
        self.dropout_embed = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(DemoBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embed.weight  # tied, as in the demo and the project
        self.register_buffer("causal_mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=1))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        mask = self.causal_mask[:T, :T].view(1, 1, T, T)
        x = self.token_embed(idx) * math.sqrt(self.d_model) + self.pe[:, :T]  # the √d_model scale the project keeps
        x = self.dropout_embed(x)
        for block in self.blocks:
            x, _ = block(x, mask)
        return self.lm_head(self.final_norm(x))  # (B, T, vocab)


class WindowDataset(Dataset):
    """Every window of the corpus as a (input, target) pair of Python lists, one tensor each per item."""

    def __init__(self, ids: list[int], block_size: int):
        # every window
        self.samples = [(ids[i : i + block_size], ids[i + 1 : i + block_size + 1]) for i in range(len(ids) - block_size)]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.samples[i]
        return torch.tensor(x, dtype=torch.long), torch.tensor(y, dtype=torch.long)


class DemoStep:
    """One optimizer step of the demo's loop; batches come from a shuffled DataLoader."""

    def __init__(self, model: DemoGPT, ids: list[int], batch_size: int, block_size: int, lr: float = 3e-3):
        self.model = model.train()
        self.loader = DataLoader(WindowDataset(ids, block_size), batch_size=batch_size, shuffle=True)
        self.batches = iter(self.loader)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
        self.criterion = nn.CrossEntropyLoss()
        self.total_loss = 0.0

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        try:
            return next(self.batches)
        except StopIteration:  # a new epoch
            self.batches = iter(self.loader)
            return next(self.batches)

    def __call__(self) -> int:
        inputs, targets = self.next_batch()
        self.optimizer.zero_grad()
        logits = self.model(inputs)
        loss = self.criterion(logits.view(-1, self.model.vocab_size), targets.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=1.0)
        self.optimizer.step()
        self.total_loss += loss.item()
        return inputs.numel()


# ---------------------------------------------------------------- nanoGPT
@dataclass
class NanoConfig:
    vocab_size: int = 65
    block_size: int = BABY.block_size
    n_layer: int = BABY.num_layers
    n_head: int = BABY.num_heads
    n_embd: int = BABY.d_model
    dropout: float = BABY.dropout


def nano_config(shape: Shape, vocab_size: int) -> NanoConfig:
    """nanoGPT's config of a shape (its FFN is always 4 x n_embd)."""
    return NanoConfig(vocab_size, shape.block_size, shape.num_layers, shape.num_heads, shape.d_model, shape.dropout)


class NanoLayerNorm(nn.Module):
    """LayerNorm with the bias left out (nanoGPT's bias=False)."""

    def __init__(self, ndim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, None, 1e-5)


class NanoAttention(nn.Module):
    def __init__(self, cfg: NanoConfig):
        super().__init__()
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        self.n_head, self.dropout = cfg.n_head, cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class NanoMLP(nn.Module):
    def __init__(self, cfg: NanoConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=False)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=False)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class NanoBlock(nn.Module):
    def __init__(self, cfg: NanoConfig):
        super().__init__()
        self.ln_1, self.attn = NanoLayerNorm(cfg.n_embd), NanoAttention(cfg)
        self.ln_2, self.mlp = NanoLayerNorm(cfg.n_embd), NanoMLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    def __init__(self, cfg: NanoConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList(NanoBlock(cfg) for _ in range(cfg.n_layer))
        self.ln_f = NanoLayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        T = idx.size(1)
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        if targets is None:
            return self.lm_head(x[:, [-1], :]), None
        logits = self.lm_head(x)
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    def configure_optimizer(self, lr: float, weight_decay: float, betas: tuple[float, float]) -> torch.optim.AdamW:
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=lr, betas=betas)  # nanoGPT asks for fused only on CUDA


def nano_lr(it: int, lr: float = 1e-3, min_lr: float = 1e-4, warmup: int = 100, decay_iters: int = 2000) -> float:
    """nanoGPT's get_lr: linear warmup, cosine to min_lr at decay_iters, then flat."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay_iters:
        return min_lr
    ratio = (it - warmup) / (decay_iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def nano_batch(data: torch.Tensor, batch_size: int, block_size: int, generator: torch.Generator | None = None):
    """nanoGPT's get_batch: random starts, one slice per row, stacked."""
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    x = torch.stack([data[i : i + block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])
    return x, y


class NanoStep:
    """One iteration of nanoGPT's train.py on CPU (no autocast, no compile, grad_clip 1.0)."""

    def __init__(self, model: NanoGPT, data: torch.Tensor, batch_size: int, block_size: int,
                 lr: float = 1e-3, min_lr: float = 1e-4, warmup: int = 100, max_iters: int = 2000,
                 weight_decay: float = 0.1, betas: tuple[float, float] = (0.9, 0.99), log_interval: int = 1,
                 seed: int = 1337):
        self.model = model.train()
        self.data, self.batch_size, self.block_size = data, batch_size, block_size
        self.optimizer = model.configure_optimizer(lr, weight_decay, betas)
        self.schedule = dict(lr=lr, min_lr=min_lr, warmup=warmup, decay_iters=max_iters)
        self.log_interval, self.iter_num = log_interval, 0
        self.generator = torch.Generator().manual_seed(seed)
        self.batch = nano_batch(data, batch_size, block_size, self.generator)
        self.last_loss = float("nan")

    def __call__(self) -> int:
        lr = nano_lr(self.iter_num, **self.schedule)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        x, y = self.batch
        _, loss = self.model(x, y)
        self.batch = nano_batch(self.data, self.batch_size, self.block_size, self.generator)  # prefetch
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.iter_num % self.log_interval == 0:
            self.last_loss = loss.item()
        self.iter_num += 1
        return x.numel()
