"""The runs kept for comparison (lab.run_records.RunShelf): each RunRecord as one JSON value
(codecs.record_json), under its record id."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import sqlalchemy as sa

from .codecs import record_from_json, record_json
from .engine import upsert
from .schema import RUN_ID, records_table

if TYPE_CHECKING:
    from ...lab.run_records import RunRecord
    from .writer import Writer


class KeptRecords:
    """The kept records (`store.records`)."""

    def __init__(self, writer: Writer, clock: Callable[[], float]) -> None:
        self._writer, self._clock = writer, clock

    def save(self, record: RunRecord) -> bool:
        """Keep `record`; kept again, it replaces itself and its age starts anew (retention counts from it)."""
        values = {"record_id": record.record_id, "record": record_json(record), "created": self._clock()}
        return self._writer.write(lambda c: upsert(c, records_table, values, ["record_id"]), wait=True)

    def load(self, record_ids: list[str]) -> list[RunRecord]:
        """The kept records of these ids that the store has, in the order asked."""
        ids = [i for i in record_ids if RUN_ID.fullmatch(i)]  # ids come from a browser: only well-formed ones
        if not ids:
            return []

        def query(connection: sa.Connection) -> list[RunRecord]:
            rows = dict(connection.execute(sa.select(records_table.c.record_id, records_table.c.record)
                                           .where(records_table.c.record_id.in_(ids))).all())
            return [record_from_json(rows[i]) for i in ids if i in rows]
        return self._writer.read(query, [])
