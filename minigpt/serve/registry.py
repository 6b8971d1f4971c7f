"""The run registry: every run a server holds, who may steer each, the line for a training slot,
and what is kept of runs that train no more.

A dashboard serves many browser sessions from one process. `RunRegistry` is the one place that
knows their runs:
- a run belongs to the session that started it (it holds the run's secret key; others may watch
  by id, never steer);
- at most `max_runs` train at once; every other Start waits in line (line.py), first in, first
  out, and starts by itself when a slot frees: Start is never refused for a full server, only for
  a full line (`max_waiting`);
- one run per owner: a second Start replaces the owner's own run, and a waiting one keeps its
  place;
- a waiting run whose owner has shown no sign of life for `waiting_idle_seconds` is dropped before
  it starts; any run whose owner stopped looking for `idle_seconds` is released;
- a run that trains no more is kept in its small form (kept.py), within `kept_bytes`.
The work on the caller's thread that needs a slot (the √d_k race) waits in the same line
(`request_slot`). A dispatcher thread starts the head of the line when a slot frees; every access
does the same, so a test that moves the clock by hand sees it at once. Plain threading, no
Streamlit: the app keeps one registry per process.
"""
from __future__ import annotations

import gc
import itertools
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..messages import LabError
from .line import Estimate, Pace, RunPlan, SpeedBook, WaitingRun, estimate
from .run import ACTIVE_STATES, ENDED_STATES, RunSnapshot

if TYPE_CHECKING:  # for the annotations only: looking a run up needs no torch (Home does, before it loads)
    from ..model import MiniGPT
    from .run import Run, RunView

MAX_SUCCESSORS = 256  # replacements remembered, so that watchers can follow an owner to a new run
DISPATCH_EVERY = 0.25  # seconds between the dispatcher's looks while runs train or wait
DEFAULT_MAX_WAITING = 120  # runs in line: a few times the largest class
DEFAULT_WAITING_IDLE = 5 * 60  # seconds an owner may show no sign of life before their waiting run is dropped
DEFAULT_KEPT_BYTES = 128 * 2**20  # what finished runs may hold: a kept Small run is well under 1 MB (bench/RESULTS.md)


class RunLimitError(LabError, RuntimeError):
    """The line for a training slot is full."""


class NotOwnerError(LabError, PermissionError):
    """Only the session that started a run (holding its key) may steer it."""


@dataclass(eq=False)
class RunEntry:
    """A run in the registry: the run, its owner's secret and what the pages show about it."""

    run: RunView                          # waiting (line.WaitingRun), training (run.Run), or kept (kept.KeptRun)
    key: str = field(repr=False)          # the owner's secret; watchers only know run_id
    corpus: str
    probe_text: str
    last_seen: float                      # on the registry's clock: when the owner last showed a sign of life
    facts: Any = None                     # what the caller keeps with the run for its pages (a corpus's task, say)
    plan: RunPlan = None                  # what it trains: its shape's pace feeds the line's estimates
    order: int = 0                        # its place in the line: lower goes first; a replacement keeps it
    _model: tuple[int, MiniGPT] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def is_owner(self, key: str | None) -> bool:
        return isinstance(key, str) and secrets.compare_digest(key.encode(), self.key.encode())

    def is_waiting(self) -> bool:
        return isinstance(self.run, WaitingRun) and self.run.state == "waiting"

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


class HeldSlot:
    """A training slot held for work on its holder's own thread (the √d_k race): "running" until
    the holder gives it back (RunRegistry.give_back). Read like a run that has not stepped."""

    def __init__(self, run_id: str, plan: RunPlan):
        self.run_id, self.plan = run_id, plan
        self._held = True

    @property
    def state(self) -> str:
        return "running" if self._held else "closed"

    def is_alive(self) -> bool:
        return self._held

    def snapshot(self) -> RunSnapshot:
        return RunSnapshot(run_id=self.run_id, state=self.state, step=0, max_steps=self.plan.max_steps, history=[], evals=[],
                           tokens_per_sec=0.0, elapsed=0.0)

    def close(self, timeout: float | None = 5.0) -> None:
        self._held = False


class RunRegistry:
    """Every run on this server. Thread-safe: all sessions share one registry.

    The line's order and the slots are decided under one lock, so simultaneous Starts get a strict
    first-in, first-out order, and never more than max_runs train. Building a run (forking its
    process) happens outside the lock, its slot reserved meanwhile.
    """

    def __init__(self, max_runs: int = 2, idle_seconds: float = 30 * 60, *,
                 max_waiting: int = DEFAULT_MAX_WAITING, waiting_idle_seconds: float = DEFAULT_WAITING_IDLE,
                 kept_bytes: int = DEFAULT_KEPT_BYTES, clock: Callable[[], float] = time.monotonic,
                 dispatcher: bool = True) -> None:
        self.max_runs, self.idle_seconds = max_runs, idle_seconds
        self.max_waiting, self.waiting_idle_seconds, self.kept_bytes = max_waiting, waiting_idle_seconds, kept_bytes
        self._clock = clock  # seconds; tests pass one they move by hand
        self._lock = threading.Lock()
        self._entries: dict[str, RunEntry] = {}
        self._reserved = 0
        self._orders = itertools.count(1)
        self._successors: dict[str, str] = {}  # replaced run id -> the id of the run that replaced it
        self._kept: dict[str, int] = {}        # run id -> bytes, for runs swapped for their small form
        self.speeds = SpeedBook()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._dispatcher: threading.Thread | None = None
        self._use_dispatcher = dispatcher  # off in tests that step the line themselves (dispatch())

    # -- looking runs up -------------------------------------------------------------------
    def get(self, run_id: str | None, key: str | None = None) -> RunEntry | None:
        """The run, or None; its owner's key also counts as a sign of life."""
        self._tidy()
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
        self._tidy()
        with self._lock:
            return self._busy_locked()

    def waiting_count(self) -> int:
        with self._lock:
            return len(self._waiting_locked())

    def place(self, entry: RunEntry) -> int | None:
        """Where a waiting run stands in line: 1 at the front; None when it is not waiting."""
        with self._lock:
            waiting = self._waiting_locked()
            return waiting.index(entry) + 1 if entry in waiting else None

    def estimate(self, entry: RunEntry) -> Estimate | None:
        """When a waiting run should start (line.estimate); None when it is not waiting, or before
        this server has a pace to go by."""
        with self._lock:
            waiting = self._waiting_locked()
            return self._estimate_locked(waiting[:waiting.index(entry)]) if entry in waiting else None

    def wait_at_the_back(self) -> Estimate | None:
        """When a run that joined the line now would start."""
        with self._lock:
            return self._estimate_locked(self._waiting_locked())

    def _pace(self, entry: RunEntry) -> Pace | None:
        return self.speeds.pace(entry.plan.shape)

    # -- joining the line --------------------------------------------------------------------
    def submit(self, build: Callable[[str], Run], plan: RunPlan, *, corpus: str, probe: str,
               replace: tuple[str, str] | None = None, paused: bool = False, facts: Any = None) -> RunEntry:
        """Put a run in line, or start it at once when a slot is free and nobody waits (paused at step 0
        if asked); `build(run_id)` makes it when its turn comes. It replaces the caller's own previous
        run (`replace`: its id and key): a waiting one gives it its place, a training one is released.
        RunLimitError when the line is full."""
        run_id = secrets.token_urlsafe(9)
        entry = RunEntry(WaitingRun(run_id, plan, build, paused), secrets.token_urlsafe(16), corpus, probe,
                         self._clock(), facts, plan)
        self._release_idle()
        with self._lock:
            old = self._entries.get(replace[0]) if replace else None
            if old is not None and not old.is_owner(replace[1]):
                old = None
            waiting = self._waiting_locked()
            if old is None or old not in waiting:
                if len(waiting) >= self.max_waiting:
                    _line_full(len(waiting), self._estimate_locked(waiting))
                entry.order = next(self._orders)
            else:
                entry.order = old.order
            if old is not None:
                self._forget_locked(old, successor=entry)
            self._entries[entry.run_id] = entry
        if old is not None:
            old.release()
        self._start_dispatcher()
        self.dispatch()
        return entry

    def request_slot(self, plan: RunPlan, replace: tuple[str, str] | None = None) -> RunEntry:
        """Join the line for a slot to train on the caller's own thread: when the entry's run is a
        HeldSlot, the slot is the caller's until it gives it back (give_back)."""
        return self.submit(lambda run_id: HeldSlot(run_id, plan), plan, corpus="", probe="", replace=replace)

    def give_back(self, entry: RunEntry) -> None:
        """The work that held `entry`'s slot is done (or was never started): the slot, or its place, frees."""
        with self._lock:
            self._forget_locked(entry)
        entry.release()
        self.dispatch()

    def cancel(self, run_id: str, key: str | None) -> None:
        """Take the owner's waiting run out of the line."""
        entry = self._owned(run_id, key, "cancel")
        if entry.is_waiting():
            self.give_back(entry)

    # -- steering ------------------------------------------------------------------------------
    def control(self, run_id: str, key: str | None, action: str) -> None:
        """pause, resume, stop or cancel, for the owner only; NotOwnerError for a run that is not there
        (any more). A waiting run is only cancelled (stop cancels it too)."""
        entry = self._owned(run_id, key, action)
        run = entry.run
        if action == "cancel" or (entry.is_waiting() and action == "stop"):
            self.cancel(run_id, key)
        elif not hasattr(run, "start"):  # waiting, held or kept: nothing to pause or resume
            return
        elif action == "pause":
            run.pause()
        elif action == "resume":
            if run.state == "paused":  # a stopped run would otherwise restart outside the cap
                run.resume()
        elif action == "stop":
            run.stop()
        elif action.startswith("steps:"):  # "steps:10": train exactly ten more steps, then pause
            run.run_steps(int(action.split(":", 1)[1]))
        else:
            raise ValueError(f"unknown action {action!r}")
        self.dispatch()

    def _owned(self, run_id: str, key: str | None, action: str) -> RunEntry:
        entry = self.get(run_id, key)
        if entry is None:  # released while its page was open, or the server restarted
            raise NotOwnerError("Run {run_id} is no longer on this server, so it cannot be paused or stopped.",
                                run_id=run_id)
        if not entry.is_owner(key):
            raise NotOwnerError("Only the browser session that started this run can pause or stop it.")
        return entry

    def stop_all(self) -> None:
        """Forget every run and free it: the registry itself is going (a code reload, the end of a
        test). A run in a child process ends with it, not when the server exits."""
        self._closing.set()
        self._wake.set()
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            entry.release()

    # -- the line moving ---------------------------------------------------------------------------
    def _tidy(self) -> None:
        """What every access does: release the idle, and let the line move (in the dispatcher thread,
        so that a page never waits for a run's process to fork; without one, here)."""
        if self._use_dispatcher:
            self._release_idle()
            self._wake.set()
        else:
            self.dispatch()

    def dispatch(self) -> None:
        """Drop waiting runs whose owner has gone, release idle runs, start the head of the line while
        a slot is free, and keep what has ended in its small form. Every access calls it; so does the
        dispatcher thread, so the line moves with nobody looking."""
        self._release_idle()
        while True:
            with self._lock:
                waiting = self._waiting_locked()
                if not waiting or self._busy_locked() >= self.max_runs or self._closing.is_set():
                    break
                entry = waiting[0]
                self._reserved += 1
                entry.run.take()  # no longer in line: another dispatch leaves it alone
            self._start(entry)
        self._keep_ended()

    def _start(self, entry: RunEntry) -> None:
        waiting: WaitingRun = entry.run
        try:
            run = waiting.build(waiting.run_id)
        except Exception as err:  # settings checked at submit can still fail to build (memory): the owner is told
            with self._lock:
                self._reserved -= 1
                waiting.fail(err)
            return
        with self._lock:
            self._reserved -= 1
            if self._entries.get(entry.run_id) is not entry:  # cancelled or released while it was built
                gone = True
            else:
                gone = False
                entry.run = run
                if hasattr(run, "start"):  # a HeldSlot is its holder's from now on
                    run.start(paused=waiting.paused)
        if gone:
            run.close(timeout=2.0)

    def _keep_ended(self) -> None:
        """Swap each run that trains no more for its small form, and record the pace of those that train."""
        with self._lock:
            live = [e for e in self._entries.values()
                    if hasattr(e.run, "start") and e.run_id not in self._kept]
        for entry in live:
            run = entry.run
            snap = run.snapshot()
            self.speeds.record(entry.plan.shape, snap)
            if snap.state not in ENDED_STATES or run.is_alive():
                continue
            kept = _small_form(run)
            with self._lock:
                if kept is None or self._entries.get(entry.run_id) is not entry or entry.run is not run:
                    self._kept.setdefault(entry.run_id, 0)  # a dead process has no weights to give: left as it is
                    continue
                entry.run = kept
                self._kept[entry.run_id] = kept.nbytes()
                dropped = self._trim_locked()
            run.close(timeout=2.0)
            for stale in dropped:
                stale.release()

    def _start_dispatcher(self) -> None:
        if not self._use_dispatcher:
            return
        with self._lock:
            if self._dispatcher is not None and self._dispatcher.is_alive():
                return
            self._dispatcher = threading.Thread(target=self._dispatch_loop, name="minigpt-line", daemon=True)
            self._dispatcher.start()

    def _dispatch_loop(self) -> None:
        while not self._closing.is_set():
            self._wake.wait(DISPATCH_EVERY)
            self._wake.clear()
            try:
                self.dispatch()
            except Exception:  # a run that cannot be read this time is read again next time; the line goes on
                continue
            with self._lock:
                if not self._entries:
                    self._dispatcher = None
                    return

    # -- under the lock --------------------------------------------------------------------------
    def _waiting_locked(self) -> list[RunEntry]:
        return sorted((e for e in self._entries.values() if e.is_waiting()), key=lambda e: e.order)

    def _busy_locked(self) -> int:
        return sum(entry.is_active() for entry in self._entries.values()) + self._reserved

    def _estimate_locked(self, ahead: list[RunEntry]) -> Estimate | None:
        """The runs' snapshots take their own locks, never the registry's: safe to read under it."""
        busy = [(e.run.snapshot(), self._pace(e)) for e in self._entries.values() if e.is_active()]
        found = estimate(self.max_runs, busy, [(e.plan.max_steps, self._pace(e)) for e in ahead])
        if found is None or not any(snap.state == "paused" for snap, _pace in busy):
            return found
        return Estimate(found.seconds, rough=True)  # a paused run holds its slot for as long as its owner likes

    def _forget_locked(self, entry: RunEntry, successor: RunEntry | None = None) -> None:
        if self._entries.get(entry.run_id) is entry:
            del self._entries[entry.run_id]
        self._kept.pop(entry.run_id, None)
        if successor is not None:
            self._successors[entry.run_id] = successor.run_id
            while len(self._successors) > MAX_SUCCESSORS:
                self._successors.pop(next(iter(self._successors)))

    def _release_idle(self) -> None:
        now = self._clock()
        with self._lock:
            idle = [e for e in self._entries.values()
                    if e.last_seen < now - (self.waiting_idle_seconds if _short_lived(e) else self.idle_seconds)]
            for entry in idle:
                self._forget_locked(entry)
        for entry in idle:
            entry.release()
        if idle:
            # what the released runs leave (their threads' frames, the pages of sessions that have
            # gone) sits in reference cycles: collect them now, not at some later full collection
            del entry, idle
            gc.collect()

    def _trim_locked(self) -> list[RunEntry]:
        """Kept runs past kept_bytes, the longest unseen first."""
        total = sum(self._kept.values())
        dropped = []
        for entry in sorted((self._entries[i] for i in self._kept if i in self._entries), key=lambda e: e.last_seen):
            if total <= self.kept_bytes:
                break
            total -= self._kept[entry.run_id]
            self._forget_locked(entry)
            dropped.append(entry)
        return dropped


def _short_lived(entry: RunEntry) -> bool:
    """A waiting run, or a slot held for a page's own work: its owner's absence drops it soon."""
    return entry.is_waiting() or isinstance(entry.run, HeldSlot)


def _small_form(run: Run):
    """A run's KeptRun, or None where its weights cannot be had (its process died)."""
    from .kept import KeptRun  # torch: only once a run has trained

    try:
        return KeptRun(run)
    except Exception:
        return None


def _line_full(waiting: int, wait: Estimate | None) -> None:
    if wait is None:
        raise RunLimitError("All {waiting} places in the line for training on this server are taken. Try again when "
                            "the line is shorter.", waiting=waiting)
    raise RunLimitError("All {waiting} places in the line for training on this server are taken: a run that joined "
                        "now would start in about {minutes:.0f} minutes. Try again when the line is shorter.",
                        waiting=waiting, minutes=max(1.0, wait.seconds / 60))
