"""The run registry: every run a server holds, who may steer each, the line for a training slot,
and what is kept of runs that train no more. Plain threading, no Streamlit.

A run belongs to the session that started it (it holds the run's secret key; others may watch by
id, never steer). At most `max_runs` train at once; every other Start waits in line (book.py),
first in, first out, one run per owner, and a dispatcher thread starts the head when a slot frees.
The line has room for every learner the server's classes saw lately and for the slots (limit.py).
Runs whose owner has gone are let go: a waiting one after `waiting_idle_seconds`, any after
`idle_seconds`. A run that trains no more is kept in its small form (kept.py) within `kept_bytes`.
The line's book (book.py) holds the runs; the mover (moving.py) moves the line.

With a `store` (store/, through keeping.py), what a run is made of (its recipe, owner key's
digest, place in line) is written when it joins the line, and its history, state and checkpoints as
it trains, behind it. A run the registry does not hold is looked for there: one it let go, or one a
previous process held.
It comes back as a StoredRun (stored.py): as it was, or "interrupted" where it was training, and its
owner resumes it from its newest checkpoint; the runs that were waiting are back in line at start,
in their order. Rebuilding a run is the caller's (`builder`: where it trains is a server setting).
"""
from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..runs.recipe import RunSpec
from ..runs.run import INTERRUPTED, Run
from ..store import keys
from .book import LineBook
from .entry import CLAIM_SECONDS, HeldSlot, NotOwnerError, RunEntry, RunLimitError
from .keeping import Keeping
from .moving import DISPATCH_EVERY, LineMover
from .waiting import Estimate, SpeedBook, WaitingRun

if TYPE_CHECKING:  # for the annotations only: looking a run up needs no torch (Home does, before it loads)
    from ..runs.run import Resume
    from ..store.database import Store

    Builder = Callable[[RunSpec, Resume | None], Run]

# the records and constants callers import from here, wherever they live now
__all__ = ["RunRegistry", "RunEntry", "HeldSlot", "NotOwnerError", "RunLimitError", "CLAIM_SECONDS",
           "DISPATCH_EVERY", "DEFAULT_WAITING_IDLE", "DEFAULT_PAUSED_GRACE", "DEFAULT_KEPT_BYTES", "SEEN_EVERY"]

DEFAULT_WAITING_IDLE = 5 * 60  # seconds an owner may show no sign of life before their waiting run is dropped
DEFAULT_PAUSED_GRACE = 3 * 60  # seconds a paused run may hold a slot while others wait
DEFAULT_KEPT_BYTES = 64 * 2**20  # what finished runs may hold (server.server_sizes sizes it from the box)
SEEN_EVERY = 600.0     # seconds between writes of an owner's sign of life (retention counts days)


class RunRegistry:
    """Every run on this server. Thread-safe: all sessions share one registry.

    It looks runs up, lets their owners steer them and puts new ones in line; the line's book
    (book.py) holds them under one lock, the mover (moving.py) moves the line, and the keeping
    (keeping.py) writes them to the store and reads them back. The lock is taken before any run's
    own lock, never the other way round.
    """

    def __init__(self, max_runs: int = 2, idle_seconds: float = 30 * 60, *,
                 max_waiting: int | None = None, waiting_idle_seconds: float = DEFAULT_WAITING_IDLE,
                 paused_grace_seconds: float = DEFAULT_PAUSED_GRACE, kept_bytes: int = DEFAULT_KEPT_BYTES,
                 clock: Callable[[], float] = time.monotonic, dispatcher: bool = True,
                 store: Store | None = None, builder: Builder | None = None,
                 facts: Callable[[RunSpec], Any] = lambda spec: None,
                 class_learners: Callable[[], int] = lambda: 0) -> None:
        """`store`: where runs outlive this process (None: memory only). `builder(spec, resume)` builds a
        run the store gave back, to go on from `resume` (server.Server.build_run, where the server trains);
        `facts(spec)` is what the caller keeps with it (RunEntry.facts). `max_waiting`: the runs that may
        wait in line, where whoever runs the server set it; None: as many as `class_learners()`, the
        learners the server's classes have seen lately, and the slots call for (limit.py)."""
        self._clock = clock  # seconds; tests pass one they move by hand
        self.speeds = SpeedBook()
        self.kept_bytes = kept_bytes
        self.book = LineBook(max_runs, idle_seconds, max_waiting=max_waiting,
                             waiting_idle_seconds=waiting_idle_seconds, paused_grace_seconds=paused_grace_seconds,
                             kept_bytes=kept_bytes, clock=clock, speeds=self.speeds, store=store,
                             class_learners=class_learners)
        self.keeping = Keeping(self.book, store, builder, facts)
        self.mover = LineMover(self.book, self.keeping, self.speeds, kept_bytes, dispatcher)
        if store is not None:
            self.keeping.restore_line()
            if self.waiting_count():  # the restored line moves by itself, as a line does
                self.mover.nudge()

    # the settings live in the book, which decides by them under its lock
    max_runs = property(lambda self: self.book.max_runs)
    max_waiting = property(lambda self: self.book.waiting_limit())  # now: the learners and slots change
    idle_seconds = property(lambda self: self.book.idle_seconds)
    waiting_idle_seconds = property(lambda self: self.book.waiting_idle_seconds)
    paused_grace_seconds = property(lambda self: self.book.paused_grace_seconds)
    store = property(lambda self: self.keeping.store)
    builder = property(lambda self: self.keeping.builder)
    facts = property(lambda self: self.keeping.facts)

    # -- looking runs up -------------------------------------------------------------------------
    def get(self, run_id: str | None, key: str | None = None) -> RunEntry | None:
        """The run, or None; its owner's key also counts as a sign of life. A run this registry does
        not hold is read from the store, if it has it."""
        self.mover.tidy()
        entry = self.book.held(run_id)
        if entry is None and run_id:
            entry = self.keeping.load(run_id)
        with self.book.lock:  # the entry's stamps are the book's to guard, as its place is
            if entry is not None and entry.is_owner(key):
                entry.last_seen = self._clock()  # a watcher's look does not count: an abandoned run still goes
                seen = self.store is not None and entry.last_seen - entry.seen_saved > SEEN_EVERY
                if seen:
                    entry.seen_saved = entry.last_seen  # stamped now: two pages at once write it once
            else:
                seen = False
        if seen:
            self.store.runs.seen([entry.run_id])
        return entry

    def held(self, run_id: str) -> RunEntry | None:
        """The run if this registry holds it now, never read from the store: what a list of many runs
        shows, without bringing each one back into memory."""
        return self.book.held(run_id)

    def successor(self, run_id: str) -> RunEntry | None:
        """The run that replaced `run_id` (its owner's newest, following every replacement), if any:
        someone watching an owner's link follows the owner to their new run."""
        return self.book.successor(run_id)

    def gone_reason(self, run_id: str) -> str | None:
        """Why a run is no longer here: "cancelled" (by its owner), "dropped" (left the line: its owner
        showed no sign of life), "released" (its owner stopped using it), "trimmed" (the oldest kept
        run, past the memory for kept runs); None when it is unknown here."""
        return self.book.gone_reason(run_id)

    def resize(self, max_runs: int) -> None:
        """Train this many runs at once from now on (a cluster's machines joined or left): runs waiting
        start at once where there is room; runs training beyond it go on, and no more start meanwhile."""
        if self.book.resize(max_runs):
            self.mover.nudge()  # a slot more: the head of the line need not wait for the next tick

    def active_count(self) -> int:
        self.mover.tidy()
        return self.book.active_count()

    def waiting_count(self) -> int:
        return self.book.waiting_count()

    def standing(self, entry: RunEntry) -> tuple[int, Estimate | None] | None:
        """A waiting run's place in line (1 at the front) and when it should start (line.estimate: None
        before this server has a pace to go by), read together; None when it is not waiting."""
        return self.book.standing(entry)

    def place(self, entry: RunEntry) -> int | None:
        standing = self.standing(entry)
        return standing[0] if standing else None

    def estimate(self, entry: RunEntry) -> Estimate | None:
        standing = self.standing(entry)
        return standing[1] if standing else None

    # -- joining the line ------------------------------------------------------------------------
    def submit(self, spec: RunSpec, *, corpus: str, build: Callable[[str], Run] | None = None,
               replace: tuple[str, str] | None = None, paused: bool = False, key: str | None = None) -> RunEntry:
        """Put the run `spec` describes in line (its run_id is given here); the registry's builder makes
        it when its turn comes (paused at step 0 if asked), and the store keeps it. `build(run_id)`, where
        given, makes it instead, and the run lasts as long as this process. When a slot is free and nobody
        waits, it starts now, on the caller's thread. It replaces the caller's own previous run
        (`replace`: its id and key): a waiting one gives it its place, a training one is released.
        RunLimitError when the line has no room for it (limit.py). `key`: the owner key to give it (a
        learner's, derived from their token: classes/learners.py), else a fresh one."""
        spec = dataclasses.replace(spec, run_id=secrets.token_urlsafe(9))
        lasting = build is None  # a caller's own build cannot be redone after a restart: memory only
        if build is None:
            build = self.keeping.rebuild(spec, None)
        entry = RunEntry(WaitingRun(spec.run_id, spec, build, paused), key or keys.new_key(), corpus, spec.probe_text or "",
                         self._clock(), self.facts(spec), spec, lasting=lasting)
        self.mover.release_idle()  # an absent owner's place is free before this one counts the line
        old = self.book.admit(entry, replace)
        if old is not None:
            old.release()  # outside the lock: a training run takes a moment to stop
        self.mover.start_heads(only=entry)  # the caller's own run, if its turn is now: nobody else's
        self.keeping.save_new(entry, paused)  # its row; its news is written once this is queued (saved)
        self.mover.nudge()
        return entry

    def request_slot(self, spec: RunSpec, replace: tuple[str, str] | None = None) -> RunEntry:
        """Join the line for a slot to train on the caller's own thread: once the entry's run is a
        HeldSlot, claim it (claim) and the slot is the caller's until it gives it back (give_back)."""
        return self.submit(spec, corpus="", build=lambda run_id: HeldSlot(run_id, spec, self._clock()),
                           replace=replace)

    def claim(self, entry: RunEntry) -> bool:
        """The work that waited for `entry`'s slot begins: True when the slot is still its to use."""
        with self.book.lock:
            if not self.book.holds_locked(entry) or not isinstance(entry.run, HeldSlot):
                return False  # let go meanwhile (its page was away too long), or not granted yet
            entry.run.claimed = True  # from now on its holder's sign of life counts, not the claim deadline
            entry.last_seen = self._clock()
            return entry.is_active()

    def give_back(self, entry: RunEntry, reason: str = "cancelled") -> None:
        """The work that held `entry`'s slot is done, or the entry leaves the line (waiting or being
        built): the slot, or its place, is the next one's."""
        self.book.let_go(entry, reason)
        entry.release()
        self.mover.nudge()  # the slot it freed goes to the next in line now

    # -- steering ----------------------------------------------------------------------------------
    def control(self, run_id: str, key: str | None, action: str) -> None:
        """pause, resume, stop, steps:N, or cancel (a run in line, or being built: stop cancels it too),
        for the owner only; NotOwnerError for a run that is not there (any more)."""
        entry = self.get(run_id, key)
        if entry is None:  # released while its page was open, or the server restarted
            raise NotOwnerError("Run {run_id} is no longer on this server, so it cannot be paused or stopped.",
                                run_id=run_id)
        if not entry.is_owner(key):
            raise NotOwnerError("Only the browser session that started this run can pause or stop it.")
        run = entry.run
        with self.book.lock:
            entry.last_steered = self._clock()  # a button pressed: a paused run's grace starts again
        if run.state == INTERRUPTED:  # read from the store: Resume (or a step) trains it on from its checkpoint
            if (action == "resume" or action.startswith("steps:")) and self.keeping.resume(entry):
                self.mover.nudge()
            return
        if isinstance(run, WaitingRun):
            if action in ("cancel", "stop") and run.state in ("waiting", "starting"):
                self.give_back(entry)  # one being built is closed once built: install finds it gone
            return
        if not isinstance(run, Run):  # kept or held: nothing to pause or resume
            return
        self._steer(run, action)
        self.mover.nudge()  # a stop frees a slot; a pause may now count against its grace

    def _steer(self, run: Run, action: str) -> None:
        if action == "pause":
            run.pause()
        elif action == "resume":
            if run.state == "paused":  # a stopped run would otherwise restart outside the cap
                run.resume()
        elif action == "stop":
            run.stop()
        elif action.startswith("steps:"):  # "steps:10": train exactly ten more steps, then pause
            run.run_steps(int(action.split(":", 1)[1]))
        elif action != "cancel":
            raise ValueError(f"unknown action {action!r}")

    def forget(self, run_ids: list[str], reason: str = "erased") -> None:
        """Let these runs go from memory at once (their rows are the caller's: a class erased)."""
        for entry in self.book.forget(run_ids, reason):
            entry.release()
        self.mover.nudge()

    def stop_all(self) -> None:
        """Forget every run and free it: the registry itself is going (a code reload, the end of a
        test). A run in a child process ends with it, not when the server exits."""
        self.mover.stop()
        if self.store is not None:  # what the runs logged last is written before they go
            self.keeping.save_news(force=True)
        for entry in self.book.clear():
            entry.release()

    # -- the line moving ---------------------------------------------------------------------------
    def dispatch(self) -> None:
        """One look at everything: drop runs whose owner has gone, stop runs paused past their grace
        while others wait, start the head of the line while a slot is free, keep what has ended in
        its small form. The dispatcher thread does it every DISPATCH_EVERY seconds, or when woken;
        without one (tests), every access does."""
        self.mover.dispatch()
