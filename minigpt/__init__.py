"""MiniGPT Lab's library: a tiny character-level GPT to train, sample, save and look inside.

This module re-exports the core's public API: what the app, the pages and the README use. The
instruments (minigpt.lab), the serving parts (minigpt.serve) and the figures (minigpt.viz) are
imported from their own packages, and every other name from its own module.

Each name here is imported from its module on first use (PEP 562), so that `import minigpt`
loads neither torch nor plotly: Home's first page draws before torch has loaded. The
TYPE_CHECKING block below says the same thing to type checkers and IDEs, which then see every
name's real type; `__getattr__` reads its list of names from that block, so it is written once.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_names

if TYPE_CHECKING:
    from .messages import N_, LabError, Message
    from .config import (DEFAULT_PRESET, EARLY_STOP_PATIENCE, PRESETS, ConfigError, GPTConfig, TrainConfig,
                         check_memory_budget)
    from .device import available_devices
    from .tokenizer import CharTokenizer
    from .corpus import (BUILTIN_CORPORA, DEFAULT_CORPUS, CorpusError, check_corpus_fits, corpus_chars,
                         decode_corpus_as, demo_prompts, load_corpus, probe_text)
    from .data import Windows
    from .model import MiniGPT
    from .train import Trainer, build_model, estimate_loss, lr_schedule, validation_windows
    from .sample import (MAX_NEW_TOKENS, REFILL_KEPT, Prompt, SampledToken, Sampling, SamplingError,
                         check_max_new_tokens, generate, prepare_prompt)
    from .batching import batcher_for
    from .header import CheckpointError
    from .checkpoint import Checkpoint
    from .archive import checkpoint_zip, load_zip
    from .pretrained import load_pretrained

__all__, __getattr__, __dir__ = lazy_names(__file__, __name__)
