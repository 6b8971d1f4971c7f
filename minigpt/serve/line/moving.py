"""The line moving: one look at every run (let go the runs whose owners have gone, stop the paused runs
past their grace while others wait, start the head of the line while a slot is free, swap each run
that ended for its small form, write the news), taken by a dispatcher thread every DISPATCH_EVERY
seconds or when nudged, or by every access where there is none (tests). The book decides under its
lock; what takes time (building a run, reading its weights, closing it) happens here, outside it.
"""
from __future__ import annotations

import gc
import threading

from ..runs.run import ENDED_STATES, EXITING, Run
from .book import LineBook
from .entry import RunEntry
from .keeping import Keeping
from .waiting import SpeedBook, WaitingRun

DISPATCH_EVERY = 0.25  # seconds between the dispatcher's looks while the registry holds runs


class LineMover:
    """Moves the book's line; `dispatcher`: on its own thread (off in tests that call dispatch())."""

    def __init__(self, book: LineBook, keeping: Keeping, speeds: SpeedBook, kept_bytes: int,
                 dispatcher: bool = True) -> None:
        self.book, self.keeping, self.speeds, self.kept_bytes = book, keeping, speeds, kept_bytes
        self._wake = threading.Event()
        self._dispatcher: threading.Thread | None = None  # started by the first nudge; gone once no run is held
        self._use_dispatcher = dispatcher

    def dispatch(self) -> None:
        self.release_idle()
        self._stop_paused_past_grace()
        self.start_heads()
        self._keep_ended()
        self.keeping.save_news()

    def tidy(self) -> None:
        """What every access does: let go of the idle (cheap); the rest is the dispatcher's."""
        if self._use_dispatcher:
            self.release_idle()
        else:
            self.dispatch()

    def nudge(self) -> None:
        """Something changed: have the line looked at now."""
        if self._use_dispatcher:
            self._start_dispatcher()
            self._wake.set()  # the sleeping dispatcher looks now, not at its next tick
        else:
            self.dispatch()

    def stop(self) -> None:
        self.book.closing.set()  # nothing starts from now on, and no dispatcher is started again
        self._wake.set()  # the dispatcher sees it now and ends

    # -- starting -----------------------------------------------------------------------------------
    def start_heads(self, only: RunEntry | None = None) -> None:
        """Start the head of the line while a slot is free (`only`: if it is the head, else nothing). A
        server that is exiting starts nothing: the slots its stopped runs free are no one's, and the line
        waits, in the store, for the next server."""
        while (entry := self.book.take_head(only)) is not None:
            self._start(entry)
            if only is not None:
                return  # the caller's own run only: the rest of the line is the dispatcher's

    def _start(self, entry: RunEntry) -> None:
        waiting: WaitingRun = entry.run
        run = None
        try:
            run = waiting.build(waiting.run_id)  # outside the lock: forking a process takes a while
            with self.book.lock:  # placed and started under the lock: a cancel cannot slip in between
                # not cancelled or released while it was built, nor the server exiting meanwhile
                if self.book.holds_locked(entry) and not EXITING.is_set():
                    entry.run, entry.started = run, self.book.clock()
                    entry.last_steered = entry.started  # its grace, were it to start paused, counts from now
                    self._begin(entry, run, waiting.paused)
                    run = None
        except Exception as err:  # settings checked at submit can still fail to build or start: the owner is told
            with self.book.lock:
                if self.book.holds_locked(entry):
                    entry.run = waiting  # back to what failed to build: its owner reads why
                waiting.fail(err)
        finally:
            self.book.unreserve()  # the slot is the run's now, or free again
            if run is not None:  # built for nobody, or built and failed to start
                run.close(timeout=2.0)

    def _begin(self, entry: RunEntry, run, paused: bool) -> None:
        """Start a built run (under the book's lock: a cancel meanwhile finds it started, and stops it)."""
        if isinstance(run, Run):  # a HeldSlot has nothing to start: its holder's page does the work
            if self.keeping.lasting(entry):
                run.on_checkpoint = self.keeping.checkpoint_sink(entry)  # set before it can save one
            run.start(paused=paused)

    # -- letting go ---------------------------------------------------------------------------------
    def release_idle(self) -> None:
        idle = self.book.take_idle()
        for entry in idle:
            try:
                entry.release()
            except Exception:  # one that fails to close must not keep the others open
                continue
        if idle:
            # what the released runs leave (their threads' frames, the pages of sessions that have
            # gone) sits in reference cycles: collect them now, not at some later full collection
            del entry, idle
            gc.collect()

    def _stop_paused_past_grace(self) -> None:
        for entry in self.book.past_grace():
            entry.run.stop()  # outside the lock: a process's run answers over a pipe

    def _keep_ended(self) -> None:
        """Swap each run that trains no more for its small form, and record the pace of those that train."""
        for entry in self.book.live():
            run = entry.run
            trainer = run.trainer
            self.speeds.training(entry.spec.shape, trainer.step, trainer.elapsed)
            if run.state not in ENDED_STATES or run.is_alive():
                continue
            if run.state == "finished" and self.book.first_keep(entry.run_id):  # a retry is not a second run
                self.speeds.finished(entry.spec.shape, trainer.step, self.book.clock() - entry.started)
            dropped = self.book.keep(entry, run, _small_form(run, self.kept_bytes))
            if dropped is None:
                continue  # let go meanwhile, or its weights are read again next time
            run.close(timeout=2.0)  # its small form holds what pages show: the process or thread goes
            for stale in dropped:
                stale.release()

    # -- the dispatcher thread ----------------------------------------------------------------------
    def _start_dispatcher(self) -> None:
        # under the book's lock, as the loop's retiring is: a submit never finds a dispatcher that is ending
        with self.book.lock:
            if self._dispatcher is not None or self.book.closing.is_set():
                return
            self._dispatcher = threading.Thread(target=self._dispatch_loop, name="minigpt-line", daemon=True)
            self._dispatcher.start()

    def _dispatch_loop(self) -> None:
        while not self.book.closing.is_set():
            self._wake.wait(DISPATCH_EVERY)
            self._wake.clear()
            try:
                self.dispatch()
            except Exception:  # a run that cannot be read this time is read again next time; the line goes on
                continue
            with self.book.lock:
                if self.book.empty_locked():  # under the lock: a submit now finds no dispatcher and starts one
                    self._dispatcher = None
                    return


def _small_form(run: Run, kept_bytes: int):
    """A run's KeptRun, at most a share of the memory for kept runs (older time-lapse frames thinned),
    or None where its weights cannot be had now."""
    from ..runs.kept import KEPT_SHARE, KeptRun  # torch: only once a run has trained

    try:
        return KeptRun(run, max_bytes=kept_bytes // KEPT_SHARE)
    except Exception:
        return None
