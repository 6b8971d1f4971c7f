"""The run registry: every training run a server holds, who may steer each, and how many train.

A dashboard serves many browser sessions from one process. `RunRegistry` is the one place
that knows their runs: a run belongs to the session that started it (it holds the run's
secret key; others may watch by id, never steer), at most `max_runs` train at once, runs
whose owner stopped looking for `idle_seconds` are released, and at most `max_kept` are kept
in all. Plain threading, no Streamlit: the app keeps one registry per process.
"""
from __future__ import annotations

import contextlib
import gc
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..messages import LabError

if TYPE_CHECKING:  # for the annotations only: looking a run up needs no torch (Home does, before it loads)
    from ..model import MiniGPT
    from .runner import TrainingRun

ACTIVE_STATES = ("running", "paused")
MAX_SUCCESSORS = 256  # replacements remembered, so that watchers can follow an owner to a new run


class RunLimitError(LabError, RuntimeError):
    """The server already trains as many runs as it allows."""


class NotOwnerError(LabError, PermissionError):
    """Only the session that started a run (holding its key) may steer it."""


@dataclass(eq=False)
class RunEntry:
    """A run in the registry: the run, its owner's secret and what the pages show about it."""

    run: TrainingRun
    key: str = field(repr=False)          # the owner's secret; watchers only know run_id
    corpus: str
    probe_text: str
    last_seen: float                      # on the registry's clock: when the owner last looked
    facts: Any = None                     # what the caller keeps with the run for its pages (a corpus's task, say)
    _model: tuple[int, MiniGPT] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def is_owner(self, key: str | None) -> bool:
        return isinstance(key, str) and secrets.compare_digest(key.encode(), self.key.encode())

    def is_active(self) -> bool:
        return self.run.state in ACTIVE_STATES and self.run.is_alive()

    def release(self) -> None:
        """The registry forgot this run: stop it and free its memory, whoever still holds the entry."""
        self.run.close(timeout=2.0)
        with self._lock:
            self._model = None

    def inference_model(self) -> MiniGPT:
        """A weight copy, taken again only when the run has stepped since the last one."""
        step = self.run.trainer.step
        with self._lock:
            if self._model is None or self._model[0] != step:
                self._model = (step, self.run.inference_model())
            return self._model[1]


class RunRegistry:
    """Every run on this server. Thread-safe: all sessions share one registry.

    The cap is checked and a slot reserved under one lock, so simultaneous Start clicks
    never train more than max_runs at once or spawn a thread they must then stop.
    Runs whose owner has not looked for idle_seconds are dropped on the next access, and
    at most max_kept are kept in all; a dropped (or replaced) run is closed, which frees
    its model, optimizer and data at once, so memory stays bounded.
    """

    def __init__(self, max_runs: int = 2, idle_seconds: float = 30 * 60, max_kept: int = 8,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_runs, self.idle_seconds, self.max_kept = max_runs, idle_seconds, max_kept
        self._clock = clock  # seconds; tests pass one they move by hand
        self._lock = threading.Lock()
        self._entries: dict[str, RunEntry] = {}
        self._reserved = 0
        self._successors: dict[str, str] = {}  # replaced run id -> the id of the run that replaced it

    def get(self, run_id: str | None, key: str | None = None) -> RunEntry | None:
        """The run, or None; its owner's key also marks it as seen."""
        self._release_idle()
        with self._lock:
            entry = self._entries.get(run_id) if run_id else None
            if entry is not None and entry.is_owner(key):
                entry.last_seen = self._clock()
            return entry

    def successor(self, run_id: str) -> RunEntry | None:
        """The run that replaced `run_id` (its owner's newest, following every replacement), if any:
        someone watching an owner's link follows the owner to their new run."""
        with self._lock:
            seen = set()
            while run_id in self._successors and run_id not in seen:
                seen.add(run_id)
                run_id = self._successors[run_id]
            return self._entries.get(run_id) if seen else None

    def active_count(self) -> int:
        self._release_idle()
        with self._lock:
            return self._active_locked()

    def soonest_free(self) -> float | None:
        """Seconds until a training slot is likely to free up: the time left of the running run
        nearest its end, at its own pace so far. None when no running run has stepped yet (a
        paused run frees its slot only when its owner stops it or leaves)."""
        with self._lock:
            active = [e.run for e in self._entries.values() if e.is_active()]
        left = [snap.eta_seconds for snap in (run.snapshot() for run in active) if snap.state == "running"]
        return min((s for s in left if s is not None), default=None)

    def start(self, build: Callable[[], TrainingRun], *, corpus: str, probe: str,
              replace: tuple[str, str] | None = None, paused: bool = False, facts: Any = None) -> RunEntry:
        """Build and start a run (paused at step 0 if asked). It replaces the caller's own previous
        run (`replace`: its id and key), which frees that run's slot; if building fails, the
        previous run goes on untouched."""
        old = self._reserve(replace)
        try:
            run = build()
        except BaseException:
            with self._lock:
                self._reserved -= 1
            raise
        if old is not None:
            old.release()
        entry = RunEntry(run, secrets.token_urlsafe(16), corpus, probe, self._clock(), facts)
        with self._lock:
            self._reserved -= 1
            if old is not None:
                self._entries.pop(old.run_id, None)
                self._successors[old.run_id] = entry.run_id
                while len(self._successors) > MAX_SUCCESSORS:
                    self._successors.pop(next(iter(self._successors)))
            self._entries[entry.run_id] = entry
            run.start(paused=paused)
            dropped = self._trim_locked()
        for stale in dropped:
            stale.release()
        return entry

    def _reserve(self, replace: tuple[str, str] | None) -> RunEntry | None:
        """Take a training slot or raise RunLimitError; returns the caller's run to replace."""
        self._release_idle()
        with self._lock:
            old = self._entries.get(replace[0]) if replace else None
            if old is not None and not old.is_owner(replace[1]):
                old = None
            busy = self._active_locked() - (old is not None and old.is_active()) + self._reserved
            if busy >= self.max_runs:
                if self.max_runs > 1:
                    raise RunLimitError(
                        "This server already trains {limit} runs, its limit. Wait until one finishes (or is "
                        "stopped) and press Start again; meanwhile Generate and Attention work with the loaded "
                        "model.", limit=self.max_runs,
                    )
                raise RunLimitError(
                    "This server already trains {limit} run, its limit. Wait until one finishes (or is "
                    "stopped) and press Start again; meanwhile Generate and Attention work with the loaded "
                    "model.", limit=self.max_runs,
                )
            self._reserved += 1
            return old

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """A training slot for work in the caller's own thread (the √d_k race trains its two models
        there, one after the other each step): RunLimitError when the server is at its cap."""
        self._reserve(None)
        try:
            yield
        finally:
            with self._lock:
                self._reserved -= 1

    def control(self, run_id: str, key: str | None, action: str) -> None:
        """pause, resume or stop, for the owner only; NotOwnerError for a run that is not there (any more)."""
        entry = self.get(run_id, key)
        if entry is None:  # released while its page was open, or the server restarted
            raise NotOwnerError("Run {run_id} is no longer on this server, so it cannot be paused or stopped.",
                                run_id=run_id)
        if not entry.is_owner(key):
            raise NotOwnerError("Only the browser session that started this run can pause or stop it.")
        if action == "pause":
            entry.run.pause()
        elif action == "resume":
            if entry.run.state == "paused":  # a stopped run would otherwise restart outside the cap
                entry.run.resume()
        elif action == "stop":
            entry.run.stop()
        elif action.startswith("steps:"):  # "steps:10": train exactly ten more steps, then pause
            entry.run.run_steps(int(action.split(":", 1)[1]))
        else:
            raise ValueError(f"unknown action {action!r}")

    def stop_all(self) -> None:
        """Forget every run and free it: the registry itself is going (a code reload, the end of a
        test). A run in a child process ends with it, not when the server exits."""
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            entry.release()

    def _active_locked(self) -> int:
        return sum(entry.is_active() for entry in self._entries.values())

    def _release_idle(self) -> None:
        cutoff = self._clock() - self.idle_seconds
        with self._lock:
            idle = [e for e in self._entries.values() if e.last_seen < cutoff]
            for entry in idle:
                del self._entries[entry.run_id]
        for entry in idle:
            entry.release()
        if idle:
            # what the released runs leave (their threads' frames, the pages of sessions that have
            # gone) sits in reference cycles: collect them now, not at some later full collection
            del entry, idle
            gc.collect()

    def _trim_locked(self) -> list[RunEntry]:
        extra = len(self._entries) - self.max_kept
        if extra <= 0:
            return []
        idle = sorted((e for e in self._entries.values() if not e.is_active()), key=lambda e: e.last_seen)
        dropped = idle[:extra]
        for entry in dropped:
            del self._entries[entry.run_id]
        return dropped
