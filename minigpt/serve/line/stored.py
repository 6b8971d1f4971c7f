"""A run as the store kept it, read back by a server that does not hold it in memory: after a
restart, or after the registry let it go.

A run's recipe (`RunSpec.recipe()`, its corpus aside) is what rebuilds it. A `StoredRun`
is what pages read of it (run.RunView): its history, samples, state and facts from the database, its
weights from its newest checkpoint, read when a page asks. A run that was training or waiting when
its server stopped reads as "interrupted" at the step it had logged; its owner resumes it from its
newest checkpoint (the registry does: RunRegistry.control).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ...messages import LabError, Message
from ..runs.recipe import PlannedTrainer, RunSpec
from ..runs.run import INTERRUPTED, RunSnapshot

if TYPE_CHECKING:
    from ...model import MiniGPT
    from ..store.database import Store
    from ..store.runs import StoredRunRow

SETTLED_STATES = ("finished", "stopped", "error")  # a stored run in one of these comes back as it was


class NoWeightsError(LabError, LookupError):
    """A stored run whose checkpoint the store does not have (any more)."""


def error_json(error: Any) -> dict | None:
    """A run's error as the store keeps it: a message's template and parameters, or its words."""
    if error is None:
        return None
    # duck-typed: a LabError and a Message both carry a template, which the catalogs translate again on reading
    template, params = getattr(error, "template", None), getattr(error, "params", None)
    if isinstance(template, str) and isinstance(params, dict):  # JSON and PostgreSQL take no NaN: those as text
        return {"template": template, "params": {k: v if isinstance(v, (int, str, bool)) or v is None
                                                  or isinstance(v, float) and math.isfinite(v) else str(v)
                                                  for k, v in params.items()}}
    # anything else, in its words: read back as a message with no template to translate
    return {"text": f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)}


def error_from_json(data: dict | None) -> Message | None:
    if not data:
        return None
    if "template" in data:
        return Message.restored(data["template"], data.get("params", {}))
    return Message("{error}", error=data.get("text", ""))


def stored_facts(row: StoredRunRow, spec: RunSpec):
    """`run.trainer` of a stored run (run.TrainerFacts): its spec's facts (recipe.PlannedTrainer, which
    draws the validation windows when asked), at the step, time and losses it had logged."""
    facts = PlannedTrainer(spec)
    facts.step, facts.elapsed, facts.stopped_early = row.step, row.elapsed, row.stopped_early
    vals = [(r.step, r.val_loss) for r in row.evals]  # what a live Trainer's last and best would have said
    facts.last_val_loss = vals[-1][1] if vals else None
    facts.best_val = min(vals, key=lambda v: v[1]) if vals else None
    return facts


class StoredRun:
    """A run read from the store (run.RunView); see the module docstring. Nothing in it changes."""

    def __init__(self, row: StoredRunRow, store: Store):
        self.run_id, self._row, self._store = row.run_id, row, store
        self.spec = RunSpec.from_recipe(row.run_id, row.recipe, row.text)
        self.trainer = stored_facts(row, self.spec)
        # asked once: a page shows "goes on from step N" without reading a checkpoint's bytes
        self.resume_step = store.checkpoints.step(row.run_id)  # its newest checkpoint's, None without one
        self._closed = False

    @property
    def state(self) -> str:
        if self._closed or self._row.state == "cancelled":  # left the line before it trained
            return "closed"
        return self._row.state if self._row.state in SETTLED_STATES else INTERRUPTED

    def is_alive(self) -> bool:
        return False

    def snapshot(self) -> RunSnapshot:
        row = self._row
        return RunSnapshot.of(row.run_id, self.state, step=row.step, max_steps=self.spec.train.max_steps,
                              history=row.history, evals=row.evals, elapsed=row.elapsed,
                              tokens_per_sec=row.tokens_per_sec or None,  # 0 (an older row): from the history
                              error=error_from_json(row.error), stopped_early=row.stopped_early)

    def checkpoint(self) -> tuple[int, dict[str, bytes]]:
        """Its newest checkpoint's step and files; NoWeightsError where the store has none."""
        found = self._store.checkpoints.load(self.run_id)
        if found is None:
            raise NoWeightsError("The weights of run {run} are not kept on this server: it has no checkpoint.",
                                 run=self.run_id)
        return found

    def inference_model(self) -> MiniGPT:
        from ...checkpoint import load_files

        _step, files = self.checkpoint()
        return load_files(files, device=self.spec.train.device,
                          source=Message("run {run}'s checkpoint", run=self.run_id)).model.eval()

    def checkpoint_parts(self) -> dict:
        """What save_pretrained needs (a download); no optimizer state, as a kept run's: a stored run is
        resumed by the registry, from the store's own checkpoint."""
        from ...checkpoint import load_files

        step, files = self.checkpoint()
        checkpoint = load_files(files, source=Message("run {run}'s checkpoint", run=self.run_id))
        return {"model": checkpoint.model.eval(), "tokenizer": checkpoint.tokenizer, "train_config": self.spec.train,
                "optimizer_state": None, "trainer_state": {"step": step, "elapsed": self._row.elapsed},
                "val_loss": checkpoint.meta.get("val_loss")}

    def resume_from(self) -> tuple[int, dict[str, bytes] | None, list, list]:
        """What resuming starts from: the newest checkpoint's step and files (0 and None: none, so from
        the start), and the history and evaluations logged up to its step."""
        found = self._store.checkpoints.load(self.run_id)
        step = found[0] if found else 0
        row = self._row
        # past its step the history is dropped: the resumed run logs those steps again, the same
        return (step, found[1] if found else None, [e for e in row.history if e.step <= step and found],
                [r for r in row.evals if r.step <= step and found])

    def close(self, timeout: float | None = 5.0) -> None:
        self._closed = True

    def nbytes(self) -> int:
        """What it holds in memory: its corpus, history and samples (its weights stay in the store)."""
        # 4 bytes a character (a str may hold any), 200 an event (kept.EVENT_BYTES)
        return (4 * len(self._row.text) + 200 * len(self._row.history)
                + sum(len(r.sample) * 4 for r in self._row.evals))

