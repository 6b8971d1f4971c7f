"""A run as the store keeps it: its row (recipe, state, place in line, newest checkpoint's step), its
corpus (kept once per text), and its history, each logged step and evaluation a row. A run's progress
is written as it comes, without waiting: its own curve in memory is what its page draws."""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .codecs import event_json, event_values, finite, number
from .engine import insert_missing, upsert
from .schema import RUN_ID, corpora_table, evals_table, events_table, runs_table

if TYPE_CHECKING:
    from ...train import TrainEvent
    from ..runs.run import EvalRecord
    from .checkpoints import Checkpoints
    from .writer import Writer


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


class RunRows:
    """The runs, their corpora and history (`store.runs`); their checkpoints go with them."""

    def __init__(self, writer: Writer, checkpoints: Checkpoints, clock: Callable[[], float]) -> None:
        self._writer, self._checkpoints, self._clock = writer, checkpoints, clock

    def save(self, run_id: str, owner_key: bytes, recipe: dict, text: str, corpus_label: str, *,
             line_order: int | None, start_paused: bool, max_steps: int) -> bool:
        """A new run, waiting in line: its recipe and corpus (kept once per text). `max_steps` is taken
        and not written."""
        sha = hashlib.sha256(text.encode()).hexdigest()  # the corpus's key: the same text is one row
        now = self._clock()  # when asked, not when written: the write may wait in the queue
        row = {"run_id": run_id, "owner_key": owner_key, "recipe": recipe, "corpus_sha256": sha,
               "corpus_label": corpus_label, "state": "waiting", "step": 0, "elapsed": 0.0, "tokens_per_sec": 0.0,
               "stopped_early": False, "error": None, "line_order": line_order, "start_paused": start_paused,
               "checkpoint_step": None, "created": now, "last_seen": now}

        def insert(connection: sa.Connection) -> None:
            # thirty learners training on the class's corpus share one row of it
            insert_missing(connection, corpora_table, {"sha256": sha, "text": text}, ["sha256"])
            connection.execute(sa.insert(runs_table).values(**row))
        return self._writer.write(insert, wait=True)

    def update(self, run_id: str, *, wait: bool = False, **values: Any) -> bool:
        """Change a run's columns (state, step, elapsed, tokens_per_sec, stopped_early, error, line_order,
        last_seen)."""
        return self._writer.write(lambda c: c.execute(sa.update(runs_table).where(runs_table.c.run_id == run_id)
                                                      .values(**values)), wait=wait)

    def add_history(self, run_id: str, events: Iterable[TrainEvent], evals: Iterable[EvalRecord]) -> bool:
        """A run's newly logged steps and evaluations (a step written again replaces itself: a resumed
        run logs the steps after its checkpoint anew)."""
        events = [{"run_id": run_id, "step": e.step, "event": event_json(e)} for e in events]
        evals = [{"run_id": run_id, "step": r.step, "train_loss": finite(r.train_loss),
                  "val_loss": finite(r.val_loss), "sample": r.sample} for r in evals]
        if not events and not evals:  # nothing new: nothing queued, and nothing left unsaved
            return True

        def insert(connection: sa.Connection) -> None:
            for values in events:
                upsert(connection, events_table, values, ["run_id", "step"])
            for values in evals:
                upsert(connection, evals_table, values, ["run_id", "step"])
        return self._writer.write(insert, history=True)  # the first writes to go when the queue is full

    def forget_after(self, run_id: str, step: int) -> bool:
        """A run resumed from its checkpoint at `step`: what it logged after that step goes (it logs it
        again)."""
        def delete(connection: sa.Connection) -> None:
            # the checkpoint's own step stays: it is what the resumed run starts from, not what it logs again
            connection.execute(sa.delete(events_table).where((events_table.c.run_id == run_id)
                                                             & (events_table.c.step > step)))
            connection.execute(sa.delete(evals_table).where((evals_table.c.run_id == run_id)
                                                            & (evals_table.c.step > step)))
        return self._writer.write(delete, wait=True)

    def load(self, run_id: str) -> StoredRunRow | None:
        """A run with its history, or None where the store does not have it."""
        if not RUN_ID.fullmatch(run_id or ""):
            return None
        # [None] as the default too: a database that fails reads as a run it does not have
        return self._writer.read(lambda c: _load_runs(c, runs_table.c.run_id == run_id)[:1] or [None], [None])[0]

    def waiting(self) -> list[StoredRunRow]:
        """The runs that were waiting in line, first in line first."""
        # "starting" too: a run the server was starting when it stopped is still in line
        return self._writer.read(lambda c: _load_runs(c, runs_table.c.line_order.is_not(None)
                                                      & runs_table.c.state.in_(("waiting", "starting"))), [])

    def seen(self, run_ids: Iterable[str]) -> bool:
        """Their owners opened these runs now (retention counts from it)."""
        ids, now = list(run_ids), self._clock()  # read now: the write may wait in the queue
        if not ids:
            return True
        return self._writer.write(lambda c: c.execute(sa.update(runs_table).where(runs_table.c.run_id.in_(ids))
                                                      .values(last_seen=now)))

    def max_line_order(self) -> int:
        """The last place in line ever given (0 without runs): a restarted server numbers on from it."""
        return self._writer.read(lambda c: c.execute(sa.select(sa.func.max(runs_table.c.line_order))).scalar() or 0,
                                 0)

    def delete(self, run_ids: list[str]) -> bool:
        """These runs, with their history and checkpoints."""
        return self._writer.write(lambda c: self.delete_in(c, run_ids), wait=True)

    def delete_in(self, connection: sa.Connection, run_ids: list[str]) -> None:
        """Delete these runs in `connection`'s transaction: what hangs off a run first, then the run, then
        its checkpoint folders (which no rollback brings back)."""
        if not run_ids:
            return
        for table in (events_table, evals_table):
            connection.execute(sa.delete(table).where(table.c.run_id.in_(run_ids)))
        self._checkpoints.delete_rows(connection, run_ids)
        connection.execute(sa.delete(runs_table).where(runs_table.c.run_id.in_(run_ids)))
        self._checkpoints.delete_folders(run_ids)


def _load_runs(connection: sa.Connection, where) -> list[StoredRunRow]:
    from ...train import TrainEvent  # torch: only once a stored run is read
    from ..runs.run import EvalRecord

    rows = connection.execute(sa.select(runs_table, corpora_table.c.text)
                              .join(corpora_table, corpora_table.c.sha256 == runs_table.c.corpus_sha256)
                              .where(where).order_by(runs_table.c.line_order, runs_table.c.created)).all()
    out = []
    for row in rows:  # a query per run: a page reads one run, the restart only those in line
        events = connection.execute(sa.select(events_table.c.event).where(events_table.c.run_id == row.run_id)
                                    .order_by(events_table.c.step)).scalars()
        evals = connection.execute(sa.select(evals_table).where(evals_table.c.run_id == row.run_id)
                                   .order_by(evals_table.c.step))
        out.append(StoredRunRow(
            row.run_id, row.owner_key, row.recipe, row.text, row.corpus_label, row.state, row.step, row.elapsed,
            row.tokens_per_sec, row.stopped_early, row.error, row.line_order, row.start_paused, row.checkpoint_step,
            [TrainEvent(**event_values(e)) for e in events],
            [EvalRecord(r.step, number(r.train_loss), number(r.val_loss), r.sample) for r in evals]))
    return out
