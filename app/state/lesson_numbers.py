"""The numbers the lesson's words quote, from the code that owns them: the loaded model's (its
vocabulary, context and widths), the Tiny preset the lesson trains, the reference demo's corpus,
the validation share, the feed-forward width, the KV cache's refill. A lesson file (app.state.lesson_file)
names them in braces; a number is never typed into the words. Plain Python, as the lesson files' reader is."""
from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from minigpt import DEFAULT_PRESET, PRESETS, TrainConfig, load_corpus

if TYPE_CHECKING:
    from app.state.loaded_model import LoadedModel

PRESET = "tiny"                # what the lesson trains: a model that learns in seconds
OVERFIT_CORPUS = "demo-zh"     # the reference demo's paragraph: a model can only memorise it
KV_CHARS = 200                 # characters the KV cache step writes both ways
# the names the words may quote, with their kinds: what a lesson file's braces are checked against before
# any model is loaded (and without torch, which Home, counting the lesson's steps, must not wait for)
KINDS = dict.fromkeys(("vocab", "last", "block", "d_model", "d_k", "heads", "layers", "tiny_batch", "tiny_block",
                       "tiny_steps", "tiny_warmup", "demo_chars", "demo_vocab", "kv_chars"), int) | dict.fromkeys(
    ("tiny_lr", "tiny_min_lr", "beta1", "beta2", "weight_decay", "grad_clip", "demo_uniform", "val_share", "ffn_ratio",
     "refill"), float)


def numbers(loaded: LoadedModel) -> dict[str, int]:
    """The loaded model's numbers."""
    config = loaded.model.config
    vocab = loaded.tokenizer.vocab_size
    return dict(vocab=vocab, last=vocab - 1, block=loaded.block_size, d_model=config.d_model, d_k=config.d_k,
                heads=config.num_heads, layers=config.num_layers)


def quoted_numbers() -> dict[str, float]:
    """The numbers the words quote that the code owns, besides the loaded model's."""
    from minigpt import REFILL_KEPT  # here: minigpt.sample brings torch
    tiny = PRESETS[PRESET].train
    demo = _demo_text()
    model = PRESETS[DEFAULT_PRESET].model
    return dict(tiny_batch=tiny.batch_size, tiny_block=tiny.block_size, tiny_steps=tiny.max_steps,
                tiny_warmup=tiny.warmup_steps, tiny_lr=tiny.lr, tiny_min_lr=tiny.min_lr, beta1=tiny.betas[0],
                beta2=tiny.betas[1], weight_decay=tiny.weight_decay, grad_clip=tiny.grad_clip,
                demo_chars=len(demo), demo_vocab=len(set(demo)), demo_uniform=math.log(len(set(demo))),
                val_share=TrainConfig.val_fraction, ffn_ratio=model.d_ff / model.d_model, refill=REFILL_KEPT,
                kv_chars=KV_CHARS)


def quoted(loaded: LoadedModel) -> dict[str, float]:
    """Every number the words may quote, for this model."""
    return numbers(loaded) | quoted_numbers()


@functools.cache
def _demo_text() -> str:
    return load_corpus(OVERFIT_CORPUS)

