"""How long what the store keeps stays (`Retention`, docs/deploying.md), and the pass that lets the rest
go (`tidy`): the writer runs it by itself every TIDY_SECONDS, when nothing waits to be written."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa

from .schema import classes_table, corpora_table, learner_runs_table, posts_table, records_table, runs_table

# a class lasts a term from the day it opened, unless its teacher closes it first: then its rows leave the store
CLASS_DAYS = 140


@dataclass(frozen=True)
class Retention:
    """How long what the store keeps stays (docs/deploying.md): a class's rows go when it ends, at the
    latest `class_days` after it opened; a run that is on no open class's board, and no learner's in an
    open class, goes `run_days` after its owner last opened it; a run keeps its `checkpoints` newest."""

    class_days: float = CLASS_DAYS
    run_days: float = 7.0
    checkpoints: int = 1


class Rows(Protocol):
    """A kind of record that retention lets go (classes.ClassRows: a class; runs.RunRows: runs), with
    every row that hangs from it. Named here by what it does, so that the parts, which read Retention,
    are imported by nothing of this module."""

    def delete_in(self, connection: sa.Connection, which: Any) -> None: ...


def tidy(connection: sa.Connection, retention: Retention, now: float, classes: Rows, runs: Rows) -> None:
    """Delete, in `connection`'s transaction, what retention lets go at `now` (wall clock): ended classes,
    runs on no board unseen for run_days (with their checkpoints), kept records as old, and corpora no
    run uses."""
    # what is older than these goes (hours and days in seconds)
    class_cutoff = now - retention.class_days * 86400
    run_cutoff = now - retention.run_days * 86400
    ended = [row[0] for row in connection.execute(  # opened more than class_days ago
        sa.select(classes_table.c.code).where(classes_table.c.created < class_cutoff))]
    for code in ended:
        classes.delete_in(connection, code)
    # the posts left are open classes' (the ended ones' went above): a run on a board stays, however old,
    # and so does a run a learner started in an open class, which they come back to next week
    posted = sa.select(posts_table.c.run_id)
    noted = sa.select(learner_runs_table.c.run_id)
    old = [row[0] for row in connection.execute(
        sa.select(runs_table.c.run_id).where((runs_table.c.last_seen < run_cutoff)
                                             & runs_table.c.run_id.not_in(posted) & runs_table.c.run_id.not_in(noted)))]
    runs.delete_in(connection, old)  # with their history and checkpoints
    # kept records age as runs do: run_days after they were kept
    connection.execute(sa.delete(records_table).where(records_table.c.created < run_cutoff))
    # last: the runs deleted above may have been a corpus's last users
    connection.execute(sa.delete(corpora_table).where(
        corpora_table.c.sha256.not_in(sa.select(runs_table.c.corpus_sha256))))
