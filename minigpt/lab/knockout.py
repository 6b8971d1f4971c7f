"""Knock-outs: a copy of a model with one part taken out, and what that costs.

The parts: any heads (their outputs zeroed before W_O), the sinusoidal positions, the keys more
than n positions back, and the tie between the embedding and the LM head (the head replaced by
an untied copy of the embedding with its rows shuffled). Each knock-out works on its own deep
copy, so the loaded model, which other pages and other sessions share, never changes. The window
is no weight: the copy's attention layers get it as their `window` argument from a forward
pre-hook, so the core model keeps no knock-out state.

What it costs is measured on the model's own validation windows (train.validation_windows: the
same ones before and after, and the ones its training measured), so the change in loss is the
knock-out's alone; `head_importance` zeroes each head alone in turn.
"""
from __future__ import annotations

import copy
import functools
from dataclasses import dataclass

import numpy as np
import torch

from ..config import GPTConfig
from ..data import Windows
from ..messages import LabError
from ..model import MiniGPT
from ..train import estimate_loss


class KnockoutError(LabError, ValueError):
    """A knock-out that names a part the model does not have."""


@dataclass(frozen=True)
class Knockout:
    """What to take out. heads: (layer, head) pairs, 0-based; window: each query sees itself and
    the window − 1 keys before it (None: every earlier key); shuffle_seed: the shuffled head's."""

    heads: frozenset[tuple[int, int]] = frozenset()
    positions: bool = False
    window: int | None = None
    shuffled_head: bool = False
    shuffle_seed: int = 0

    def check(self, config: GPTConfig) -> "Knockout":
        for layer, head in self.heads:
            if not (0 <= layer < config.num_layers and 0 <= head < config.num_heads):
                raise KnockoutError("the model has {layers} layers of {heads} heads: there is no layer {layer}, "
                                    "head {head}.", layers=config.num_layers, heads=config.num_heads,
                                    layer=layer + 1, head=head + 1)
        if self.window is not None and self.window < 1:
            raise KnockoutError("a query must see at least itself: the window must be 1 or more, got {window}.",
                                window=self.window)
        return self

    @property
    def empty(self) -> bool:
        return not (self.heads or self.positions or self.window is not None or self.shuffled_head)


def knocked_out(model: MiniGPT, knockout: Knockout) -> MiniGPT:
    """A copy of `model` (in eval mode) with the knock-out applied; `model` is untouched."""
    knockout.check(model.config)
    twin = copy.deepcopy(model).eval()  # deepcopy keeps the tie: the head and the embedding stay one tensor
    d_k = model.config.d_k
    with torch.no_grad():
        for layer, head in knockout.heads:
            # the head's d_k outputs are these columns of W_O's input: zero them, and it adds nothing
            twin.blocks[layer].self_attn.W_O.weight[:, head * d_k : (head + 1) * d_k] = 0
        if knockout.positions:
            twin.pos_encoding.zero_()
        if knockout.shuffled_head:
            generator = torch.Generator().manual_seed(knockout.shuffle_seed)
            order = torch.randperm(model.config.vocab_size, generator=generator)
            embedding = twin.token_embed.weight.detach()
            twin.lm_head.weight = torch.nn.Parameter(embedding[order.to(embedding.device)].clone())  # untied
    if knockout.window is not None:
        for block in twin.blocks:
            block.self_attn.register_forward_pre_hook(functools.partial(_within, knockout.window), with_kwargs=True)
    return twin


def _within(window: int, attention: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The forward pre-hook of a window knock-out: the attention's `window` argument, the narrower
    one where a knock-out of a knock-out brings two. A partial of a module-level function, not a
    closure, so a copy can still be deep-copied and pickled."""
    narrower = window if kwargs.get("window") is None else min(window, kwargs["window"])
    return args, {**kwargs, "window": narrower}


def head_importance(model: MiniGPT, windows: Windows) -> np.ndarray:
    """(layers, heads): how much the validation loss rises when that head alone is zeroed."""
    base = estimate_loss(model, windows)
    twin, d_k = copy.deepcopy(model).eval(), model.config.d_k  # one copy, each head zeroed and put back in turn
    rise = np.zeros((model.config.num_layers, model.config.num_heads))
    for layer, head in np.ndindex(*rise.shape):
        columns = twin.blocks[layer].self_attn.W_O.weight[:, head * d_k : (head + 1) * d_k]  # a view
        kept = columns.detach().clone()
        with torch.no_grad():
            columns.zero_()
            rise[layer, head] = estimate_loss(twin, windows) - base
            columns.copy_(kept)
    return rise
