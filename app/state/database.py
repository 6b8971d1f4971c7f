"""The server's database, through Streamlit's SQL connection: what must outlive the process (the
classes, the runs, the kept comparisons) is written there (minigpt.serve.store.database).

- By default an SQLite file, `minigpt.db`, in the data folder beside the app (`MINIGPT_DATA_DIR`
  moves it), and the runs' checkpoints in `checkpoints/` beside it: a laptop keeps everything across
  restarts with no setup.
- Any SQLAlchemy URL in `.streamlit/secrets.toml`, as `[connections.minigpt]` (`url = "..."`, or
  Streamlit's dialect, host, username... keys): a hosted PostgreSQL on Community Cloud, whose own disk
  does not outlive a reboot; the checkpoints then go into the database too (docs/deploying.md).

A database that cannot be used (a driver that is not installed, unreachable, corrupt, from a newer
version, a data folder that cannot be written) never stops the app: the pages say results are not
being saved, in the page's language, and serve from memory; what went wrong in the system's own
words goes to the server's log.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from minigpt.messages import Message
from minigpt.serve.store.database import (CONNECT_SECONDS, WAIT_SECONDS, Retention, Store, StoreError, describe,
                                  driver_missing, log_fault)

from app.chrome.i18n import _, error_text

CONNECTION = "minigpt"                # [connections.minigpt] in .streamlit/secrets.toml
DATA_ENV = "MINIGPT_DATA_DIR"         # where the default SQLite file and its checkpoints live
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "data"
DATABASE_FILE = "minigpt.db"
RUN_DAYS_ENV = "MINIGPT_KEEP_RUN_DAYS"            # days a run on no board is kept after its owner last opened it
CHECKPOINTS_ENV = "MINIGPT_KEEP_CHECKPOINTS"      # checkpoints kept per run


@dataclass(frozen=True)
class Database:
    """The store, or None where none could be made, and why not."""

    store: Store | None
    reason: Message | StoreError | None = None

    @property
    def problem(self) -> Message | StoreError | None:
        return self.store.problem if self.store is not None else self.reason


def data_dir() -> Path:
    return Path(os.environ.get(DATA_ENV) or DEFAULT_DATA_DIR)


def writable_data_dir() -> Path:
    """The data folder, made if need be; StoreError where this server cannot write there (a read-only
    disk or folder, a file in the way), which SQLite would only call a file it cannot open."""
    folder = data_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(f"the data folder {folder} is not writable by this server's user")
    except OSError as err:
        log_fault(err)  # the path and the system's words: for whoever runs the server, not the page
        raise StoreError("the server cannot write to its data folder. Whoever runs it can make the folder "
                         "writable, or set {setting} to another one, and restart the app.", setting=DATA_ENV) from None
    return folder


def retention() -> Retention:
    """The defaults, or the server's settings (docs/deploying.md)."""
    default = Retention()
    try:
        days = float(os.environ.get(RUN_DAYS_ENV, default.run_days))
        kept = int(os.environ.get(CHECKPOINTS_ENV, default.checkpoints))
    except ValueError:
        return default
    return Retention(default.class_hours, days if days > 0 else default.run_days, kept if kept > 0 else default.checkpoints)


def configured() -> dict | None:
    """The connection's settings in the secrets, or None when there are none (no secrets file either)."""
    try:
        connections = st.secrets.get("connections") or {}
        section = connections.get(CONNECTION)
        return dict(section) if section else None
    except Exception:  # noqa: BLE001 - no secrets.toml, or one that cannot be read: the default
        return None


@st.cache_resource(show_spinner=False, on_release=lambda db: db.store is not None and db.store.close())
def database() -> Database:
    """The server's store, opened once per process (its schema made or migrated on the way)."""
    settings = configured()
    url = settings.get("url") if settings else None
    try:
        if settings:
            params = {k: v for k, v in settings.items() if k != "create_engine_kwargs"}  # as read above, once
            engine_kwargs = dict(settings.get("create_engine_kwargs", {}))
            if str(url or settings.get("dialect", "")).startswith("postgresql"):  # given up after seconds, not minutes
                engine_kwargs["connect_args"] = {"connect_timeout": CONNECT_SECONDS,
                                                 **engine_kwargs.get("connect_args", {})}
            connection = st.connection(CONNECTION, type="sql", **params, **engine_kwargs)
            checkpoint_dir = None
            if connection.engine.dialect.name == "sqlite" and connection.engine.url.database:
                checkpoint_dir = Path(connection.engine.url.database).parent / "checkpoints"
        else:
            folder = writable_data_dir()
            connection = st.connection(CONNECTION, type="sql", url=f"sqlite:///{folder / DATABASE_FILE}")
            checkpoint_dir = folder / "checkpoints"
        engine = connection.engine
    except ModuleNotFoundError as err:
        return Database(None, driver_missing(url or str(err), err))
    except StoreError as err:
        return Database(None, err)
    except Exception as err:  # noqa: BLE001 - a URL SQLAlchemy refuses: said in our words, the driver's logged
        log_fault(err)
        return Database(None, describe(err))
    # a locked or slow database keeps the server's first page no longer than an action: it opens behind
    return Database(Store(engine, checkpoint_dir=checkpoint_dir, retention=retention(), open_wait=WAIT_SECONDS))


def store() -> Store | None:
    return database().store


def not_saving_warning() -> None:
    """On Train and the class board: results are not being saved right now, and why."""
    problem = database().problem
    if problem is not None:
        st.warning(_("Results are not being saved right now: {reason} The app goes on from memory; what it holds "
                     "now is lost if the server restarts.", reason=error_text(problem)))
