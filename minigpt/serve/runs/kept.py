"""A run that trains no more, kept in its small form for the rest of the lesson.

A finished, stopped or failed run is still its owner's: Generate, Attention, the time-lapse, the
comparison and the class board read it. None of them needs its optimizer state, its data or the
process it trained in, so the registry swaps such a run for a `KeptRun`: its weights, its history,
its evaluations (samples and the probe's attention maps) and its facts, nothing else. `nbytes`
says what it holds, which the registry counts against the memory it may keep runs in.
"""
from __future__ import annotations

import copy
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from ...model import MiniGPT
from .run import RunSnapshot, RunView

if TYPE_CHECKING:
    from ...config import GPTConfig, TrainConfig
    from ...tokenizer import CharTokenizer

KEPT_SHARE = 40    # a run kept small holds at most this share of the memory for kept runs: a class of 40 fits
EVENT_BYTES = 200  # a TrainEvent: a dataclass of a dozen floats and ints, as sys.getsizeof counts it, rounded up


class KeptFacts:
    """`run.trainer` of a kept run (run.TrainerFacts): what its Trainer said last, and its validation windows."""

    def __init__(self, trainer) -> None:
        self.cfg: TrainConfig = trainer.cfg
        self.model_config: GPTConfig = trainer.model_config
        self.tokenizer: CharTokenizer = trainer.tokenizer
        self.model_params, self.corpus_chars = trainer.model_params, trainer.corpus_chars
        self.step, self.elapsed, self.stopped_early = trainer.step, trainer.elapsed, trainer.stopped_early
        self.last_val_loss, self.best_val = trainer.last_val_loss, trainer.best_val
        self.val_windows = trainer.val_windows  # fixed windows of the held-out split, a few KB: validation stays exact


class KeptRun:
    """A run in its small form (run.RunView). Nothing in it changes: every reader may share it."""

    def __init__(self, run: RunView, max_bytes: int | None = None):
        """Take `run`'s weights, snapshot and facts; the caller closes `run` afterwards. Past `max_bytes`
        (a big model's long time-lapse), the attention of every other evaluation between the first and
        the last is let go, until it fits or only those two are left: one run never crowds out a class."""
        self.run_id = run.run_id
        self._snap = run.snapshot()
        model = run.inference_model()  # a copy: the run is closed after, whoever else holds it
        self._config = copy.deepcopy(model.config)
        self._weights = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}  # no GPU memory held
        self._device = next(model.parameters()).device  # where Generate runs it again
        self.trainer = KeptFacts(run.trainer)
        self._closed = False
        if max_bytes is not None:
            self._thin(max_bytes)

    def _thin(self, max_bytes: int) -> None:
        evals = list(self._snap.evals)
        while self.nbytes() > max_bytes:
            # the first and last frame stay: the time-lapse still shows where attention began and ended
            framed = [i for i, r in enumerate(evals) if r.attention is not None][1:-1]
            if not framed:
                return
            for i in framed[::2]:  # every other frame: the time-lapse keeps its pace, at half the frames
                evals[i] = replace(evals[i], attention=None)
            self._snap = replace(self._snap, evals=evals)

    @property
    def state(self) -> str:
        return "closed" if self._closed else self._snap.state

    def is_alive(self) -> bool:
        return False

    def snapshot(self) -> RunSnapshot:
        snap = self._snap
        return RunSnapshot.of(snap.run_id, snap.state, step=snap.step, max_steps=snap.max_steps, history=snap.history,
                              evals=snap.evals, elapsed=snap.elapsed, tokens_per_sec=snap.tokens_per_sec,
                              error=snap.error, stopped_early=snap.stopped_early)

    def inference_model(self) -> MiniGPT:
        model = MiniGPT(copy.deepcopy(self._config))
        model.load_state_dict(self._weights)  # copied into a new model: callers may change theirs
        return model.to(self._device).eval()

    def checkpoint_parts(self) -> dict:
        """What save_pretrained needs; no optimizer state: a kept run is not resumed."""
        return {"model": self.inference_model().cpu(), "tokenizer": self.trainer.tokenizer,
                "train_config": self.trainer.cfg, "optimizer_state": None,
                "trainer_state": {"step": self._snap.step, "elapsed": self._snap.elapsed},
                "val_loss": self.trainer.last_val_loss}

    def close(self, timeout: float | None = 5.0) -> None:
        """Forgotten: its weights and evaluations go at once, whoever still holds the object (a page of
        a session that has gone); its history and facts stay readable, as a closed run's do."""
        self._closed = True
        self._weights = {}
        self._snap = replace(self._snap, evals=[], state="closed")

    def nbytes(self) -> int:
        """The bytes this kept run holds: weights, the probe's attention maps, samples and the history."""
        weights = sum(t.numel() * t.element_size() for t in self._weights.values())
        attention = sum(r.attention.nbytes for r in self._snap.evals if isinstance(r.attention, np.ndarray))
        samples = sum(sys.getsizeof(r.sample) for r in self._snap.evals)  # str overhead included, as Python counts it
        windows = sum(t.numel() * t.element_size() for t in _tensors(self.trainer.val_windows))
        return weights + attention + samples + windows + EVENT_BYTES * len(self._snap.history)


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    # a Windows object (minigpt.data) holds its tensors as attributes
    return [t for v in vars(value).values() for t in _tensors(v)] if hasattr(value, "__dict__") else []
