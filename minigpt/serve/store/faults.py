"""A database fault said twice: in our words for the page (`describe`, which the app translates) and in
the driver's own words for the server's log (`log_fault`). A page never shows the driver's English."""
from __future__ import annotations

import logging

import sqlalchemy as sa

from ...messages import LabError, Message

# the name the server's log has always shown for the store's faults (a logging setup may filter on it),
# kept although the code that logs moved from store.py into this room
LOG = logging.getLogger("minigpt.serve.store")


class StoreError(LabError, RuntimeError):
    """The database cannot be used: why, in a sentence for the page."""


def describe(err: BaseException) -> Message | StoreError:
    """A database fault as a sentence for the page, in our own words (the app translates them): the
    driver's words are English whatever the page's language, and they go to the server's log."""
    if isinstance(err, StoreError):
        return err
    if isinstance(err, sa.exc.ArgumentError):  # st.connection's create_engine refused the secrets' URL
        return Message("the database URL is not one SQLAlchemy understands.")
    # drivers say the same fault in different words (SQLite, psycopg, the OS): matched on a few of them
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
    return Message("the database does not answer.")  # whatever else: unreachable, refused, timed out


def log_fault(err: BaseException) -> None:
    """Put what the driver (or the system) said of a fault in the server's log, where whoever runs the
    server reads it; the page says it in our words (describe)."""
    LOG.warning("Results are not being saved: %s", driver_words(err))


def driver_words(err: BaseException) -> str:
    """What the database's driver (or the system) said of a fault: for the server's log, never a page."""
    text = _words(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _words(err: BaseException) -> str:
    # SQLAlchemy wraps the driver's exception (`orig`) and appends the SQL and a link: only the first line
    # of the driver's own message, bounded, goes on
    text = str(getattr(err, "orig", None) or err).strip()
    return text.splitlines()[0][:500] if text else ""
