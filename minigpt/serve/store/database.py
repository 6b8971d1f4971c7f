"""What must outlive the server process, in a real database through SQLAlchemy: the classes (their
posts, answers and the lesson their teacher leads), every run (its recipe, history, samples, state,
its place in line and its checkpoints) and the runs kept for comparison. No Streamlit here: the app
hands in the engine that `st.connection(type="sql")` made; the library and its tests make one with
`create_engine`.

- **One schema, versioned** (`SCHEMA_VERSION`, in the table `minigpt_meta`). A new database is
  made at the current version; an older one is migrated, one step at a time (`MIGRATIONS`), inside
  a transaction; a newer one is refused, never written to, and said so.
- **Memory first.** The registry and the classes keep serving from memory; the store writes behind
  them on one thread of its own, in order. What a learner or a teacher does (a post, a class, an
  answer) waits for its write, a little (`WAIT_SECONDS`), so that a page that says "posted" has
  posted; what a run logs is written as it comes, without waiting.
- **Faults are said, never raised to a page.** Unreachable, locked, full, corrupt, read-only, a
  driver that is not installed, a schema from a newer version: `problem` holds the sentence to show
  (in our words, which the app translates; the driver's own words go to the server's log), the app
  works from memory, and writes that failed are tried again, in order, when the database answers.
  Nothing already saved is overwritten with less: a database that cannot be read is never written.
  A server's page never waits on the database longer than an action does (`WAIT_SECONDS`), opening
  included (`open_wait`).
- **Every statement binds its values.** Tables and columns are named here; what a user typed only
  ever travels as a bound parameter.
- **SQLite** (the default) runs in WAL mode with a busy timeout, so several threads and processes
  share one file; a write is a transaction, so a kill leaves the last complete state. Its
  checkpoints are files beside it (`checkpoint-<step>/` folders, kill-safe like every checkpoint
  here). With any other database the checkpoints go into the database itself: a container's disk
  may not outlive it.
- **Bounded** (`Retention`): a class's rows go when it ends, a run nobody posted and nobody has
  opened for `run_days` goes with its checkpoints, and a run keeps its `checkpoints` newest.
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import math
import queue
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ...messages import LabError, Message

if TYPE_CHECKING:
    from ...lab.run_records import RunRecord
    from ...train import TrainEvent
    from ..runs.run import EvalRecord

SCHEMA_VERSION = 2
WAIT_SECONDS = 3.0        # how long a learner's or teacher's action waits for its write before the page goes on
RETRY_SECONDS = 2.0       # between tries of a write the database refused
REOPEN_SECONDS = 30.0     # between tries to open a database that could not be opened
MAX_PENDING = 20_000      # writes held while the database does not answer; past it the oldest history goes
BUSY_TIMEOUT_MS = 10_000  # SQLite: how long a write waits for another connection's lock
CONNECT_SECONDS = 5      # PostgreSQL: how long a connection may take before the database counts as away
MIGRATION_LOCK = 0x6D696E69  # PostgreSQL: the advisory lock a migration holds ("mini")
TIDY_SECONDS = 600.0      # between retention passes
_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
LOG = logging.getLogger(__name__)  # where the driver's own words go: the server's log, never a page
CLASS_IDLE_SECONDS = 3 * 3600  # a class ends this long after its last activity (and its rows leave the store)
# what a database says when it is away, busy or out of room: a write that met one is tried again
TRANSIENT = (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.DisconnectionError, sa.exc.TimeoutError, OSError)


class StoreError(LabError, RuntimeError):
    """The database cannot be used: why, in a sentence for the page."""


@dataclass(frozen=True)
class Retention:
    """How long what the store keeps stays (docs/deploying.md): a class's rows go when it ends, at the
    latest `class_hours` after its last activity; a run that is on no open class's board goes `run_days`
    after its owner last opened it; a run keeps its `checkpoints` newest."""

    class_hours: float = CLASS_IDLE_SECONDS / 3600
    run_days: float = 7.0
    checkpoints: int = 1


# ------------------------------------------------------------------------------------------ schema
metadata = sa.MetaData()

meta_table = sa.Table(
    "minigpt_meta", metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("value", sa.String(64), nullable=False),
)
classes_table = sa.Table(
    "classes", metadata,
    sa.Column("code", sa.String(8), primary_key=True),
    sa.Column("teacher_key", sa.LargeBinary, nullable=False),   # keys.hashed: salt + digest
    sa.Column("salt", sa.LargeBinary, nullable=False),          # the class's salt for its learners' tags
    sa.Column("challenge", sa.JSON),
    sa.Column("pinned", sa.String(32)),
    sa.Column("lesson_step", sa.Integer),
    sa.Column("revealed", sa.JSON, nullable=False),
    sa.Column("created", sa.Float, nullable=False),             # wall-clock seconds
    sa.Column("last_active", sa.Float, nullable=False),
)
posts_table = sa.Table(
    "posts", metadata,
    sa.Column("post_id", sa.String(32), primary_key=True),
    sa.Column("code", sa.String(8), sa.ForeignKey("classes.code", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("position", sa.Integer, nullable=False),          # posting order
    sa.Column("name", sa.String(160), nullable=False),
    sa.Column("run_id", sa.String(32), nullable=False, index=True),
    sa.Column("post_key", sa.LargeBinary, nullable=False),
    sa.Column("run_key", sa.LargeBinary, nullable=False),
    sa.Column("learner", sa.LargeBinary, nullable=False),       # keys.tag under the class's salt
    sa.Column("corpus", sa.String(300), nullable=False),
    sa.Column("record", sa.JSON, nullable=False),
    sa.Column("sample", sa.Text, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("step", sa.Integer, nullable=False),
    sa.Column("hidden", sa.Boolean, nullable=False),
)
answers_table = sa.Table(
    "answers", metadata,
    sa.Column("code", sa.String(8), sa.ForeignKey("classes.code", ondelete="CASCADE"), primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),
    sa.Column("learner", sa.LargeBinary(32), primary_key=True),
    sa.Column("option", sa.Integer, nullable=False),
)
corpora_table = sa.Table(
    "corpora", metadata,
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("text", sa.Text, nullable=False),
)
runs_table = sa.Table(
    "runs", metadata,
    sa.Column("run_id", sa.String(32), primary_key=True),
    sa.Column("owner_key", sa.LargeBinary, nullable=False),
    sa.Column("recipe", sa.JSON, nullable=False),               # what rebuilds it: configs, vocabulary, probe
    sa.Column("corpus_sha256", sa.String(64), sa.ForeignKey("corpora.sha256"), nullable=False),
    sa.Column("corpus_label", sa.String(300), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("step", sa.Integer, nullable=False),
    sa.Column("elapsed", sa.Float, nullable=False),
    sa.Column("tokens_per_sec", sa.Float, nullable=False),
    sa.Column("stopped_early", sa.Boolean, nullable=False),
    sa.Column("error", sa.JSON),
    sa.Column("line_order", sa.Integer),                        # its place in line while it waits
    sa.Column("start_paused", sa.Boolean, nullable=False),
    sa.Column("checkpoint_step", sa.Integer),                   # its newest checkpoint's step
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("last_seen", sa.Float, nullable=False),
)
events_table = sa.Table(
    "run_events", metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),
    sa.Column("event", sa.JSON, nullable=False),
)
evals_table = sa.Table(
    "run_evals", metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),
    sa.Column("train_loss", sa.Float, nullable=False),
    sa.Column("val_loss", sa.Float, nullable=False),
    sa.Column("sample", sa.Text, nullable=False),
)
blobs_table = sa.Table(  # checkpoints inside the database (any database but SQLite's file)
    "checkpoint_files", metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("data", sa.LargeBinary, nullable=False),
)
records_table = sa.Table(  # runs kept for comparison (lab.run_records.RunShelf)
    "kept_records", metadata,
    sa.Column("record_id", sa.String(32), primary_key=True),
    sa.Column("record", sa.JSON, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)


# -------------------------------------------------------------------------------------- migrations
def _v1_classes(md: sa.MetaData) -> sa.Table:
    """The classes table as version 1 had it: the lesson (step, revealed, every answer) in one JSON
    value, which every answer rewrote whole."""
    return sa.Table(
        "classes", md,
        sa.Column("code", sa.String(8), primary_key=True),
        sa.Column("teacher_key", sa.LargeBinary, nullable=False),
        sa.Column("salt", sa.LargeBinary, nullable=False),
        sa.Column("challenge", sa.JSON),
        sa.Column("pinned", sa.String(32)),
        sa.Column("lesson", sa.JSON, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("last_active", sa.Float, nullable=False),
    )


def create_version_1(connection: sa.Connection) -> None:
    """The schema as version 1 made it (the migration's starting point, and its test's)."""
    md = sa.MetaData()
    _v1_classes(md)
    for table in (meta_table, posts_table, corpora_table, runs_table, events_table, evals_table, blobs_table,
                  records_table):
        table.to_metadata(md)
    md.create_all(connection)
    connection.execute(sa.insert(meta_table.to_metadata(sa.MetaData())).values(name="schema_version", value="1"))


def _migrate_1_to_2(connection: sa.Connection) -> None:
    """The answers move out of the classes' lesson value into rows of their own (thirty learners
    answering at once no longer rewrite one row); the lesson's step and reveals get columns."""
    old = _v1_classes(sa.MetaData())
    rows = connection.execute(sa.select(old.c.code, old.c.lesson)).all()
    answers_table.create(connection)
    connection.execute(sa.text("ALTER TABLE classes ADD COLUMN lesson_step INTEGER"))
    connection.execute(sa.text("ALTER TABLE classes ADD COLUMN revealed JSON"))
    for code, lesson in rows:
        lesson = lesson or {}
        connection.execute(sa.update(classes_table).where(classes_table.c.code == code).values(
            lesson_step=lesson.get("step"), revealed=list(lesson.get("revealed", []))))
        answers = [{"code": code, "step": int(step), "learner": bytes.fromhex(learner), "option": int(option)}
                   for step, given in (lesson.get("answers") or {}).items() for learner, option in given.items()]
        if answers:
            connection.execute(sa.insert(answers_table), answers)
    connection.execute(sa.text("ALTER TABLE classes DROP COLUMN lesson"))


MIGRATIONS: dict[int, Callable[[sa.Connection], None]] = {1: _migrate_1_to_2}  # from version N to N + 1


def schema_version(connection: sa.Connection) -> int | None:
    """The database's schema version; None for a database with none of our tables."""
    if not sa.inspect(connection).has_table(meta_table.name):
        return None
    value = connection.execute(sa.select(meta_table.c.value).where(meta_table.c.name == "schema_version")).scalar()
    return int(value) if value is not None else None


def migrate(engine: sa.Engine) -> int:
    """Make the database's schema the current one: create it, or run each migration from its version,
    in one transaction that holds the database's write lock (DDL is transactional in PostgreSQL, and
    in SQLite as the store drives it: see _sqlite_begin). Returns the version it found (0: a new
    database). StoreError for a version newer than this code's. The version is read first without
    writing: a newer or damaged database is never written to."""
    with engine.connect() as connection:
        found = schema_version(connection)
    if found is not None and found > SCHEMA_VERSION:
        raise _newer(found)
    if found == SCHEMA_VERSION:
        return found
    with writing(engine) as connection:
        if connection.dialect.name == "postgresql":  # two servers starting at once: one makes it, the other waits
            connection.execute(sa.select(sa.func.pg_advisory_xact_lock(MIGRATION_LOCK)))
        found = schema_version(connection)  # again, under the lock: another process may have made it meanwhile
        if found is None:
            metadata.create_all(connection)
            connection.execute(sa.insert(meta_table).values(name="schema_version", value=str(SCHEMA_VERSION)))
            return 0
        if found > SCHEMA_VERSION:
            raise _newer(found)
        for version in range(found, SCHEMA_VERSION):
            MIGRATIONS[version](connection)
        if found < SCHEMA_VERSION:
            connection.execute(sa.update(meta_table).where(meta_table.c.name == "schema_version")
                               .values(value=str(SCHEMA_VERSION)))
        return found


def _newer(found: int) -> StoreError:
    return StoreError("The database's schema is version {found}, written by a newer MiniGPT Lab than this one "
                      "(version {ours}). Update the app, or point it at another database: this one is left as it "
                      "is.", found=found, ours=SCHEMA_VERSION)


def writing(engine: sa.Engine):
    """A transaction that writes: in SQLite it takes the write lock at its start (BEGIN IMMEDIATE), so
    that a transaction which reads and then writes never meets another writer halfway, which SQLite
    would refuse at once instead of waiting its busy timeout."""
    return engine.execution_options(minigpt_write=True).begin()


# ------------------------------------------------------------------------------------ rows as read
@dataclass
class StoredClass:
    code: str
    teacher_key: bytes
    salt: bytes
    challenge: dict | None
    pinned: str | None
    lesson_step: int | None
    revealed: list[int]
    last_active: float                 # wall clock
    posts: list[dict] = field(default_factory=list)
    answers: dict[int, dict[bytes, int]] = field(default_factory=dict)


@dataclass
class StoredRunRow:
    """A run as the store has it: enough to show it, and (with its checkpoint) to train it on."""

    run_id: str
    owner_key: bytes
    recipe: dict
    text: str
    corpus_label: str
    state: str
    step: int
    elapsed: float
    tokens_per_sec: float
    stopped_early: bool
    error: dict | None
    line_order: int | None
    start_paused: bool
    checkpoint_step: int | None
    history: list[TrainEvent]
    evals: list[EvalRecord]


# ------------------------------------------------------------------------------------------ store
class Store:
    """The server's database. Thread-safe; see the module docstring."""

    def __init__(self, engine: sa.Engine, *, checkpoint_dir: str | Path | None = None,
                 retention: Retention = Retention(), clock: Callable[[], float] = time.time,
                 open_wait: float | None = None) -> None:
        """`checkpoint_dir`: where checkpoints are written as folders (SQLite's default, beside its
        file); None keeps them in the database. `open_wait`: how many seconds this waits for the
        database to open (None: until it has opened or failed); past them it goes on opening behind,
        and `problem` says so meanwhile."""
        self.engine, self.retention, self._clock = engine, retention, clock
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self._queue: queue.Queue[_Write | None] = queue.Queue()
        self._pending = 0
        self._lock = threading.Lock()
        self._problem: Message | StoreError | None = None
        self._opened = False
        self._refused = False    # a schema newer than ours: never written to
        self._reads_after = 0.0  # a read that failed: the next tries wait until then
        self._reopening = False
        self._next_open = 0.0
        self._last_tidy = float("-inf")
        self._thread: threading.Thread | None = None
        self._closing = False
        if engine.dialect.name == "sqlite":
            sa.event.listen(engine, "connect", _sqlite_settings)
            sa.event.listen(engine, "begin", _sqlite_begin)
        atexit.register(_flush_at_exit, weakref.ref(self))  # a server stopped in order writes what it queued
        self._open_first(open_wait)
        self._thread = threading.Thread(target=self._write_loop, name="minigpt-store", daemon=True)
        self._thread.start()

    def _open_first(self, wait: float | None) -> None:
        """Open the database on a thread, as a reopening does, and wait for it `wait` seconds at most: a
        server's first page waits for a locked or slow database no longer than an action does. The
        opening goes on behind the page, which meanwhile says that results are not being saved."""
        with self._lock:
            self._reopening, self._next_open = True, time.monotonic() + REOPEN_SECONDS
        opening = threading.Thread(target=self._reopen, name="minigpt-store-open", daemon=True)
        opening.start()
        opening.join(wait)
        with self._lock:
            waiting = not self._opened and self._problem is None  # neither open nor failed yet
            if waiting:
                self._problem = Message("the database has not answered yet; trying again.")
        if waiting:
            LOG.warning("The database has not answered within %s s; it goes on being opened.", wait)

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Store:
        """A store on `url` (an SQLAlchemy URL); with SQLite, checkpoints beside its file."""
        engine = create_engine(url)
        if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
            kwargs.setdefault("checkpoint_dir", Path(engine.url.database).parent / "checkpoints")
        return cls(engine, **kwargs)

    # -- health ------------------------------------------------------------------------------
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
            if due:
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
            if self._opened or self._closing:
                return self._opened
        try:
            migrate(self.engine)
            if self.engine.dialect.name == "sqlite":
                _wal(self.engine)
        except StoreError as err:
            self._refused = True
            self._fault(err, reopen=float("inf"))  # a newer schema: never written
            return False
        except Exception as err:  # noqa: BLE001 - unreachable, locked, corrupt: said, and tried again later
            self._fault(err, reopen=REOPEN_SECONDS)
            return False
        with self._lock:
            self._opened, self._problem = True, None
        return True

    def close(self) -> None:
        """Write what is queued (a few seconds at most), then stop the writer and free the engine."""
        if self._closing:
            return
        self.flush(timeout=5.0)
        self._closing = True
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(5.0)
        self.engine.dispose()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued so far is in the database: True, or False after `timeout`."""
        if not self._opened:
            return False
        done = threading.Event()
        self._queue.put(_Write(lambda connection: None, done=done))
        return done.wait(timeout)

    def _fault(self, err: BaseException, reopen: float | None = None) -> None:
        """Say a fault on the pages, in the store's own words; the driver's words go to the server's log,
        once for each new fault rather than at every try."""
        problem = describe(err)
        if problem != self.problem:
            log_fault(err)
        self._set_problem(problem, reopen)

    def _set_problem(self, problem: Message | StoreError | None, reopen: float | None = None) -> None:
        with self._lock:
            self._problem = problem
            if reopen is not None:
                self._next_open = time.monotonic() + reopen

    # -- the writer --------------------------------------------------------------------------
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
        write = _Write(operation, done=threading.Event() if wait else None)
        self._queue.put(write)  # queued even while the database is away: written, in order, once it answers
        if not self.ready:  # not in the database now; it will be, in its turn, once the database answers
            return False
        return write.done.wait(WAIT_SECONDS) and write.ok if write.done is not None else True

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            item.ok = False  # until it is in the database
            while not self._closing:
                if not self._opened:  # away, or never opened yet: open it here, then write what waited
                    if self._refused:
                        break
                    if time.monotonic() < self._next_open or not self.open():
                        time.sleep(RETRY_SECONDS)
                        continue
                try:
                    with writing(self.engine) as connection:
                        item.operation(connection)
                except TRANSIENT as err:  # said on the pages; the same write is tried again, the rest wait their turn
                    self._fault(err)
                    time.sleep(RETRY_SECONDS)
                    continue
                except Exception as err:  # noqa: BLE001 - refused for good (its run erased meanwhile): dropped, said
                    self._fault(err)
                    break
                item.ok = True
                if self._problem is not None:
                    self._set_problem(None)
                break
            with self._lock:
                self._pending = max(0, self._pending - 1)
            if item.done is not None:
                item.done.set()
            if self._queue.empty() and self._clock() - self._last_tidy > TIDY_SECONDS:
                self._last_tidy = self._clock()
                with contextlib.suppress(Exception), writing(self.engine) as connection:  # noqa: SIM117
                    self._tidy(connection)

    def _read(self, query: Callable[[sa.Connection], Any], default: Any) -> Any:
        """Run a read on the caller's thread; `default` (and `problem` said) when the database fails, and
        for RETRY_SECONDS after: a page that reads many runs waits for a database that is away once."""
        if not self.ready or time.monotonic() < self._reads_after:
            return default
        try:
            with self.engine.connect() as connection:
                return query(connection)
        except Exception as err:  # noqa: BLE001
            self._fault(err)
            self._reads_after = time.monotonic() + RETRY_SECONDS
            return default

    # -- classes -----------------------------------------------------------------------------
    def save_class(self, code: str, teacher_key: bytes, salt: bytes, last_active: float) -> bool:
        """A new class; `last_active` in wall-clock seconds."""
        now = self._clock()
        values = {"code": code, "teacher_key": teacher_key, "salt": salt, "challenge": None, "pinned": None,
                  "lesson_step": None, "revealed": [], "created": now, "last_active": last_active}
        return self.write(lambda c: c.execute(sa.insert(classes_table).values(**values)), wait=True)

    def update_class(self, code: str, *, wait: bool = True, **values: Any) -> bool:
        """Change a class's columns: challenge, pinned, lesson_step, revealed, last_active."""
        return self.write(lambda c: c.execute(sa.update(classes_table).where(classes_table.c.code == code)
                                              .values(**values)), wait=wait)

    def delete_class(self, code: str, *, with_runs: bool = False) -> bool:
        """A class's rows (its posts and answers with it); with_runs: the runs posted to it too."""
        def delete(connection: sa.Connection) -> None:
            if with_runs:
                posted = connection.execute(sa.select(posts_table.c.run_id).where(posts_table.c.code == code))
                self._delete_runs(connection, [row[0] for row in posted])
            connection.execute(sa.delete(answers_table).where(answers_table.c.code == code))
            connection.execute(sa.delete(posts_table).where(posts_table.c.code == code))
            connection.execute(sa.delete(classes_table).where(classes_table.c.code == code))
        return self.write(delete, wait=True)

    def save_post(self, code: str, post: dict) -> bool:
        """Insert or replace a post (the columns of posts_table, code aside)."""
        values = {**post, "code": code}
        return self.write(lambda c: _upsert(c, posts_table, values, ["post_id"]), wait=True)

    def update_post(self, post_id: str, *, wait: bool = False, **values: Any) -> bool:
        return self.write(lambda c: c.execute(sa.update(posts_table).where(posts_table.c.post_id == post_id)
                                              .values(**values)), wait=wait)

    def delete_post(self, post_id: str) -> bool:
        return self.write(lambda c: c.execute(sa.delete(posts_table).where(posts_table.c.post_id == post_id)),
                          wait=True)

    def save_answer(self, code: str, step: int, learner: bytes, option: int | None) -> bool:
        where = (answers_table.c.code == code) & (answers_table.c.step == step) & (answers_table.c.learner == learner)

        def answer(connection: sa.Connection) -> None:
            connection.execute(sa.delete(answers_table).where(where))
            if option is not None:
                connection.execute(sa.insert(answers_table).values(code=code, step=step, learner=learner,
                                                                   option=option))
        return self.write(answer, wait=True)

    def load_classes(self) -> list[StoredClass]:
        """Every class that has not ended, with its posts (in posting order) and answers."""
        cutoff = self._clock() - self.retention.class_hours * 3600

        def query(connection: sa.Connection) -> list[StoredClass]:
            found = {}
            for row in connection.execute(sa.select(classes_table).where(classes_table.c.last_active >= cutoff)):
                found[row.code] = StoredClass(row.code, row.teacher_key, row.salt, row.challenge, row.pinned,
                                              row.lesson_step, list(row.revealed or []), row.last_active)
            for row in connection.execute(sa.select(posts_table).order_by(posts_table.c.position)):
                if row.code in found:
                    found[row.code].posts.append(dict(row._mapping))
            for row in connection.execute(sa.select(answers_table)):
                if row.code in found:
                    found[row.code].answers.setdefault(row.step, {})[row.learner] = row.option
            return list(found.values())
        return self._read(query, [])

    # -- runs --------------------------------------------------------------------------------
    def save_run(self, run_id: str, owner_key: bytes, recipe: dict, text: str, corpus_label: str, *,
                 line_order: int | None, start_paused: bool, max_steps: int) -> bool:
        """A new run, waiting in line: its recipe and corpus (kept once per text)."""
        import hashlib

        sha = hashlib.sha256(text.encode()).hexdigest()
        now = self._clock()
        row = {"run_id": run_id, "owner_key": owner_key, "recipe": recipe, "corpus_sha256": sha,
               "corpus_label": corpus_label, "state": "waiting", "step": 0, "elapsed": 0.0, "tokens_per_sec": 0.0,
               "stopped_early": False, "error": None, "line_order": line_order, "start_paused": start_paused,
               "checkpoint_step": None, "created": now, "last_seen": now}

        def insert(connection: sa.Connection) -> None:
            _insert_missing(connection, corpora_table, {"sha256": sha, "text": text}, ["sha256"])
            connection.execute(sa.insert(runs_table).values(**row))
        return self.write(insert, wait=True)

    def update_run(self, run_id: str, *, wait: bool = False, **values: Any) -> bool:
        """Change a run's columns (state, step, elapsed, tokens_per_sec, stopped_early, error, line_order,
        last_seen)."""
        return self.write(lambda c: c.execute(sa.update(runs_table).where(runs_table.c.run_id == run_id)
                                              .values(**values)), wait=wait)

    def add_history(self, run_id: str, events: Iterable[TrainEvent], evals: Iterable[EvalRecord]) -> bool:
        """A run's newly logged steps and evaluations (a step written again replaces itself: a resumed
        run logs the steps after its checkpoint anew)."""
        events = [{"run_id": run_id, "step": e.step, "event": _event_json(e)} for e in events]
        evals = [{"run_id": run_id, "step": r.step, "train_loss": _finite(r.train_loss),
                  "val_loss": _finite(r.val_loss), "sample": r.sample} for r in evals]
        if not events and not evals:
            return True

        def insert(connection: sa.Connection) -> None:
            for values in events:
                _upsert(connection, events_table, values, ["run_id", "step"])
            for values in evals:
                _upsert(connection, evals_table, values, ["run_id", "step"])
        return self.write(insert, history=True)

    def forget_after(self, run_id: str, step: int) -> bool:
        """A run resumed from its checkpoint at `step`: what it logged after that step goes (it logs it
        again)."""
        def delete(connection: sa.Connection) -> None:
            connection.execute(sa.delete(events_table).where((events_table.c.run_id == run_id)
                                                             & (events_table.c.step > step)))
            connection.execute(sa.delete(evals_table).where((evals_table.c.run_id == run_id)
                                                            & (evals_table.c.step > step)))
        return self.write(delete, wait=True)

    def save_checkpoint(self, run_id: str, step: int, files: dict[str, bytes]) -> bool:
        """A run's checkpoint at `step` (checkpoint_files' dict): the run keeps retention.checkpoints."""
        if not _RUN_ID.fullmatch(run_id):
            raise ValueError(f"not a run id: {run_id!r}")
        keep = max(1, self.retention.checkpoints)

        def save(connection: sa.Connection) -> None:
            if self.checkpoint_dir is not None:
                from ...checkpoint import save_step_files  # torch, only once a run has trained

                save_step_files(self.checkpoint_dir / run_id, step, files, keep=keep)
            else:
                where = (blobs_table.c.run_id == run_id) & (blobs_table.c.step == step)
                connection.execute(sa.delete(blobs_table).where(where))
                connection.execute(sa.insert(blobs_table), [{"run_id": run_id, "step": step, "name": name,
                                                              "data": data} for name, data in files.items()])
                steps = [row[0] for row in connection.execute(
                    sa.select(blobs_table.c.step).where(blobs_table.c.run_id == run_id).distinct()
                    .order_by(blobs_table.c.step.desc()))]
                if len(steps) > keep:
                    connection.execute(sa.delete(blobs_table).where((blobs_table.c.run_id == run_id)
                                                                    & blobs_table.c.step.in_(steps[keep:])))
            connection.execute(sa.update(runs_table).where(runs_table.c.run_id == run_id)
                               .values(checkpoint_step=step))
        return self.write(save)

    def checkpoint_step(self, run_id: str) -> int | None:
        """The step of a run's newest checkpoint, the one load_checkpoint reads; None without one."""
        if not _RUN_ID.fullmatch(run_id):
            return None
        if self.checkpoint_dir is not None:
            from ...checkpoint import latest_checkpoint

            folder = latest_checkpoint(self.checkpoint_dir / run_id)
            return int(folder.name.split("-")[1]) if folder is not None else None
        return self._read(lambda c: c.execute(sa.select(sa.func.max(blobs_table.c.step))
                                              .where(blobs_table.c.run_id == run_id)).scalar(), None)

    def load_checkpoint(self, run_id: str) -> tuple[int, dict[str, bytes]] | None:
        """A run's newest checkpoint: its step and files, or None."""
        if not _RUN_ID.fullmatch(run_id):
            return None
        if self.checkpoint_dir is not None:
            from ...checkpoint import latest_checkpoint

            try:
                folder = latest_checkpoint(self.checkpoint_dir / run_id)
                if folder is None:
                    return None
                return int(folder.name.split("-")[1]), {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
            except OSError as err:
                self._fault(err)
                return None

        def query(connection: sa.Connection) -> tuple[int, dict[str, bytes]] | None:
            step = connection.execute(sa.select(sa.func.max(blobs_table.c.step))
                                      .where(blobs_table.c.run_id == run_id)).scalar()
            if step is None:
                return None
            rows = connection.execute(sa.select(blobs_table.c.name, blobs_table.c.data).where(
                (blobs_table.c.run_id == run_id) & (blobs_table.c.step == step)))
            return step, {name: bytes(data) for name, data in rows}
        return self._read(query, None)

    def load_run(self, run_id: str) -> StoredRunRow | None:
        """A run with its history, or None where the store does not have it."""
        if not _RUN_ID.fullmatch(run_id or ""):
            return None
        return self._read(lambda c: _load_runs(c, runs_table.c.run_id == run_id)[:1] or [None], [None])[0]

    def waiting_runs(self) -> list[StoredRunRow]:
        """The runs that were waiting in line, first in line first."""
        return self._read(lambda c: _load_runs(c, runs_table.c.line_order.is_not(None)
                                               & runs_table.c.state.in_(("waiting", "starting"))), [])

    def seen(self, run_ids: Iterable[str]) -> bool:
        """Their owners opened these runs now (retention counts from it)."""
        ids, now = list(run_ids), self._clock()
        if not ids:
            return True
        return self.write(lambda c: c.execute(sa.update(runs_table).where(runs_table.c.run_id.in_(ids))
                                              .values(last_seen=now)))

    def max_post_position(self) -> int:
        return self._read(lambda c: c.execute(sa.select(sa.func.max(posts_table.c.position))).scalar() or 0, 0)

    def max_line_order(self) -> int:
        return self._read(lambda c: c.execute(sa.select(sa.func.max(runs_table.c.line_order))).scalar() or 0, 0)

    def delete_runs(self, run_ids: list[str]) -> bool:
        return self.write(lambda c: self._delete_runs(c, run_ids), wait=True)

    def _delete_runs(self, connection: sa.Connection, run_ids: list[str]) -> None:
        if not run_ids:
            return
        for table in (events_table, evals_table, blobs_table):
            connection.execute(sa.delete(table).where(table.c.run_id.in_(run_ids)))
        connection.execute(sa.delete(runs_table).where(runs_table.c.run_id.in_(run_ids)))
        if self.checkpoint_dir is not None:
            import shutil

            for run_id in run_ids:
                if _RUN_ID.fullmatch(run_id):
                    shutil.rmtree(self.checkpoint_dir / run_id, ignore_errors=True)

    # -- comparisons -------------------------------------------------------------------------
    def save_record(self, record: RunRecord) -> bool:
        values = {"record_id": record.record_id, "record": record_json(record), "created": self._clock()}
        return self.write(lambda c: _upsert(c, records_table, values, ["record_id"]), wait=True)

    def load_records(self, record_ids: list[str]) -> list[RunRecord]:
        """The kept records of these ids that the store has, in the order asked."""
        ids = [i for i in record_ids if _RUN_ID.fullmatch(i)]
        if not ids:
            return []

        def query(connection: sa.Connection) -> list[RunRecord]:
            rows = dict(connection.execute(sa.select(records_table.c.record_id, records_table.c.record)
                                           .where(records_table.c.record_id.in_(ids))).all())
            return [record_from_json(rows[i]) for i in ids if i in rows]
        return self._read(query, [])

    # -- retention ---------------------------------------------------------------------------
    def tidy(self) -> bool:
        """Delete what retention lets go: ended classes, runs on no board unseen for run_days (with
        their checkpoints), kept records as old, and corpora no run uses. The writer does it every
        TIDY_SECONDS by itself."""
        return self.write(self._tidy, wait=True)

    def _tidy(self, connection: sa.Connection) -> None:
        now = self._clock()
        class_cutoff = now - self.retention.class_hours * 3600
        run_cutoff = now - self.retention.run_days * 86400
        ended = [row[0] for row in connection.execute(
            sa.select(classes_table.c.code).where(classes_table.c.last_active < class_cutoff))]
        for code in ended:
            connection.execute(sa.delete(answers_table).where(answers_table.c.code == code))
            connection.execute(sa.delete(posts_table).where(posts_table.c.code == code))
            connection.execute(sa.delete(classes_table).where(classes_table.c.code == code))
        posted = sa.select(posts_table.c.run_id)
        old = [row[0] for row in connection.execute(
            sa.select(runs_table.c.run_id).where((runs_table.c.last_seen < run_cutoff)
                                                 & runs_table.c.run_id.not_in(posted)))]
        self._delete_runs(connection, old)
        connection.execute(sa.delete(records_table).where(records_table.c.created < run_cutoff))
        connection.execute(sa.delete(corpora_table).where(
            corpora_table.c.sha256.not_in(sa.select(runs_table.c.corpus_sha256))))

    def size_on_disk(self) -> int | None:
        """Bytes the store takes on disk (SQLite: its files and the checkpoint folders); None elsewhere."""
        if self.engine.dialect.name != "sqlite" or not self.engine.url.database:
            return None
        main = Path(self.engine.url.database)
        files = [main, main.with_name(main.name + "-wal"), main.with_name(main.name + "-shm")]
        total = sum(p.stat().st_size for p in files if p.exists())
        if self.checkpoint_dir is not None and self.checkpoint_dir.exists():
            total += sum(p.stat().st_size for p in self.checkpoint_dir.rglob("*") if p.is_file())
        return total


def _flush_at_exit(ref: weakref.ref[Store]) -> None:
    store = ref()
    if store is not None and store._opened and not store._closing:
        store.flush(timeout=5.0)


@dataclass
class _Write:
    operation: Callable[[sa.Connection], None]
    done: threading.Event | None = None
    ok: bool = True  # False: the database refused it for good


# ------------------------------------------------------------------------------------------ helpers
def create_engine(url: str, **kwargs: Any) -> sa.Engine:
    """An engine for `url`; StoreError naming the package to install where its driver is missing. A
    PostgreSQL server that does not answer is given up after CONNECT_SECONDS, not the system's minutes."""
    try:
        if sa.engine.make_url(url).get_backend_name() == "postgresql":
            kwargs["connect_args"] = {"connect_timeout": CONNECT_SECONDS, **kwargs.get("connect_args", {})}
        return sa.create_engine(url, **kwargs)
    except (ModuleNotFoundError, ImportError, sa.exc.NoSuchModuleError) as err:
        raise driver_missing(url, err) from None
    except sa.exc.ArgumentError as err:
        raise StoreError("The database URL is not one SQLAlchemy understands ({error}).", error=str(err)) from None


DRIVERS = {"psycopg": "psycopg[binary]", "psycopg2": "psycopg2-binary", "pymysql": "PyMySQL", "asyncpg": "asyncpg",
           "mysqldb": "mysqlclient", "pg8000": "pg8000"}


def driver_missing(url: str, err: Exception) -> StoreError:
    """The error for a URL whose driver is not installed, naming what installs it."""
    try:
        parsed = sa.engine.make_url(url)
        driver = parsed.get_driver_name()
    except Exception:  # noqa: BLE001
        driver = getattr(err, "name", None) or str(err)
    return StoreError("The database URL needs the driver {driver}, which is not installed here. Install it (pip "
                      "install \"{package}\") and restart, or use another URL.", driver=driver,
                      package=DRIVERS.get(driver, driver))


def describe(err: BaseException) -> Message | StoreError:
    """A database fault as a sentence for the page, in our own words (the app translates them): the
    driver's words are English whatever the page's language, and they go to the server's log."""
    if isinstance(err, StoreError):
        return err
    if isinstance(err, sa.exc.ArgumentError):  # st.connection's create_engine refused the secrets' URL
        return Message("the database URL is not one SQLAlchemy understands.")
    lowered = _words(err).lower()
    if "locked" in lowered or "busy" in lowered:
        return Message("the database is busy (locked by another process); trying again.")
    if "full" in lowered or "no space" in lowered:
        return Message("the database's disk is full.")
    if "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
        return Message("the database file is damaged. It is left as it is; point the app at another database or "
                       "restore a copy.")
    if any(words in lowered for words in ("readonly", "read-only", "permission denied")):
        return Message("the database cannot be written: its file, or the folder it is in, is read-only here.")
    return Message("the database does not answer.")


def log_fault(err: BaseException) -> None:
    """Put what the driver (or the system) said of a fault in the server's log, where whoever runs the
    server reads it; the page says it in our words (describe)."""
    LOG.warning("Results are not being saved: %s", driver_words(err))


def driver_words(err: BaseException) -> str:
    """What the database's driver (or the system) said of a fault: for the server's log, never a page."""
    text = _words(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _words(err: BaseException) -> str:
    text = str(getattr(err, "orig", None) or err).strip()
    return text.splitlines()[0][:500] if text else ""


def _sqlite_settings(dbapi_connection, _record) -> None:
    """A busy timeout (a write waits its turn instead of failing), commits that a killed process cannot
    undo (WAL with synchronous NORMAL: not a power cut), foreign keys; and the transactions are the
    store's own (_sqlite_begin), not the driver's, which commits before any DDL. None of it writes to
    the file: a database that turns out to be newer or damaged is left as it was."""
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def _sqlite_begin(connection: sa.Connection) -> None:
    """SQLAlchemy's recipe for SQLite's own transactions; a write takes the write lock at once (writing)."""
    connection.exec_driver_sql("BEGIN IMMEDIATE" if connection.get_execution_options().get("minigpt_write")
                               else "BEGIN")


def _wal(engine: sa.Engine) -> None:
    """Write-ahead logging, once the database is known to be ours (it stays set in the file): readers
    never wait for the writer, and a kill leaves the last commit."""
    raw = engine.raw_connection()
    try:
        raw.driver_connection.execute("PRAGMA journal_mode = WAL")
    finally:
        raw.close()


def _upsert(connection: sa.Connection, table: sa.Table, values: dict, keys: list[str]) -> None:
    dialect = {"sqlite": sqlite, "postgresql": postgresql}.get(connection.dialect.name)
    if dialect is None:  # any other database: delete and insert, in the same transaction
        where = sa.and_(*(table.c[k] == values[k] for k in keys))
        connection.execute(sa.delete(table).where(where))
        connection.execute(sa.insert(table).values(**values))
        return
    statement = dialect.insert(table).values(**values)
    changes = {k: v for k, v in values.items() if k not in keys}
    connection.execute(statement.on_conflict_do_update(index_elements=keys, set_=changes) if changes
                       else statement.on_conflict_do_nothing(index_elements=keys))


def _insert_missing(connection: sa.Connection, table: sa.Table, values: dict, keys: list[str]) -> None:
    dialect = {"sqlite": sqlite, "postgresql": postgresql}.get(connection.dialect.name)
    if dialect is not None:
        connection.execute(dialect.insert(table).values(**values).on_conflict_do_nothing(index_elements=keys))
    elif connection.execute(sa.select(table).where(sa.and_(*(table.c[k] == values[k] for k in keys)))).first() is None:
        connection.execute(sa.insert(table).values(**values))


def _load_runs(connection: sa.Connection, where) -> list[StoredRunRow]:
    from ...train import TrainEvent
    from ..runs.run import EvalRecord

    rows = connection.execute(sa.select(runs_table, corpora_table.c.text)
                              .join(corpora_table, corpora_table.c.sha256 == runs_table.c.corpus_sha256)
                              .where(where).order_by(runs_table.c.line_order, runs_table.c.created)).all()
    out = []
    for row in rows:
        events = connection.execute(sa.select(events_table.c.event).where(events_table.c.run_id == row.run_id)
                                    .order_by(events_table.c.step)).scalars()
        evals = connection.execute(sa.select(evals_table).where(evals_table.c.run_id == row.run_id)
                                   .order_by(evals_table.c.step))
        out.append(StoredRunRow(
            row.run_id, row.owner_key, row.recipe, row.text, row.corpus_label, row.state, row.step, row.elapsed,
            row.tokens_per_sec, row.stopped_early, row.error, row.line_order, row.start_paused, row.checkpoint_step,
            [TrainEvent(**_event_values(e)) for e in events],
            [EvalRecord(r.step, _number(r.train_loss), _number(r.val_loss), r.sample) for r in evals]))
    return out


def _event_json(event: TrainEvent) -> dict:
    return {k: _finite(v) if isinstance(v, float) else v for k, v in asdict(event).items()}


def _event_values(data: dict) -> dict:
    return {k: _number(v) if k in ("train_loss", "val_loss", "train_eval_loss") else v for k, v in data.items()}


def _finite(value: float | None) -> float | str | None:
    """JSON and PostgreSQL's float columns take no NaN or infinity: those travel as text."""
    if value is None or math.isfinite(value):
        return value
    return str(value)


def _number(value):
    return float(value) if isinstance(value, str) else value


def record_json(record: RunRecord) -> dict:
    """A kept record as JSON; a loss that is not finite (a run that diverged) travels as text."""
    data = asdict(record)
    data["model"], data["train"] = record.model.to_dict(), record.train.to_dict()
    for name in ("train_loss", "val_loss"):
        data[name] = [_finite(v) for v in data[name]]
    for name in ("elapsed", "tokens_per_sec"):
        data[name] = _finite(data[name])
    return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


def record_from_json(data: dict) -> RunRecord:
    from ...config import GPTConfig, TrainConfig
    from ...lab.run_records import RunRecord

    values = dict(data)
    values["model"], values["train"] = GPTConfig.from_dict(data["model"]), TrainConfig.from_dict(data["train"])
    for name in ("steps", "train_loss", "val_steps", "val_loss"):
        values[name] = tuple(_number(v) for v in data[name])
    values["elapsed"], values["tokens_per_sec"] = _number(data["elapsed"]), _number(data["tokens_per_sec"])
    return RunRecord(**values)

