"""The line's book: every run the registry holds, under one lock, and every decision taken under it:
who joins and in which place, who is next for a slot, whose owner has been away too long, which
paused run has held its slot past its grace, which kept run goes when the memory for them runs out.

The parts that act on a decision (building a run, stopping one, closing one, writing to the store)
take it here and act after the lock is let go, so a learner's page never waits for someone else's
run. Lock order: this lock is taken before any run's own lock (its trainer's, its entry's), never
the other way round; the keeping's save lock and this one are never held together. The registry
and the mover take `lock` themselves only to stamp an entry (a sign of life, a claim) or to start a
run they built, checking `holds_locked` first.
"""
from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..runs.run import EXITING, Run
from .entry import CLAIM_SECONDS, HeldSlot, RunEntry
from .estimates import start_estimate
from .limit import refuse_if_no_room, waiting_places
from .memory import KeptRuns, LetGo
from .waiting import Estimate, SpeedBook, WaitingRun

if TYPE_CHECKING:
    from ..store.database import Store


class LineBook:
    """The runs, their order and the slots, decided under one lock (thread-safe)."""

    def __init__(self, max_runs: int, idle_seconds: float, *, max_waiting: int | None, waiting_idle_seconds: float,
                 paused_grace_seconds: float, kept_bytes: int, clock: Callable[[], float], speeds: SpeedBook,
                 store: Store | None, class_learners: Callable[[], int] = lambda: 0) -> None:
        self.max_runs, self.idle_seconds = max_runs, idle_seconds
        self.max_waiting, self.waiting_idle_seconds = max_waiting, waiting_idle_seconds  # None: limit.waiting_places
        self.class_learners = class_learners   # learners seen lately: each may hold a place in line
        self.paused_grace_seconds = paused_grace_seconds
        self.clock, self.speeds = clock, speeds
        self.storing = False                   # no store: the runs last as long as this process
        self.lock = threading.Lock()           # the one lock: the line's order and its slots
        self.closing = threading.Event()       # the registry is going: nothing starts any more
        self._entries: dict[str, RunEntry] = {}
        self._reserved = 0                     # slots taken by runs being built
        self._orders = itertools.count(1)
        self._let_go = LetGo()                 # for watchers and notices: who replaced a run, why it went
        self._kept = KeptRuns(self._entries, kept_bytes)
        self._forgotten: list[RunEntry] = []   # let go since the last write: their last state goes to the store
        if store is not None:  # places go on from the last process's: a restored run stays ahead of new ones
            self._orders = itertools.count(store.runs.max_line_order() + 1)
            self.storing = True  # a run let go leaves its last state for the store (news)

    # -- reading ---------------------------------------------------------------------------------
    def held(self, run_id: str | None) -> RunEntry | None:
        with self.lock:
            return self._entries.get(run_id) if run_id else None

    def holds_locked(self, entry: RunEntry) -> bool:
        """Still this entry's run (not let go, nor replaced): what an act on a stale entry checks first."""
        return self._entries.get(entry.run_id) is entry

    def successor(self, run_id: str) -> RunEntry | None:
        with self.lock:
            newest = self._let_go.newest(run_id)
            return self._entries.get(newest) if newest else None

    def gone_reason(self, run_id: str) -> str | None:
        with self.lock:
            return self._let_go.reason(run_id)

    def active_count(self) -> int:
        with self.lock:
            return self._busy_locked()

    def waiting_count(self) -> int:
        with self.lock:
            return len(self._waiting_locked())

    def waiting_limit(self) -> int:
        """Runs that may wait in line now, from the slots and the learners seen lately (limit.py)."""
        learners = self.class_learners()  # before the lock: a class's own lock is never taken under it
        with self.lock:
            return waiting_places(self.max_runs, learners, self.max_waiting)

    def standing(self, entry: RunEntry) -> tuple[int, Estimate | None] | None:
        with self.lock:  # place and estimate read together: the line cannot move between them
            waiting = self._waiting_locked()
            if entry not in waiting:
                return None  # training, being built, or gone: no place to show
            place = waiting.index(entry)
            return place + 1, self._estimate_locked(waiting[:place])

    def news(self) -> tuple[list[RunEntry], list[RunEntry]]:
        """The runs whose news the store keeps, and those let go since the last look (handed over once)."""
        from .stored import StoredRun

        with self.lock:
            entries = [e for e in self._entries.values() if e.lasting and not isinstance(e.run, StoredRun)
                       and not isinstance(e.run, HeldSlot)]
            forgotten, self._forgotten = self._forgotten, []
        return entries, forgotten

    # -- joining and leaving ---------------------------------------------------------------------
    def admit(self, entry: RunEntry, replace: tuple[str, str] | None) -> RunEntry | None:
        """Put `entry` in line; the run it replaces (only its owner's key replaces one), which the caller
        releases. RunLimitError when the line has no room for it (limit.py)."""
        learners = self.class_learners()  # before the lock: a board's lock is held while it asks the registry
        with self.lock:
            old = self._entries.get(replace[0]) if replace else None
            if old is not None and not old.is_owner(replace[1]):
                old = None
            waiting = self._waiting_locked()
            if old is not None and old in waiting:  # a second Start keeps the owner's place: one run each in line
                entry.order = old.order
            else:
                self._refuse_if_no_room_locked(waiting, learners)
                entry.order = next(self._orders)
            if old is not None:
                self._forget_locked(old, successor=entry)  # its watchers follow the owner to the new run
            self._entries[entry.run_id] = entry
        return old

    def restore(self, entry: RunEntry) -> None:
        with self.lock:  # a run that waited when the last process stopped, back in its place
            self._entries[entry.run_id] = entry

    def requeue(self, entry: RunEntry, stored, waiting: WaitingRun, saved: tuple) -> bool:
        """A stored run its owner resumes joins the back of the line (RunLimitError when it has no room);
        False when another page resumed it meanwhile."""
        learners = self.class_learners()
        with self.lock:
            if self._entries.get(entry.run_id) is not entry or entry.run is not stored:
                return False  # two pages pressed Resume: the first one's run is in line already
            self._refuse_if_no_room_locked(self._waiting_locked(), learners)
            entry.order = next(self._orders)  # the back of the line: its old place went when it stopped
            entry.swap(waiting)
            entry.saved, entry.saved_at = saved, self.clock()  # the store has its history up to its checkpoint
            self._kept.drop(entry.run_id)  # trains again: no longer a kept run's memory
        return True

    def adopt(self, entry: RunEntry, nbytes: int) -> tuple[RunEntry, list[RunEntry]]:
        """A run read from the store, held from now on as a kept run; the kept runs trimmed to make room."""
        with self.lock:
            held = self._entries.get(entry.run_id)
            if held is not None:  # another thread read it meanwhile
                return held, []  # theirs wins: one entry per run, or its owner's stamps would split
            self._entries[entry.run_id] = entry
            self._kept.add(entry.run_id, nbytes)
            return entry, self._trim_locked()

    def not_in_store(self, run_id: str) -> bool:
        with self.lock:
            return self._let_go.not_in_store(run_id)

    def missing(self, run_id: str) -> None:
        with self.lock:
            self._let_go.missing(run_id)

    def resize(self, max_runs: int) -> bool:
        with self.lock:
            grew = max_runs > self.max_runs  # a shrink stops nothing: runs beyond it train to their end
            self.max_runs = max_runs
        return grew

    def let_go(self, entry: RunEntry, reason: str) -> None:
        with self.lock:
            self._forget_locked(entry, reason=reason)  # its slot or place is free once this lock is let go

    def forget(self, run_ids: list[str], reason: str) -> list[RunEntry]:
        """Let these runs go, and never read them back from the store (their rows are being erased)."""
        with self.lock:
            entries = [self._entries[i] for i in run_ids if i in self._entries]
            for entry in entries:
                self._forget_locked(entry, reason=reason)
            for run_id in run_ids:
                self._let_go.missing(run_id)  # a page still open on one reads "gone", never a half-erased row
        return entries

    def clear(self) -> list[RunEntry]:
        with self.lock:
            entries = list(self._entries.values())
            self._entries.clear()  # the same dict: the kept runs' book reads it
        return entries

    def empty_locked(self) -> bool:
        return not self._entries  # the caller holds the lock: the dispatcher retiring

    # -- the line moving -------------------------------------------------------------------------
    def take_head(self, only: RunEntry | None = None) -> RunEntry | None:
        """The head of the line, its slot reserved and its run taken out of the line, while a slot is
        free (`only`: if it is the head); None when nothing may start."""
        with self.lock:
            waiting = self._waiting_locked()
            if not waiting or self._busy_locked() >= self.max_runs or self.closing.is_set() or EXITING.is_set():
                return None  # an exiting server starts nothing: the line waits, in the store, for the next one
            entry = waiting[0]
            if only is not None and entry is not only:
                return None
            self._reserved += 1  # held while it is built, outside the lock: no second pass gives it away
            entry.run.take()  # out of the line: another thread's pass leaves it alone
            return entry

    def unreserve(self) -> None:
        with self.lock:
            self._reserved -= 1  # its run holds the slot now (is_active), or the slot is free again

    def past_grace(self) -> list[RunEntry]:
        """Paused runs that have held their slot past their grace while the line is full, marked: their
        owners read why they stopped. The caller stops them, outside the lock."""
        now = self.clock()
        with self.lock:
            if not self._waiting_locked() or self._busy_locked() < self.max_runs:
                return []  # nobody waits for a slot: a paused run may hold its own as long as it likes
            due = [e for e in self._entries.values() if isinstance(e.run, Run) and e.run.state == "paused"
                   and now - e.last_steered > self.paused_grace_seconds]
            for entry in due:
                entry.stopped_for_line = True  # stamped before the stop: its page says why, not "stopped by you"
        return due

    def take_idle(self) -> list[RunEntry]:
        """The runs whose owners have gone, let go (dropped from the line, or released); the caller closes them."""
        now = self.clock()
        with self.lock:
            idle = [e for e in self._entries.values() if self._overdue(e, now)]
            for entry in idle:  # the reason its owner reads on their return
                self._forget_locked(entry, reason="dropped" if isinstance(entry.run, WaitingRun) else "released")
        return idle

    def _overdue(self, entry: RunEntry, now: float) -> bool:
        """The owner has shown no sign of life for longer than this run may wait for them."""
        run = entry.run
        if isinstance(run, HeldSlot) and not run.claimed:  # granted, and its page has not begun its work
            return now - run.granted > CLAIM_SECONDS
        return now - entry.last_seen > (self.waiting_idle_seconds if entry.is_waiting() else self.idle_seconds)

    # -- runs that train no more -------------------------------------------------------------------
    def live(self) -> list[RunEntry]:
        """Runs that trained, not yet kept in their small form."""
        with self.lock:
            return [e for e in self._entries.values() if isinstance(e.run, Run) and e.run_id not in self._kept]

    def first_keep(self, run_id: str) -> bool:
        return not self._kept.tried(run_id)  # without the lock: at worst a whole run's pace is counted twice

    def keep(self, entry: RunEntry, run: Run, kept) -> list[RunEntry] | None:
        """`entry`'s ended `run` swapped for its small form `kept` (None: its weights could not be read); the
        kept runs trimmed past the memory for them, to be released. None: not now (the caller keeps `run`)."""
        with self.lock:
            if self._entries.get(entry.run_id) is not entry or entry.run is not run:
                return None  # let go or replaced meanwhile: its weights were read for nobody
            if not self._kept.swap(entry, kept):
                return None  # a busy process answers next time
            return self._trim_locked()

    # -- under the lock ----------------------------------------------------------------------------
    def _waiting_locked(self) -> list[RunEntry]:
        return sorted((e for e in self._entries.values() if e.is_waiting()), key=lambda e: e.order)

    def _busy_locked(self) -> int:
        # runs being built count as busy: their slot is theirs before their process exists
        return sum(entry.is_active() for entry in self._entries.values()) + self._reserved

    def _refuse_if_no_room_locked(self, waiting: list[RunEntry], learners: int) -> None:
        places = waiting_places(self.max_runs, learners, self.max_waiting)
        refuse_if_no_room(len(waiting), places, lambda: self._estimate_locked(waiting))

    def _estimate_locked(self, ahead: list[RunEntry]) -> Estimate | None:
        return start_estimate(self._entries.values(), self.max_runs, self.clock(), self.speeds, ahead)

    def _forget_locked(self, entry: RunEntry, successor: RunEntry | None = None, reason: str | None = None) -> None:
        if self._entries.get(entry.run_id) is entry:  # only this very entry: one read back under its id stays
            del self._entries[entry.run_id]
        self._kept.drop(entry.run_id)
        if self.storing and entry.saved is not None and not _is_stored(entry.run):
            self._forgotten.append(entry)  # its last news goes to the store (a run read from it has none)
        self._let_go.went(entry, successor, reason)

    def _trim_locked(self) -> list[RunEntry]:
        """Kept runs past kept_bytes let go, the longest unseen first; the caller releases them."""
        dropped = self._kept.past_budget()
        for entry in dropped:
            self._forget_locked(entry, reason="trimmed")
        return dropped


def _is_stored(run) -> bool:
    from .stored import StoredRun  # stored.py reads checkpoints: loaded once a run is let go, not at import

    return isinstance(run, StoredRun)

