"""Tiny models and corpora for the library tests: they step in milliseconds on a CPU."""
from __future__ import annotations

import torch

from minigpt import CharTokenizer, GPTConfig, MiniGPT

TEXT = "the cat sat on the mat. the dog sat on the log. " * 8


def tiny_config(vocab_size: int = 12, **overrides) -> GPTConfig:
    settings = dict(vocab_size=vocab_size, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=16, dropout=0.0)
    settings.update(overrides)
    return GPTConfig(**settings)


def tiny_model(seed: int = 0, **overrides) -> MiniGPT:
    torch.manual_seed(seed)
    return MiniGPT(tiny_config(**overrides)).eval()


def tiny_tokenizer() -> CharTokenizer:
    return CharTokenizer.from_text(TEXT)


def tiny_lm(seed: int = 0, **overrides) -> tuple[MiniGPT, CharTokenizer]:
    """A tiny untrained model over TEXT's characters, with its tokenizer."""
    tok = tiny_tokenizer()
    return tiny_model(seed, vocab_size=tok.vocab_size, **overrides), tok


def tiny_plan(max_steps: int = 20, batch_size: int = 4, block_size: int = 8, **overrides):
    """What a tiny run over TEXT will train, as the registry's line reads it (minigpt.serve.runs.recipe.RunSpec)."""
    from minigpt import TrainConfig
    from minigpt.serve.runs.recipe import RunSpec

    tok = tiny_tokenizer()
    model = tiny_config(vocab_size=tok.vocab_size, **overrides).validate()
    train = TrainConfig(batch_size=batch_size, block_size=block_size, max_steps=max_steps).validate(model)
    return RunSpec("", model, train, tuple(tok.chars), TEXT)
