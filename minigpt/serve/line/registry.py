"""The run registry: every run a server holds, who may steer each, the line for a training slot,
and what is kept of runs that train no more. Plain threading, no Streamlit.

A run belongs to the session that started it (it holds the run's secret key; others may watch by
id, never steer). At most `max_runs` train at once; every other Start waits in line (line.py),
first in, first out, one run per owner, and a dispatcher thread starts the head when a slot frees.
Runs whose owner has gone are let go: a waiting one after `waiting_idle_seconds`, any after
`idle_seconds`. A run that trains no more is kept in its small form (kept.py) within `kept_bytes`.

With a `store` (store.py), what a run is made of (its recipe, owner key's digest, place in line) is
written when it joins the line, and its history, state and checkpoints as it trains, behind it. A
run the registry does not hold is looked for there: one it let go, or one a previous process held.
It comes back as a StoredRun (stored.py): as it was, or "interrupted" where it was training, and its
owner resumes it from its newest checkpoint; the runs that were waiting are back in line at start,
in their order. Rebuilding a run is the caller's (`builder`: where it trains is a server setting).
"""
from __future__ import annotations

import dataclasses
import gc
import itertools
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...messages import LabError
from ..store import keys
from ..runs.recipe import RunSpec
from .waiting import Estimate, Pace, Progress, SpeedBook, WaitingRun, estimate
from ..runs.run import ACTIVE_STATES, ENDED_STATES, EXITING, INTERRUPTED, Resume, Run, RunSnapshot

if TYPE_CHECKING:  # for the annotations only: looking a run up needs no torch (Home does, before it loads)
    from ...model import MiniGPT
    from ..runs.run import RunView
    from ..store.database import Store

    Builder = Callable[[RunSpec, Resume | None], Run]

MAX_REMEMBERED = 256  # replaced and forgotten runs remembered, for watchers and for their owners' notices
DISPATCH_EVERY = 0.25  # seconds between the dispatcher's looks while the registry holds runs
DEFAULT_MAX_WAITING = 120  # runs in line: a few times the largest class
DEFAULT_WAITING_IDLE = 5 * 60  # seconds an owner may show no sign of life before their waiting run is dropped
DEFAULT_PAUSED_GRACE = 3 * 60  # seconds a paused run may hold a slot while others wait
DEFAULT_KEPT_BYTES = 64 * 2**20  # what finished runs may hold (app/state/runs.py sizes it from the box)
CLAIM_SECONDS = 20.0   # a slot granted to a page's own work (the race) that the page has not claimed by then is freed
KEEP_TRIES = 3         # reads of a finished run's weights before its process is let go without a small form
SAVE_EVERY = 1.0       # seconds between writes of a training run's news to the store
SEEN_EVERY = 600.0     # seconds between writes of an owner's sign of life (retention counts days)


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
    spec: RunSpec = field(default=None, repr=False)  # what it trains (its shape's pace, its steps), and what rebuilds it
    order: int = 0                        # its place in the line: lower goes first; a replacement keeps it
    started: float = 0.0                  # when its slot was granted
    last_steered: float = 0.0             # when it started, or its owner last pressed a button for it
    stopped_for_line: bool = False        # paused longer than the registry's grace while others waited
    key_hash: bytes = field(default=b"", repr=False)  # keys.hashed(key): what is compared, and stored
    lasting: bool = False  # the store keeps it (its spec as its recipe): the registry rebuilds it after a restart
    saved: tuple | None = field(default=None, repr=False)  # events, evaluations, state, step the store has (None: no row yet)
    saved_at: float = field(default=float("-inf"), repr=False)
    seen_saved: float = field(default=float("-inf"), repr=False)
    _model: tuple[int, MiniGPT] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if not self.key_hash and self.key:
            self.key_hash = keys.hashed(self.key)

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def is_owner(self, key: str | None) -> bool:
        return keys.matches(key, self.key_hash)

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
        run = self.run
        step = (run.trainer.step, id(run))
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
        return "running" if self._held else "closed"

    def is_alive(self) -> bool:
        return self._held

    def snapshot(self) -> RunSnapshot:
        return RunSnapshot.of(self.run_id, self.state, step=0, max_steps=self.spec.max_steps)

    def close(self, timeout: float | None = 5.0) -> None:
        self._held = False


class RunRegistry:
    """Every run on this server. Thread-safe: all sessions share one registry.

    The line's order and the slots are decided under one lock, so simultaneous Starts get a strict
    first-in, first-out order, and never more than max_runs train. Building a run (forking its
    process) and reading a finished run's weights happen outside the lock, on the dispatcher's
    thread: a learner's page never waits for someone else's run. The lock is taken before any
    run's own lock, never the other way round.
    """

    def __init__(self, max_runs: int = 2, idle_seconds: float = 30 * 60, *,
                 max_waiting: int = DEFAULT_MAX_WAITING, waiting_idle_seconds: float = DEFAULT_WAITING_IDLE,
                 paused_grace_seconds: float = DEFAULT_PAUSED_GRACE, kept_bytes: int = DEFAULT_KEPT_BYTES,
                 clock: Callable[[], float] = time.monotonic, dispatcher: bool = True,
                 store: Store | None = None, builder: Builder | None = None,
                 facts: Callable[[RunSpec], Any] = lambda spec: None) -> None:
        """`store`: where runs outlive this process (None: memory only). `builder(spec, resume)` builds a
        run the store gave back, to go on from `resume` (worker.build_run, with the server's setting);
        `facts(spec)` is what the caller keeps with it (RunEntry.facts)."""
        self.max_runs, self.idle_seconds = max_runs, idle_seconds
        self.max_waiting, self.waiting_idle_seconds = max_waiting, waiting_idle_seconds
        self.paused_grace_seconds, self.kept_bytes = paused_grace_seconds, kept_bytes
        self._clock = clock  # seconds; tests pass one they move by hand
        self._lock = threading.Lock()
        self._entries: dict[str, RunEntry] = {}
        self._reserved = 0                     # slots taken by runs being built
        self._orders = itertools.count(1)
        self._successors: OrderedDict[str, str] = OrderedDict()  # replaced run id -> its replacement's id
        self._gone: OrderedDict[str, str] = OrderedDict()        # forgotten run id -> why (a gone_reason)
        self._kept: dict[str, int] = {}        # run id -> bytes, for runs swapped for their small form
        self._keep_tries: dict[str, int] = {}
        self.speeds = SpeedBook()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._dispatcher: threading.Thread | None = None
        self._use_dispatcher = dispatcher  # off in tests that move the line themselves (dispatch())
        self.store, self.builder, self.facts = store, builder, facts
        self._missing: OrderedDict[str, None] = OrderedDict()  # ids the store did not have either
        self._forgotten: list[RunEntry] = []  # let go since the last write: their last state goes to the store
        self._save_lock = threading.Lock()     # one writer of a run's news at a time: the dispatcher, or a sink
        if store is not None:
            self._orders = itertools.count(store.max_line_order() + 1)
            self._restore_line()
            if self._entries:  # the restored line moves by itself, as a line does
                self._nudge()

    # -- looking runs up -------------------------------------------------------------------------
    def get(self, run_id: str | None, key: str | None = None) -> RunEntry | None:
        """The run, or None; its owner's key also counts as a sign of life. A run this registry does
        not hold is read from the store, if it has it."""
        self._tidy()
        with self._lock:
            entry = self._entries.get(run_id) if run_id else None
        if entry is None and run_id:
            entry = self._load(run_id)
        with self._lock:
            if entry is not None and entry.is_owner(key):
                entry.last_seen = self._clock()
                seen = self.store is not None and entry.last_seen - entry.seen_saved > SEEN_EVERY
                if seen:
                    entry.seen_saved = entry.last_seen
            else:
                seen = False
        if seen:
            self.store.seen([entry.run_id])
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

    def gone_reason(self, run_id: str) -> str | None:
        """Why a run is no longer here: "cancelled" (by its owner), "dropped" (left the line: its owner
        showed no sign of life), "released" (its owner stopped using it), "trimmed" (the oldest kept
        run, past the memory for kept runs); None when it is unknown here."""
        with self._lock:
            return self._gone.get(run_id)

    def resize(self, max_runs: int) -> None:
        """Train this many runs at once from now on (a cluster's machines joined or left): runs waiting
        start at once where there is room; runs training beyond it go on, and no more start meanwhile."""
        with self._lock:
            grew = max_runs > self.max_runs
            self.max_runs = max_runs
        if grew:
            self._nudge()

    def active_count(self) -> int:
        self._tidy()
        with self._lock:
            return self._busy_locked()

    def waiting_count(self) -> int:
        with self._lock:
            return len(self._waiting_locked())

    def standing(self, entry: RunEntry) -> tuple[int, Estimate | None] | None:
        """A waiting run's place in line (1 at the front) and when it should start (line.estimate: None
        before this server has a pace to go by), read together; None when it is not waiting."""
        with self._lock:
            waiting = self._waiting_locked()
            if entry not in waiting:
                return None
            place = waiting.index(entry)
            return place + 1, self._estimate_locked(waiting[:place])

    def place(self, entry: RunEntry) -> int | None:
        standing = self.standing(entry)
        return standing[0] if standing else None

    def estimate(self, entry: RunEntry) -> Estimate | None:
        standing = self.standing(entry)
        return standing[1] if standing else None

    # -- joining the line ------------------------------------------------------------------------
    def submit(self, spec: RunSpec, *, corpus: str, build: Callable[[str], Run] | None = None,
               replace: tuple[str, str] | None = None, paused: bool = False) -> RunEntry:
        """Put the run `spec` describes in line (its run_id is given here); the registry's builder makes
        it when its turn comes (paused at step 0 if asked), and the store keeps it. `build(run_id)`, where
        given, makes it instead, and the run lasts as long as this process. When a slot is free and nobody
        waits, it starts now, on the caller's thread. It replaces the caller's own previous run
        (`replace`: its id and key): a waiting one gives it its place, a training one is released.
        RunLimitError when the line is full."""
        spec = dataclasses.replace(spec, run_id=secrets.token_urlsafe(9))
        lasting = build is None
        if build is None:
            build = self._rebuild(spec, None)
        entry = RunEntry(WaitingRun(spec.run_id, spec, build, paused), keys.new_key(), corpus, spec.probe_text or "",
                         self._clock(), self.facts(spec), spec, lasting=lasting)
        self._release_idle()
        with self._lock:
            old = self._entries.get(replace[0]) if replace else None
            if old is not None and not old.is_owner(replace[1]):
                old = None
            waiting = self._waiting_locked()
            if old is not None and old in waiting:
                entry.order = old.order
            else:
                if len(waiting) >= self.max_waiting:
                    _line_full(len(waiting), self._estimate_locked(waiting))
                entry.order = next(self._orders)
            if old is not None:
                self._forget_locked(old, successor=entry)
            self._entries[entry.run_id] = entry
        if old is not None:
            old.release()
        self._start_heads(only=entry)  # the caller's own run, if its turn is now: nobody else's
        self._save_new(entry, paused)  # its row; its news is written once this is queued (saved)
        self._nudge()
        return entry

    def request_slot(self, spec: RunSpec, replace: tuple[str, str] | None = None) -> RunEntry:
        """Join the line for a slot to train on the caller's own thread: once the entry's run is a
        HeldSlot, claim it (claim) and the slot is the caller's until it gives it back (give_back)."""
        return self.submit(spec, corpus="", build=lambda run_id: HeldSlot(run_id, spec, self._clock()),
                           replace=replace)

    def claim(self, entry: RunEntry) -> bool:
        """The work that waited for `entry`'s slot begins: True when the slot is still its to use."""
        with self._lock:
            if self._entries.get(entry.run_id) is not entry or not isinstance(entry.run, HeldSlot):
                return False
            entry.run.claimed = True
            entry.last_seen = self._clock()
            return entry.is_active()

    def give_back(self, entry: RunEntry, reason: str = "cancelled") -> None:
        """The work that held `entry`'s slot is done, or the entry leaves the line (waiting or being
        built): the slot, or its place, is the next one's."""
        with self._lock:
            self._forget_locked(entry, reason=reason)
        entry.release()
        self._nudge()

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
        with self._lock:
            entry.last_steered = self._clock()
        if run.state == INTERRUPTED:  # read from the store: Resume (or a step) trains it on from its checkpoint
            if action == "resume" or action.startswith("steps:"):
                self._resume_stored(entry)
            return
        if isinstance(run, WaitingRun):
            if action in ("cancel", "stop") and run.state in ("waiting", "starting"):
                self.give_back(entry)
            return
        if not isinstance(run, Run):  # kept or held: nothing to pause or resume
            return
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
        self._nudge()

    def forget(self, run_ids: list[str], reason: str = "erased") -> None:
        """Let these runs go from memory at once (their rows are the caller's: a class erased)."""
        with self._lock:
            entries = [self._entries[i] for i in run_ids if i in self._entries]
            for entry in entries:
                self._forget_locked(entry, reason=reason)
            for run_id in run_ids:
                _remember(self._missing, run_id, None)
        for entry in entries:
            entry.release()
        self._nudge()

    def stop_all(self) -> None:
        """Forget every run and free it: the registry itself is going (a code reload, the end of a
        test). A run in a child process ends with it, not when the server exits."""
        self._closing.set()
        self._wake.set()
        if self.store is not None:  # what the runs logged last is written before they go
            self._save_news(force=True)
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            entry.release()

    # -- the line moving ---------------------------------------------------------------------------
    def dispatch(self) -> None:
        """One look at everything: drop runs whose owner has gone, stop runs paused past their grace
        while others wait, start the head of the line while a slot is free, keep what has ended in
        its small form. The dispatcher thread does it every DISPATCH_EVERY seconds, or when woken;
        without one (tests), every access does."""
        self._release_idle()
        self._stop_paused_past_grace()
        self._start_heads()
        self._keep_ended()
        self._save_news()

    def _tidy(self) -> None:
        """What every access does: let go of the idle (cheap); the rest is the dispatcher's."""
        if self._use_dispatcher:
            self._release_idle()
        else:
            self.dispatch()

    def _nudge(self) -> None:
        """Something changed: have the line looked at now."""
        if self._use_dispatcher:
            self._start_dispatcher()
            self._wake.set()
        else:
            self.dispatch()

    def _start_heads(self, only: RunEntry | None = None) -> None:
        """Start the head of the line while a slot is free (`only`: if it is the head, else nothing). A
        server that is exiting starts nothing: the slots its stopped runs free are no one's, and the line
        waits, in the store, for the next server."""
        while True:
            with self._lock:
                waiting = self._waiting_locked()
                if not waiting or self._busy_locked() >= self.max_runs or self._closing.is_set() or EXITING.is_set():
                    return
                entry = waiting[0]
                if only is not None and entry is not only:
                    return
                self._reserved += 1
                entry.run.take()  # out of the line: another thread's pass leaves it alone
            self._start(entry)
            if only is not None:
                return

    def _start(self, entry: RunEntry) -> None:
        waiting: WaitingRun = entry.run
        run = None
        try:
            run = waiting.build(waiting.run_id)
            with self._lock:
                # not cancelled or released while it was built, nor the server exiting meanwhile
                if self._entries.get(entry.run_id) is entry and not EXITING.is_set():
                    entry.run, entry.started = run, self._clock()
                    entry.last_steered = entry.started
                    if isinstance(run, Run):
                        if self.store is not None and entry.lasting:
                            run.on_checkpoint = self._checkpoint_sink(entry)
                        run.start(paused=waiting.paused)
                    run = None
        except Exception as err:  # settings checked at submit can still fail to build or start: the owner is told
            with self._lock:
                if self._entries.get(entry.run_id) is entry:
                    entry.run = waiting
                waiting.fail(err)
        finally:
            with self._lock:
                self._reserved -= 1
            if run is not None:  # built for nobody, or built and failed to start
                run.close(timeout=2.0)

    def _stop_paused_past_grace(self) -> None:
        now = self._clock()
        with self._lock:
            if not self._waiting_locked() or self._busy_locked() < self.max_runs:
                return
            due = [e for e in self._entries.values() if isinstance(e.run, Run) and e.run.state == "paused"
                   and now - e.last_steered > self.paused_grace_seconds]
            for entry in due:
                entry.stopped_for_line = True
        for entry in due:
            entry.run.stop()

    def _keep_ended(self) -> None:
        """Swap each run that trains no more for its small form, and record the pace of those that train."""
        with self._lock:
            live = [e for e in self._entries.values() if isinstance(e.run, Run) and e.run_id not in self._kept]
        for entry in live:
            run = entry.run
            trainer = run.trainer
            self.speeds.training(entry.spec.shape, trainer.step, trainer.elapsed)
            if run.state not in ENDED_STATES or run.is_alive():
                continue
            if run.state == "finished" and entry.run_id not in self._keep_tries:
                self.speeds.finished(entry.spec.shape, trainer.step, self._clock() - entry.started)
            kept = _small_form(run, self.kept_bytes)
            with self._lock:
                if self._entries.get(entry.run_id) is not entry or entry.run is not run:
                    continue
                if kept is None:
                    tries = self._keep_tries[entry.run_id] = self._keep_tries.get(entry.run_id, 0) + 1
                    if tries < KEEP_TRIES:
                        continue  # a busy process answers next time
                    self._kept[entry.run_id] = 0  # its weights cannot be had: its process is let go below
                else:
                    entry.run, entry._model = kept, None
                    self._kept[entry.run_id] = kept.nbytes()
                self._keep_tries.pop(entry.run_id, None)
                dropped = self._trim_locked()
            run.close(timeout=2.0)
            for stale in dropped:
                stale.release()

    def _start_dispatcher(self) -> None:
        with self._lock:
            if self._dispatcher is not None or self._closing.is_set():
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
                if not self._entries:  # under the lock: a submit now finds no dispatcher and starts one
                    self._dispatcher = None
                    return

    # -- the store -----------------------------------------------------------------------------------
    def _save_new(self, entry: RunEntry, paused: bool) -> None:
        """A run that joined the line: what rebuilds it, its owner key's digest, its place. Its news is
        written only once its row is queued (`saved`): the dispatcher may start it meanwhile."""
        if self.store is None or not entry.lasting:
            return
        self.store.save_run(entry.run_id, entry.key_hash, entry.spec.recipe(), entry.spec.text, entry.corpus,
                            line_order=entry.order, start_paused=paused, max_steps=entry.spec.max_steps)
        entry.seen_saved = entry.last_seen
        with self._save_lock:
            entry.saved = (0, 0, "waiting", 0)

    def _checkpoint_sink(self, entry: RunEntry):
        """Where a run hands its checkpoints: the store, after the steps and evaluation it holds."""
        def sink(step: int, files: dict[str, bytes]) -> None:
            self._save_entry(entry, self._clock(), force=True)
            self.store.save_checkpoint(entry.run_id, step, files)
        return sink

    def _save_news(self, force: bool = False) -> None:
        """Write what each run logged since the last look: new steps and evaluations, its state and step
        (at most every SAVE_EVERY seconds a run, and at once when its state changed)."""
        if self.store is None or EXITING.is_set():
            return
        from ..runs.stored import StoredRun

        now = self._clock()
        with self._lock:
            entries = [e for e in self._entries.values() if e.lasting and not isinstance(e.run, StoredRun)
                       and not isinstance(e.run, HeldSlot)]
            forgotten, self._forgotten = self._forgotten, []
        for entry in forgotten:
            if entry.saved is None:
                continue
            run, (events_saved, evals_saved, *_rest) = entry.run, entry.saved
            if isinstance(run, WaitingRun):  # out of the line for good: never back in line at a restart
                self.store.update_run(entry.run_id, state="cancelled", line_order=None)
            elif not isinstance(run, StoredRun):  # released while training: it reads as interrupted, resumable
                snap = run.snapshot()
                self.store.add_history(entry.run_id, snap.history[events_saved:], snap.evals[evals_saved:])
                ended = {"state": snap.state} if snap.state in ENDED_STATES else {}
                self.store.update_run(entry.run_id, step=snap.step, elapsed=snap.elapsed, **ended)
        for entry in entries:
            self._save_entry(entry, now, force)

    def _save_entry(self, entry: RunEntry, now: float, force: bool = False) -> None:
        """One run's news since the store last had it (the dispatcher's look, or a checkpoint's sink
        just before the checkpoint: a checkpoint never reaches the store ahead of the steps it holds)."""
        from ..runs.stored import error_json

        with self._save_lock:
            if entry.saved is None or EXITING.is_set():  # no row queued yet (submit writes it); the server exits
                return
            run = entry.run
            state = run.state
            events_saved, evals_saved, state_saved, step_saved = entry.saved
            if state == state_saved and (now - entry.saved_at < SAVE_EVERY and not force):
                return
            if isinstance(run, WaitingRun):
                if state != state_saved and state in ("starting", "error"):
                    self.store.update_run(entry.run_id, state=state, error=error_json(run._error))
                    entry.saved = (events_saved, evals_saved, state, step_saved)
                return
            snap = run.snapshot()
            if (len(snap.history), len(snap.evals), snap.state, snap.step) == entry.saved:
                entry.saved_at = now
                return
            self.store.add_history(entry.run_id, snap.history[events_saved:], snap.evals[evals_saved:])
            self.store.update_run(entry.run_id, state=snap.state if snap.state != "closed" else state_saved or "stopped",
                                  step=snap.step, elapsed=snap.elapsed, tokens_per_sec=snap.tokens_per_sec,
                                  stopped_early=snap.stopped_early, error=error_json(snap.error), line_order=None)
            entry.saved, entry.saved_at = (len(snap.history), len(snap.evals), snap.state, snap.step), now

    def _restore_line(self) -> None:
        """The runs that were waiting in line when the last process stopped, back in line in their order."""
        if self.builder is None:
            return
        now = self._clock()
        for row in self.store.waiting_runs():
            spec = RunSpec.from_recipe(row.run_id, row.recipe, row.text)
            build = self._rebuild(spec, None)
            entry = RunEntry(WaitingRun(row.run_id, spec, build, row.start_paused), "", row.corpus_label,
                             spec.probe_text or "", now, self.facts(spec), spec, order=row.line_order,
                             key_hash=row.owner_key, lasting=True, saved=(0, 0, "waiting", 0))
            self._entries[entry.run_id] = entry

    def _rebuild(self, spec: RunSpec, resume: Resume | None) -> Callable[[str], Run]:
        builder = self.builder
        return lambda run_id: builder(spec, resume)

    def _load(self, run_id: str) -> RunEntry | None:
        """A run the store has and this registry does not hold, as a StoredRun; None where it has not."""
        if self.store is None:
            return None
        with self._lock:
            if run_id in self._missing or run_id in self._successors:  # a replaced run: watchers follow its owner
                return None
        row = self.store.load_run(run_id)
        if row is None:
            if self.store.problem is None:  # the store answered: it does not have it either
                with self._lock:
                    _remember(self._missing, run_id, None)
            return None
        from ..runs.stored import StoredRun

        run = StoredRun(row, self.store)
        entry = RunEntry(run, "", row.corpus_label, run.spec.probe_text or "", self._clock(), self.facts(run.spec),
                         run.spec, key_hash=row.owner_key, lasting=True,
                         saved=(len(row.history), len(row.evals), row.state, row.step))
        with self._lock:
            held = self._entries.get(run_id)
            if held is not None:  # another thread read it meanwhile
                return held
            self._entries[run_id] = entry
            self._kept[run_id] = run.nbytes()
            dropped = self._trim_locked()
        for stale in dropped:
            stale.release()
        return entry

    def _resume_stored(self, entry: RunEntry) -> None:
        """An interrupted run's owner resumes it: it joins the line, to train on from its newest
        checkpoint (from step 0 where it has none), its history kept up to there."""
        from ..runs.run import Resume

        stored = entry.run
        step, files, history, evals = stored.resume_from()
        resume = Resume(files, history, evals) if files is not None else None
        build = self._rebuild(entry.spec, resume)
        with self._lock:
            if self._entries.get(entry.run_id) is not entry or entry.run is not stored:
                return  # resumed from another page meanwhile
            waiting = self._waiting_locked()
            if len(waiting) >= self.max_waiting:
                _line_full(len(waiting), self._estimate_locked(waiting))
            entry.order = next(self._orders)
            entry.run, entry._model = WaitingRun(entry.run_id, entry.spec, build), None
            entry.saved, entry.saved_at = (len(history), len(evals), "waiting", step), self._clock()
            self._kept.pop(entry.run_id, None)
        self.store.forget_after(entry.run_id, step if files is not None else -1)  # logged again as it trains
        self.store.update_run(entry.run_id, state="waiting", step=step, line_order=entry.order, wait=True)
        self._nudge()

    # -- under the lock ----------------------------------------------------------------------------
    def _waiting_locked(self) -> list[RunEntry]:
        return sorted((e for e in self._entries.values() if e.is_waiting()), key=lambda e: e.order)

    def _busy_locked(self) -> int:
        return sum(entry.is_active() for entry in self._entries.values()) + self._reserved

    def _estimate_locked(self, ahead: list[RunEntry]) -> Estimate | None:
        """The runs' facts take their own locks, never the registry's: safe to read under it."""
        now = self._clock()
        busy = []
        for entry in self._entries.values():
            run = entry.run
            if isinstance(run, HeldSlot) and run.is_alive():
                busy.append((Progress(0, run.spec.max_steps, since=now - run.granted), self._pace(entry)))
            elif isinstance(run, WaitingRun) and run.state == "starting":
                busy.append((Progress(0, entry.spec.max_steps), self._pace(entry)))
            elif isinstance(run, Run) and entry.is_active():
                trainer = run.trainer
                busy.append((Progress(trainer.step, entry.spec.max_steps, trainer.elapsed, since=now - entry.started,
                                      paused=run.state == "paused"), self._pace(entry)))
        return estimate(self.max_runs, busy,
                        [(e.spec.max_steps, self._pace(e), e.run.paused) for e in ahead])

    def _pace(self, entry: RunEntry) -> Pace | None:
        return self.speeds.pace(entry.spec.shape)

    def _forget_locked(self, entry: RunEntry, successor: RunEntry | None = None, reason: str | None = None) -> None:
        if self._entries.get(entry.run_id) is entry:
            del self._entries[entry.run_id]
        self._kept.pop(entry.run_id, None)
        self._keep_tries.pop(entry.run_id, None)
        if self.store is not None and entry.saved is not None and not _is_stored(entry.run):
            self._forgotten.append(entry)  # its last news goes to the store (a run read from it has none)
        if successor is not None:
            _remember(self._successors, entry.run_id, successor.run_id)
        if reason is not None:
            _remember(self._gone, entry.run_id, reason)

    def _release_idle(self) -> None:
        now = self._clock()
        with self._lock:
            idle = [e for e in self._entries.values() if self._overdue(e, now)]
            for entry in idle:
                self._forget_locked(entry, reason="dropped" if isinstance(entry.run, WaitingRun) else "released")
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

    def _overdue(self, entry: RunEntry, now: float) -> bool:
        """The owner has shown no sign of life for longer than this run may wait for them."""
        run = entry.run
        if isinstance(run, HeldSlot) and not run.claimed:  # granted, and its page has not begun its work
            return now - run.granted > CLAIM_SECONDS
        return now - entry.last_seen > (self.waiting_idle_seconds if entry.is_waiting() else self.idle_seconds)

    def _trim_locked(self) -> list[RunEntry]:
        """Kept runs past kept_bytes, the longest unseen first."""
        total = sum(self._kept.values())
        dropped = []
        for entry in sorted((self._entries[i] for i in self._kept if i in self._entries), key=lambda e: e.last_seen):
            if total <= self.kept_bytes:
                break
            total -= self._kept[entry.run_id]
            self._forget_locked(entry, reason="trimmed")
            dropped.append(entry)
        return dropped


def _is_stored(run) -> bool:
    from ..runs.stored import StoredRun

    return isinstance(run, StoredRun)


def _remember(memory: OrderedDict, key: str, value: str) -> None:
    memory[key] = value
    while len(memory) > MAX_REMEMBERED:
        memory.popitem(last=False)


def _small_form(run: Run, kept_bytes: int):
    """A run's KeptRun, at most a share of the memory for kept runs (older time-lapse frames thinned),
    or None where its weights cannot be had now."""
    from ..runs.kept import KEPT_SHARE, KeptRun  # torch: only once a run has trained

    try:
        return KeptRun(run, max_bytes=kept_bytes // KEPT_SHARE)
    except Exception:
        return None


def _line_full(waiting: int, wait: Estimate | None) -> None:
    if wait is None:
        raise RunLimitError("All {waiting} places in the line for training on this server are taken. Try again when "
                            "the line is shorter.", waiting=waiting)
    raise RunLimitError("All {waiting} places in the line for training on this server are taken: a run that joined "
                        "now would start in about {minutes:.0f} minutes. Try again when the line is shorter.",
                        waiting=waiting, minutes=max(1.0, wait.seconds / 60))
