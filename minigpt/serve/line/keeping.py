"""The line's store glue: what outlives the process. A run that joins the line is written (its recipe,
its owner key's digest, its place), its news as it trains (steps, evaluations, state), its checkpoints
after the steps they hold; at start the runs that waited are back in line, a run the registry does not
hold is read back as a StoredRun, and its owner resumes it from its newest checkpoint.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..runs.recipe import RunSpec
from ..runs.run import ENDED_STATES, EXITING, Resume, Run
from .book import LineBook
from .entry import RunEntry
from .waiting import WaitingRun

if TYPE_CHECKING:
    from ..store.database import Store

    Builder = Callable[[RunSpec, Resume | None], Run]

SAVE_EVERY = 1.0       # seconds between writes of a training run's news to the store


class Keeping:
    """Writes the book's runs to the store and reads them back. `builder(spec, resume)` rebuilds a run
    from its recipe; `facts(spec)` is what the caller keeps with it (RunEntry.facts)."""

    def __init__(self, book: LineBook, store: Store | None, builder: Builder | None,
                 facts: Callable[[RunSpec], Any]) -> None:
        self.book, self.store, self.builder, self.facts = book, store, builder, facts
        self._clock = book.clock
        self._save_lock = threading.Lock()  # one writer of a run's news at a time: the dispatcher, or a sink

    def lasting(self, entry: RunEntry) -> bool:
        return self.store is not None and entry.lasting

    def rebuild(self, spec: RunSpec, resume: Resume | None) -> Callable[[str], Run]:
        builder = self.builder  # read now: the run is built later, on the dispatcher's thread
        return lambda run_id: builder(spec, resume)

    # -- writing ------------------------------------------------------------------------------------
    def save_new(self, entry: RunEntry, paused: bool) -> None:
        """A run that joined the line: what rebuilds it, its owner key's digest, its place. Its news is
        written only once its row is queued (`saved`): the dispatcher may start it meanwhile."""
        if not self.lasting(entry):
            return
        self.store.runs.save(entry.run_id, entry.key_hash, entry.spec.recipe(), entry.spec.text, entry.corpus,
                            line_order=entry.order, start_paused=paused, max_steps=entry.spec.max_steps)
        entry.seen_saved = entry.last_seen  # the row carries its owner's sign of life already
        with self._save_lock:  # a news write in flight finishes first, then finds the row there
            entry.saved = (0, 0, "waiting", 0)

    def checkpoint_sink(self, entry: RunEntry):
        """Where a run hands its checkpoints: the store, after the steps and evaluation it holds."""
        def sink(step: int, files: dict[str, bytes]) -> None:
            # the news first: a restart resumes from this checkpoint with the history up to it
            self._save_entry(entry, self._clock(), force=True)
            self.store.checkpoints.save(entry.run_id, step, files)
        return sink

    def save_news(self, force: bool = False) -> None:
        """Write what each run logged since the last look: new steps and evaluations, its state and step
        (at most every SAVE_EVERY seconds a run, and at once when its state changed)."""
        if self.store is None or EXITING.is_set():  # an exiting server's runs read as interrupted, resumable
            return
        now = self._clock()
        entries, forgotten = self.book.news()
        for entry in forgotten:
            self._save_last(entry)
        for entry in entries:
            self._save_entry(entry, now, force)

    def _save_last(self, entry: RunEntry) -> None:
        """A run let go: its last state, so the store never shows it waiting or training."""
        from .stored import StoredRun

        if entry.saved is None:
            return  # no row was written for it
        run, (events_saved, evals_saved, *_rest) = entry.run, entry.saved
        if isinstance(run, WaitingRun):  # out of the line for good: never back in line at a restart
            self.store.runs.update(entry.run_id, state="cancelled", line_order=None)
        elif not isinstance(run, StoredRun):  # released while training: it reads as interrupted, resumable
            snap = run.snapshot()
            self.store.runs.add_history(entry.run_id, snap.history[events_saved:], snap.evals[evals_saved:])
            ended = {"state": snap.state} if snap.state in ENDED_STATES else {}
            self.store.runs.update(entry.run_id, step=snap.step, elapsed=snap.elapsed, **ended)

    def _save_entry(self, entry: RunEntry, now: float, force: bool = False) -> None:
        """One run's news since the store last had it (the dispatcher's look, or a checkpoint's sink
        just before the checkpoint: a checkpoint never reaches the store ahead of the steps it holds)."""
        from .stored import error_json

        with self._save_lock:  # the dispatcher and a sink both write: `saved` must match what the store has
            if entry.saved is None or EXITING.is_set():  # no row queued yet (submit writes it); the server exits
                return
            run = entry.run
            state = run.state
            events_saved, evals_saved, state_saved, step_saved = entry.saved
            if state == state_saved and (now - entry.saved_at < SAVE_EVERY and not force):
                return  # nothing urgent: a state change is written at once, steps at most every SAVE_EVERY
            if isinstance(run, WaitingRun):
                if state != state_saved and state in ("starting", "error"):  # a failed build reads as failed
                    self.store.runs.update(entry.run_id, state=state, error=error_json(run._error))
                    entry.saved = (events_saved, evals_saved, state, step_saved)
                return
            snap = run.snapshot()
            if (len(snap.history), len(snap.evals), snap.state, snap.step) == entry.saved:
                entry.saved_at = now
                return
            self.store.runs.add_history(entry.run_id, snap.history[events_saved:], snap.evals[evals_saved:])
            # "closed" is a run let go, not a state it ended in: the store keeps the last real one
            last = snap.state if snap.state != "closed" else state_saved or "stopped"
            self.store.runs.update(entry.run_id, state=last,
                                  step=snap.step, elapsed=snap.elapsed, tokens_per_sec=snap.tokens_per_sec,
                                  stopped_early=snap.stopped_early, error=error_json(snap.error), line_order=None)
            entry.saved, entry.saved_at = (len(snap.history), len(snap.evals), snap.state, snap.step), now

    # -- reading back -------------------------------------------------------------------------------
    def restore_line(self) -> None:
        """The runs that were waiting in line when the last process stopped, back in line in their order."""
        if self.builder is None:
            return  # nothing could build them: they wait in the store for a server that can
        now = self._clock()
        for row in self.store.runs.waiting():
            spec = RunSpec.from_recipe(row.run_id, row.recipe, row.text)
            build = self.rebuild(spec, None)
            # "": the owner's key is never stored, only its digest, which still proves them the owner
            entry = RunEntry(WaitingRun(row.run_id, spec, build, row.start_paused), "", row.corpus_label,
                             spec.probe_text or "", now, self.facts(spec), spec, order=row.line_order,
                             key_hash=row.owner_key, lasting=True, saved=(0, 0, "waiting", 0))
            self.book.restore(entry)

    def load(self, run_id: str) -> RunEntry | None:
        """A run the store has and this registry does not hold, as a StoredRun; None where it has not."""
        if self.store is None or self.book.not_in_store(run_id):
            return None
        row = self.store.runs.load(run_id)
        if row is None:
            if self.store.problem is None:  # the store answered: it does not have it either
                self.book.missing(run_id)
            return None
        from .stored import StoredRun

        run = StoredRun(row, self.store)
        entry = RunEntry(run, "", row.corpus_label, run.spec.probe_text or "", self._clock(), self.facts(run.spec),
                         run.spec, key_hash=row.owner_key, lasting=True,
                         saved=(len(row.history), len(row.evals), row.state, row.step))
        entry, dropped = self.book.adopt(entry, run.nbytes())  # held as a kept run: it counts in their memory
        for stale in dropped:
            stale.release()
        return entry

    def resume(self, entry: RunEntry) -> bool:
        """An interrupted run's owner resumes it: it joins the line, to train on from its newest
        checkpoint (from step 0 where it has none), its history kept up to there. False when another
        page resumed it first; RunLimitError when the line has no room for it."""
        stored = entry.run
        step, files, history, evals = stored.resume_from()
        resume = Resume(files, history, evals) if files is not None else None
        waiting = WaitingRun(entry.run_id, entry.spec, self.rebuild(entry.spec, resume))
        if not self.book.requeue(entry, stored, waiting, (len(history), len(evals), "waiting", step)):
            return False
        self.store.runs.forget_after(entry.run_id, step if files is not None else -1)  # logged again as it trains
        self.store.runs.update(entry.run_id, state="waiting", step=step, line_order=entry.order, wait=True)
        return True
