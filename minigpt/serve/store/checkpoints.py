"""A run's checkpoints: with SQLite, `checkpoint-<step>/` folders beside its file (kill-safe, as every
checkpoint here is written); with any other database, rows of the database itself, for a container's
disk may not outlive it. A run keeps its `Retention.checkpoints` newest."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from .schema import RUN_ID, blobs_table, runs_table

if TYPE_CHECKING:
    from .retention import Retention
    from .writer import Writer


class Checkpoints:
    """Where each run's checkpoints are (`store.checkpoints`): `folder` (None: in the database)."""

    def __init__(self, writer: Writer, folder: Path | None, retention: Retention) -> None:
        self._writer, self.folder, self._retention = writer, folder, retention

    def save(self, run_id: str, step: int, files: dict[str, bytes]) -> bool:
        """A run's checkpoint at `step` (checkpoint_files' dict): the run keeps retention.checkpoints."""
        if not RUN_ID.fullmatch(run_id):  # it names a folder: nothing that could climb out of the store's
            raise ValueError(f"not a run id: {run_id!r}")
        keep = max(1, self._retention.checkpoints)  # at least the newest: a resume starts from it

        def save(connection: sa.Connection) -> None:
            if self.folder is not None:
                from ...checkpoint import save_step_files  # torch, only once a run has trained

                # on the writer's thread, in the queue's order: a checkpoint lands after the steps it holds
                save_step_files(self.folder / run_id, step, files, keep=keep)
            else:
                self._save_rows(connection, run_id, step, files, keep)
            # after the files: the run's row names a checkpoint only once it is there
            connection.execute(sa.update(runs_table).where(runs_table.c.run_id == run_id)
                               .values(checkpoint_step=step))
        return self._writer.write(save)  # not waited for: a run's training goes on while it is written

    @staticmethod
    def _save_rows(connection: sa.Connection, run_id: str, step: int, files: dict[str, bytes], keep: int) -> None:
        where = (blobs_table.c.run_id == run_id) & (blobs_table.c.step == step)
        connection.execute(sa.delete(blobs_table).where(where))  # a step saved again replaces itself whole
        connection.execute(sa.insert(blobs_table), [{"run_id": run_id, "step": step, "name": name,
                                                      "data": data} for name, data in files.items()])
        steps = [row[0] for row in connection.execute(
            sa.select(blobs_table.c.step).where(blobs_table.c.run_id == run_id).distinct()
            .order_by(blobs_table.c.step.desc()))]
        if len(steps) > keep:
            connection.execute(sa.delete(blobs_table).where((blobs_table.c.run_id == run_id)
                                                            & blobs_table.c.step.in_(steps[keep:])))

    def step(self, run_id: str) -> int | None:
        """The step of a run's newest checkpoint, the one load reads; None without one."""
        if not RUN_ID.fullmatch(run_id):
            return None
        if self.folder is not None:
            from ...checkpoint import latest_checkpoint

            # the folders themselves, whatever the run's row says: they are what load reads
            folder = latest_checkpoint(self.folder / run_id)
            return int(folder.name.split("-")[1]) if folder is not None else None  # checkpoint-<step>
        return self._writer.read(lambda c: c.execute(sa.select(sa.func.max(blobs_table.c.step))
                                                     .where(blobs_table.c.run_id == run_id)).scalar(), None)

    def load(self, run_id: str) -> tuple[int, dict[str, bytes]] | None:
        """A run's newest checkpoint: its step and files, or None."""
        if not RUN_ID.fullmatch(run_id):
            return None
        if self.folder is not None:
            from ...checkpoint import latest_checkpoint

            try:
                folder = latest_checkpoint(self.folder / run_id)
                if folder is None:
                    return None
                return int(folder.name.split("-")[1]), {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
            except OSError as err:  # a folder that cannot be read is said as the database's fault, never raised
                self._writer.fault(err)
                return None

        def query(connection: sa.Connection) -> tuple[int, dict[str, bytes]] | None:
            step = connection.execute(sa.select(sa.func.max(blobs_table.c.step))
                                      .where(blobs_table.c.run_id == run_id)).scalar()
            if step is None:
                return None
            rows = connection.execute(sa.select(blobs_table.c.name, blobs_table.c.data).where(
                (blobs_table.c.run_id == run_id) & (blobs_table.c.step == step)))
            return step, {name: bytes(data) for name, data in rows}  # psycopg2 hands a memoryview
        return self._writer.read(query, None)

    @staticmethod
    def delete_rows(connection: sa.Connection, run_ids: list[str]) -> None:
        """Delete these runs' checkpoint rows in `connection`'s transaction."""
        connection.execute(sa.delete(blobs_table).where(blobs_table.c.run_id.in_(run_ids)))

    def delete_folders(self, run_ids: list[str]) -> None:
        """Delete these runs' checkpoint folders, once their rows are deleted (a folder is no transaction's
        to roll back: it goes last, after every statement of the deletion went through)."""
        if self.folder is not None:
            for run_id in run_ids:
                if RUN_ID.fullmatch(run_id):  # a path: only what the store itself would have made
                    shutil.rmtree(self.folder / run_id, ignore_errors=True)
