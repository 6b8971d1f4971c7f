"""This process's server (minigpt.serve.open_server), built once from its settings: the store, where
runs train, the line of runs and the classes. Everything else in app/state asks it for those.

What the app adds to the server's own settings (docs/deploying.md, docs/cluster.md):
- the database, through Streamlit's SQL connection: by default an SQLite file, `minigpt.db`, in the
  data folder beside the app (`MINIGPT_DATA_DIR` moves it), and the runs' checkpoints in
  `checkpoints/` beside it, so a laptop keeps everything across restarts with no setup; or any
  SQLAlchemy URL in `.streamlit/secrets.toml` as `[connections.minigpt]` (`url = "..."`, or Streamlit's
  dialect, host, username... keys): a hosted PostgreSQL on Community Cloud, whose own disk does not
  outlive a reboot; the checkpoints then go into the database too;
- a Ray cluster's address in the secrets, as `[cluster] address = "host:port"`, where RAY_ADDRESS is not set.

A database or a cluster that cannot be used never stops the app: the pages say results are not being
saved, or that runs train on this machine, in the page's language, and serve from memory; what went
wrong in the system's own words goes to the server's log.
"""
from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from minigpt.serve import (CONNECT_SECONDS, Database, Placement, Server, ServerSettings,
                           connect_database, open_server, writable_folder)

from app.chrome.i18n import _, error_text
from app.state.corpora import run_facts

CONNECTION = "minigpt"                # [connections.minigpt] in .streamlit/secrets.toml
DATA_ENV = "MINIGPT_DATA_DIR"         # where the default SQLite file and its checkpoints live
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "data"
DATABASE_FILE = "minigpt.db"
CLUSTER_SECTION = "cluster"           # [cluster] address = "host:port" in .streamlit/secrets.toml
REFRESH_SECONDS = 5.0          # a board's redraws while a run on it trains (three times as far apart when none does)
BOARD_CHECK_SECONDS = REFRESH_SECONDS / 2.5  # a board view is checked for moved runs at most this often


@st.cache_resource(show_spinner=False, on_release=lambda server: server.close())
def server() -> Server:
    """The server, built once per process, its store opened (its schema made or migrated on the way)."""
    return open_server(settings(), connection(), facts=run_facts)  # what Train says of a run's corpus, kept with it


def settings() -> ServerSettings:
    """The server's settings: the environment's, the cluster's address from the secrets where it has none."""
    section = _secrets(CLUSTER_SECTION)
    return ServerSettings.from_env(os.environ, ray_address=str(section["address"]) if "address" in section else None,
                                   board_refresh_seconds=BOARD_CHECK_SECONDS)


def store():
    """The store, or None where none could be opened (the pages serve from memory)."""
    return server().store


def placement() -> Placement:
    return server().placement


def data_dir() -> Path:
    return Path(os.environ.get(DATA_ENV) or DEFAULT_DATA_DIR)


def connection() -> Database:
    """Streamlit's SQL connection to the database the secrets name, else the default SQLite file."""
    configured = _secrets("connections").get(CONNECTION)
    params = dict(configured) if configured else None
    url = params.get("url") if params else None

    def make():
        if params:
            kwargs = {k: v for k, v in params.items() if k != "create_engine_kwargs"}  # as read above, once
            engine_kwargs = dict(params.get("create_engine_kwargs", {}))
            if str(url or params.get("dialect", "")).startswith("postgresql"):  # given up after seconds, not minutes
                engine_kwargs["connect_args"] = {"connect_timeout": CONNECT_SECONDS,
                                                 **engine_kwargs.get("connect_args", {})}
            engine = st.connection(CONNECTION, type="sql", **kwargs, **engine_kwargs).engine
            beside = engine.dialect.name == "sqlite" and engine.url.database
            return engine, Path(engine.url.database).parent / "checkpoints" if beside else None
        folder = writable_folder(data_dir(), DATA_ENV)
        engine = st.connection(CONNECTION, type="sql", url=f"sqlite:///{folder / DATABASE_FILE}").engine
        return engine, folder / "checkpoints"

    return connect_database(make, url)


def not_saving_warning() -> None:
    """On Train and the class board: results are not being saved right now, and why."""
    problem = server().store_problem
    if problem is not None:
        st.warning(_("Results are not being saved right now: {reason} The app goes on from memory; what it holds "
                     "now is lost if the server restarts.", reason=error_text(problem)))


def cluster_warning() -> None:
    """On Train: runs were to train on a cluster, and why they train on this machine instead."""
    problem = placement().problem
    if problem is not None:
        st.warning(_("Runs train on this machine, not on the cluster: {reason}", reason=error_text(problem)))


def run_device() -> str | None:
    """The device a new run trains on where that is the cluster's GPUs ("cuda"), else None."""
    return server().run_device()


def _secrets(section: str) -> dict:
    """A section of .streamlit/secrets.toml, or {} (no secrets file, or one that cannot be read)."""
    try:
        return dict(st.secrets.get(section) or {})
    except Exception:  # noqa: BLE001 - no secrets.toml, or one that cannot be read: the defaults
        return {}

