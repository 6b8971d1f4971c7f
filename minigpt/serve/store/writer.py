"""The store's one writer: a thread of its own that does every write, in order, one transaction each,
and the store's health (`problem`, `ready`). Memory first: the registry and the classes go on serving
from memory while this writes behind them; a database that is away is reopened on a thread every
REOPEN_SECONDS, and what was queued meanwhile is written, in order, once it answers."""
from __future__ import annotations

import atexit
import contextlib
import queue
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ...messages import Message
from .engine import drive_sqlite, use_wal, writing
from .faults import LOG, StoreError, describe, log_fault
from .migrations import migrate

WAIT_SECONDS = 3.0        # how long a learner's or teacher's action waits for its write before the page goes on
RETRY_SECONDS = 2.0       # between tries of a write the database refused
REOPEN_SECONDS = 30.0     # between tries to open a database that could not be opened
MAX_PENDING = 20_000      # writes held while the database does not answer; past it the oldest history goes
TIDY_SECONDS = 600.0      # between retention passes
# what a database says when it is away, busy or out of room: a write that met one is tried again
TRANSIENT = (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.DisconnectionError, sa.exc.TimeoutError, OSError)


@dataclass
class _Write:
    operation: Callable[[sa.Connection], None]  # one transaction's statements, on the writer's thread
    done: threading.Event | None = None  # set once it is in the database (or refused): a waiting write's signal
    ok: bool = True  # False: the database refused it for good


class Writer:
    """The engine's one writer thread and the store's health. Thread-safe: `_lock` guards the health
    fields and the count of pending writes, and is never held while the database is spoken to."""

    def __init__(self, engine: sa.Engine, *, clock: Callable[[], float],
                 tidy: Callable[[sa.Connection], None]) -> None:
        """`tidy(connection)`: the retention pass, run in a transaction of its own when the queue has
        emptied, every TIDY_SECONDS of `clock`. Nothing runs until `start`."""
        self.engine, self._clock, self._tidy = engine, clock, tidy
        self._queue: queue.Queue[_Write | None] = queue.Queue()  # None: the thread's signal to end
        self._pending = 0        # writes queued and not yet done: MAX_PENDING bounds them
        self._lock = threading.Lock()
        self._problem: Message | StoreError | None = None
        self._opened = False
        self._refused = False    # a schema newer than ours: never written to
        self._reads_after = 0.0  # a read that failed: the next tries wait until then
        self._reopening = False  # an opening thread is running: no second one starts
        self._next_open = 0.0    # monotonic: no opening is tried before it
        self._last_tidy = float("-inf")  # the first pass comes after the first write
        self._thread: threading.Thread | None = None
        self._closing = False

    def start(self, open_wait: float | None) -> None:
        """Open the database (waiting `open_wait` seconds at most, see _open_first) and start the thread."""
        drive_sqlite(self.engine)  # before the first connection: every one of them gets SQLite's settings
        atexit.register(_flush_at_exit, weakref.ref(self))  # a server stopped in order writes what it queued
        self._open_first(open_wait)
        self._thread = threading.Thread(target=self._write_loop, name="minigpt-store", daemon=True)
        self._thread.start()

    def _open_first(self, wait: float | None) -> None:
        """Open the database on a thread, as a reopening does, and wait for it `wait` seconds at most: a
        server's first page waits for a locked or slow database no longer than an action does. The
        opening goes on behind the page, which meanwhile says that results are not being saved."""
        with self._lock:
            # marked as reopening already: a page asking `ready` meanwhile starts no second opening
            self._reopening, self._next_open = True, time.monotonic() + REOPEN_SECONDS
        opening = threading.Thread(target=self._reopen, name="minigpt-store-open", daemon=True)
        opening.start()
        opening.join(wait)  # None: until it has opened or failed
        with self._lock:
            waiting = not self._opened and self._problem is None  # neither open nor failed yet
            if waiting:
                self._problem = Message("the database has not answered yet; trying again.")
        if waiting:
            LOG.warning("The database has not answered within %s s; it goes on being opened.", wait)

    # -- health --------------------------------------------------------------------------------------
    @property
    def problem(self) -> Message | StoreError | None:
        """Why results are not being saved right now, or None when they are."""
        with self._lock:
            return self._problem

    @property
    def ready(self) -> bool:
        """The database is open at the current schema. When it is not, it is tried again every
        REOPEN_SECONDS on a thread of its own: a page that asks never waits for a database that does
        not answer."""
        with self._lock:
            due = not self._opened and not self._reopening and time.monotonic() >= self._next_open
            if due:  # claimed under the lock: of many pages asking at once, one starts the opening
                self._reopening, self._next_open = True, time.monotonic() + REOPEN_SECONDS
        if due:
            threading.Thread(target=self._reopen, name="minigpt-store-open", daemon=True).start()
        return self._opened

    def _reopen(self) -> None:
        try:
            self.open()
        finally:
            with self._lock:
                self._reopening = False

    def open(self) -> bool:
        """Open the database: migrate its schema, and start the writer. False (with `problem` set) when
        it cannot be used now."""
        with self._lock:
            if self._opened or self._closing:  # opened by another thread meanwhile, or closing
                return self._opened
        try:
            migrate(self.engine)  # reads the version before it writes: a newer or damaged file stays untouched
            if self.engine.dialect.name == "sqlite":
                use_wal(self.engine)  # only now: a file found newer or damaged was left untouched
        except StoreError as err:
            self._refused = True
            self.fault(err, reopen=float("inf"))  # a newer schema: never written
            return False
        except Exception as err:  # noqa: BLE001 - unreachable, locked, corrupt: said, and tried again later
            self.fault(err, reopen=REOPEN_SECONDS)
            return False
        with self._lock:
            self._opened, self._problem = True, None
        return True

    def close(self) -> None:
        """Write what is queued (a few seconds at most), then stop the writer and free the engine."""
        if self._closing:
            return
        self.flush(timeout=5.0)
        self._closing = True  # from here every write is refused, and the thread leaves a write it retries
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(5.0)  # a write stuck on a database that is away is not waited for past it
        self.engine.dispose()  # the pool's connections close: SQLite's file is free for another process

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued so far is in the database: True, or False after `timeout`."""
        if not self._opened:  # nothing is written now: nothing to wait for
            return False
        done = threading.Event()
        # an empty write: the queue is done in order, so once it is done, so is everything before it
        self._queue.put(_Write(lambda connection: None, done=done))
        return done.wait(timeout)

    def fault(self, err: BaseException, reopen: float | None = None) -> None:
        """Say a fault on the pages, in the store's own words; the driver's words go to the server's log,
        once for each new fault rather than at every try. `reopen`: seconds before the next opening."""
        problem = describe(err)
        if problem != self.problem:
            log_fault(err)
        self._set_problem(problem, reopen)

    def _set_problem(self, problem: Message | StoreError | None, reopen: float | None = None) -> None:
        with self._lock:
            self._problem = problem
            if reopen is not None:
                self._next_open = time.monotonic() + reopen

    # -- writing and reading -------------------------------------------------------------------------
    def write(self, operation: Callable[[sa.Connection], None], *, wait: bool = False, history: bool = False) -> bool:
        """Queue `operation(connection)`, one transaction, done in order on the writer's thread. `wait`:
        return once it is in the database (True) or after WAIT_SECONDS (False: it stays queued). While
        the database is away it is queued all the same, and False says it is not saved yet. `history`:
        a run's logged steps, the first to go when the queue is full."""
        if self._refused or self._closing:  # a newer schema is never written; a closed store writes nothing
            return False
        with self._lock:
            if self._pending >= MAX_PENDING and history:
                return False  # the database has not answered for long: the run's own curve keeps them
            self._pending += 1
        write = _Write(operation, done=threading.Event() if wait else None)  # a run's history pays for no Event
        self._queue.put(write)  # queued even while the database is away: written, in order, once it answers
        if not self.ready:  # not in the database now; it will be, in its turn, once the database answers
            return False
        # a page waits a little, so that "posted" means posted; past WAIT_SECONDS it goes on, the write queued
        return write.done.wait(WAIT_SECONDS) and write.ok if write.done is not None else True

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:  # close(): what was queued before it is written
                return
            item.ok = False  # until it is in the database
            while not self._closing:
                if not self._opened:  # away, or never opened yet: open it here, then write what waited
                    if self._refused:
                        break
                    # opened here when due, on this thread: what was queued meanwhile follows, in order
                    if time.monotonic() < self._next_open or not self.open():
                        time.sleep(RETRY_SECONDS)
                        continue
                try:
                    with writing(self.engine) as connection:
                        item.operation(connection)
                except TRANSIENT as err:  # said on the pages; the same write is tried again, the rest wait their turn
                    self.fault(err)
                    time.sleep(RETRY_SECONDS)
                    continue
                except Exception as err:  # noqa: BLE001 - refused for good (its run erased meanwhile): dropped, said
                    self.fault(err)
                    break
                item.ok = True
                if self._problem is not None:
                    self._set_problem(None)  # a write went through: the database answers again
                break
            with self._lock:
                self._pending = max(0, self._pending - 1)
            if item.done is not None:  # set when refused for good too: the page stops waiting, and reads ok
                item.done.set()
            self._tidy_when_idle()

    def _tidy_when_idle(self) -> None:
        """The retention pass, on this thread and in its own transaction, when nothing waits to be written.
        Not through `write`: a write that waited for this thread would wait on itself."""
        if self._queue.empty() and self._clock() - self._last_tidy > TIDY_SECONDS:
            self._last_tidy = self._clock()
            # a pass that fails is tried at the next one: what it deletes is not lost by waiting
            with contextlib.suppress(Exception), writing(self.engine) as connection:  # noqa: SIM117
                self._tidy(connection)

    def read(self, query: Callable[[sa.Connection], Any], default: Any) -> Any:
        """Run a read on the caller's thread; `default` (and `problem` said) when the database fails, and
        for RETRY_SECONDS after: a page that reads many runs waits for a database that is away once."""
        if not self.ready or time.monotonic() < self._reads_after:
            return default
        try:
            with self.engine.connect() as connection:
                return query(connection)
        except Exception as err:  # noqa: BLE001
            self.fault(err)
            self._reads_after = time.monotonic() + RETRY_SECONDS  # no lock: a stale value costs one more try
            return default


def _flush_at_exit(ref: weakref.ref[Writer]) -> None:
    writer = ref()  # weak: registering with atexit must not keep a closed store's writer alive
    if writer is not None and writer._opened and not writer._closing:
        writer.flush(timeout=5.0)
