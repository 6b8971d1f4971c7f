"""What must outlive the server process, in a real database through SQLAlchemy: the classes (their
posts, answers and the lesson their teacher leads), every run (its recipe, history, samples, state,
its place in line and its checkpoints) and the runs kept for comparison. No Streamlit here: the app
hands in the engine that `st.connection(type="sql")` made; the library and its tests make one with
`create_engine`.

`Store` owns the engine and its one writer, and composes a part for each kind of record, as a session
composes its repositories: `store.classes` (classes.py: classes, posts, answers), `store.runs` (runs.py:
runs and their history), `store.checkpoints` (checkpoints.py), `store.records` (records.py: the runs kept
for comparison). Beside them: the tables of each schema version (schema.py), the steps between them
(migrations.py), the writer thread and the store's health (writer.py), the engine's settings
(engine.py), faults said in our words (faults.py), JSON codecs (codecs.py) and retention (retention.py).

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

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .checkpoints import Checkpoints
from .classes import ClassRows
from .engine import create_engine
from .records import KeptRecords
from .retention import Retention, tidy
from .runs import RunRows
from .writer import Writer

if TYPE_CHECKING:
    from ...messages import Message
    from .faults import StoreError


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
        # one writer for every part: writes of any kind land in the order they were made
        self.writer = Writer(engine, clock=clock, tidy=self._tidy)
        folder = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.checkpoints = Checkpoints(self.writer, folder, retention)
        self.runs = RunRows(self.writer, self.checkpoints, clock)  # a run deleted takes its checkpoints
        self.classes = ClassRows(self.writer, self.runs, retention, clock)  # a class erased may take its runs
        self.records = KeptRecords(self.writer, clock)
        # last, once every part is here: the writer's first retention pass may follow its first write
        self.writer.start(open_wait)

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Store:
        """A store on `url` (an SQLAlchemy URL); with SQLite, checkpoints beside its file."""
        engine = create_engine(url)
        if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
            # the caller's own checkpoint_dir wins, None (in the database) included
            kwargs.setdefault("checkpoint_dir", Path(engine.url.database).parent / "checkpoints")
        return cls(engine, **kwargs)

    @property
    def checkpoint_dir(self) -> Path | None:
        """Where checkpoints are written as folders; None: in the database."""
        return self.checkpoints.folder

    # -- health and the writer (writer.py) -----------------------------------------------------------
    @property
    def problem(self) -> Message | StoreError | None:
        """Why results are not being saved right now, or None when they are."""
        return self.writer.problem

    @property
    def ready(self) -> bool:
        """The database is open at the current schema (asking may start a reopening, see Writer.ready)."""
        return self.writer.ready

    def open(self) -> bool:
        """Open the database now; False (with `problem` set) when it cannot be used."""
        return self.writer.open()

    def close(self) -> None:
        """Write what is queued (a few seconds at most), then stop the writer and free the engine."""
        self.writer.close()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued so far is in the database: True, or False after `timeout`."""
        return self.writer.flush(timeout)

    def write(self, operation: Callable[[sa.Connection], None], *, wait: bool = False, history: bool = False) -> bool:
        """Queue `operation(connection)` on the writer (Writer.write)."""
        return self.writer.write(operation, wait=wait, history=history)

    # -- retention and size --------------------------------------------------------------------------
    def tidy(self) -> bool:
        """Delete what retention lets go: ended classes, runs on no board unseen for run_days (with
        their checkpoints), kept records as old, and corpora no run uses. The writer does it every
        TIDY_SECONDS by itself."""
        return self.writer.write(self._tidy, wait=True)

    def _tidy(self, connection: sa.Connection) -> None:
        # on the writer's thread and in its transaction; the clock is read as the pass runs
        tidy(connection, self.retention, self._clock(), self.classes, self.runs)

    def size_on_disk(self) -> int | None:
        """Bytes the store takes on disk (SQLite: its files and the checkpoint folders); None elsewhere."""
        if self.engine.dialect.name != "sqlite" or not self.engine.url.database:
            return None
        main = Path(self.engine.url.database)
        # WAL mode keeps two files beside the database: recent commits (-wal) and its index (-shm)
        files = [main, main.with_name(main.name + "-wal"), main.with_name(main.name + "-shm")]
        total = sum(p.stat().st_size for p in files if p.exists())
        if self.checkpoint_dir is not None and self.checkpoint_dir.exists():
            total += sum(p.stat().st_size for p in self.checkpoint_dir.rglob("*") if p.is_file())
        return total
