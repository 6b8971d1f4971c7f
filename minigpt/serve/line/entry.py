"""What the registry holds for each run: a `RunEntry` (the run, its owner's key's digest, what the pages
show), a `HeldSlot` (a slot lent to work on a page's own thread), and the two refusals a learner reads
(`RunLimitError`, `NotOwnerError`). No torch here: Home looks runs up before torch has loaded.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...messages import LabError
from ..runs.recipe import RunSpec
from ..runs.run import ACTIVE_STATES, RunSnapshot
from ..store import keys
from .waiting import WaitingRun

if TYPE_CHECKING:  # for the annotations only
    from ...model import MiniGPT
    from ..runs.run import RunView

CLAIM_SECONDS = 20.0   # a slot granted to a page's own work (the race) that the page has not claimed by then is freed


class RunLimitError(LabError, RuntimeError):
    """The line for a training slot is full."""


class NotOwnerError(LabError, PermissionError):
    """Only the session that started a run (holding its key) may steer it."""


@dataclass(eq=False)
class RunEntry:
    """A run in the registry: the run, its owner's secret and what the pages show about it."""

    run: RunView                          # waiting (WaitingRun), training (Run), kept (KeptRun), stored, or a HeldSlot
    key: str = field(repr=False)          # the owner's secret, handed out once ("" for a run read from the store)
    corpus: str
    probe_text: str
    last_seen: float                      # on the registry's clock: when the owner last showed a sign of life
    facts: Any = None                     # what the caller keeps with the run for its pages (a corpus's task, say)
    spec: RunSpec = field(default=None, repr=False)  # what it trains (its pace, its steps), and what rebuilds it
    order: int = 0                        # its place in the line: lower goes first; a replacement keeps it
    started: float = 0.0                  # when its slot was granted
    last_steered: float = 0.0             # when it started, or its owner last pressed a button for it
    stopped_for_line: bool = False        # paused longer than the registry's grace while others waited
    key_hash: bytes = field(default=b"", repr=False)  # keys.hashed(key): what is compared, and stored
    lasting: bool = False  # the store keeps it (its spec as its recipe): the registry rebuilds it after a restart
    # events, evaluations, state and step the store has (None: no row yet, its news waits)
    saved: tuple | None = field(default=None, repr=False)
    saved_at: float = field(default=float("-inf"), repr=False)
    seen_saved: float = field(default=float("-inf"), repr=False)
    _model: tuple[int, MiniGPT] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if not self.key_hash and self.key:
            self.key_hash = keys.hashed(self.key)  # only the digest is compared, and only it reaches the store

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def is_owner(self, key: str | None) -> bool:
        return keys.matches(key, self.key_hash)

    def is_waiting(self) -> bool:
        # "starting" is out of the line already: its slot is taken while it is built
        return isinstance(self.run, WaitingRun) and self.run.state == "waiting"

    def is_active(self) -> bool:
        # a run that ended, or whose process died, frees its slot even before it is swapped for its small form
        return self.run.state in ACTIVE_STATES and self.run.is_alive()

    def swap(self, run: RunView) -> None:
        """The entry holds `run` from now on (its small form, or a resumed run in line); its weight copy goes."""
        # Called under the registry's lock, so not under this entry's own: inference_model holds that one
        # while it reads weights, and the registry's lock must never wait on a run's.
        self.run, self._model = run, None

    def release(self) -> None:
        """The registry forgot this run: stop it and free its memory, whoever still holds the entry."""
        self.run.close(timeout=2.0)
        with self._lock:
            self._model = None

    def inference_model(self) -> MiniGPT:
        """A weight copy, taken again only when the run has stepped since the last one."""
        run = self.run
        step = (run.trainer.step, id(run))  # the run's identity too: a small form at the same step is another object
        with self._lock:
            if self._model is None or self._model[0] != step:
                try:
                    model = run.inference_model()
                except Exception:
                    if self.run is run:
                        raise
                    model = self.run.inference_model()  # swapped for its small form meanwhile: the same weights
                self._model = (step, model)
            return self._model[1]


class HeldSlot:
    """A training slot granted to work on its holder's own thread (the √d_k race): "running" until
    given back (RunRegistry.give_back). Its holder claims it (RunRegistry.claim) when the work begins;
    a slot nobody claims within CLAIM_SECONDS of being granted is freed for the next in line."""

    def __init__(self, run_id: str, spec: RunSpec, granted: float):
        self.run_id, self.spec, self.granted = run_id, spec, granted
        self.claimed, self._held = False, True

    @property
    def state(self) -> str:
        return "running" if self._held else "closed"  # "running" counts it among the busy slots

    def is_alive(self) -> bool:
        return self._held

    def snapshot(self) -> RunSnapshot:
        return RunSnapshot.of(self.run_id, self.state, step=0, max_steps=self.spec.max_steps)

    def close(self, timeout: float | None = 5.0) -> None:
        self._held = False  # nothing to stop: the work runs on its holder's thread, which reads this
