"""A class as the store keeps it: its row (the teacher's key, the learners' salt, the challenge, the
lesson's step and reveals), its posts in posting order, and one row per learner's answer. What a
teacher or a learner does here waits for its write (WAIT_SECONDS): a page that says "posted" has."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .engine import upsert
from .schema import answers_table, classes_table, posts_table

if TYPE_CHECKING:
    from .retention import Retention
    from .runs import RunRows
    from .writer import Writer


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
    posts: list[dict] = field(default_factory=list)                   # posts_table's columns, in posting order
    answers: dict[int, dict[bytes, int]] = field(default_factory=dict)  # step -> learner's tag -> option


class ClassRows:
    """The classes, their posts and answers (`store.classes`)."""

    def __init__(self, writer: Writer, runs: RunRows, retention: Retention, clock: Callable[[], float]) -> None:
        self._writer, self._runs, self._retention, self._clock = writer, runs, retention, clock

    def save(self, code: str, teacher_key: bytes, salt: bytes, last_active: float) -> bool:
        """A new class; `last_active` in wall-clock seconds."""
        now = self._clock()  # when asked, not when written: the write may wait in the queue
        values = {"code": code, "teacher_key": teacher_key, "salt": salt, "challenge": None, "pinned": None,
                  "lesson_step": None, "revealed": [], "created": now, "last_active": last_active}
        return self._writer.write(lambda c: c.execute(sa.insert(classes_table).values(**values)), wait=True)

    def update(self, code: str, *, wait: bool = True, **values: Any) -> bool:
        """Change a class's columns: challenge, pinned, lesson_step, revealed, last_active."""
        return self._writer.write(lambda c: c.execute(sa.update(classes_table).where(classes_table.c.code == code)
                                                      .values(**values)), wait=wait)

    def delete(self, code: str, *, with_runs: bool = False) -> bool:
        """A class's rows (its posts and answers with it); with_runs: the runs posted to it too."""
        def delete(connection: sa.Connection) -> None:
            if with_runs:  # read before the posts go: they are what names the class's runs
                posted = connection.execute(sa.select(posts_table.c.run_id).where(posts_table.c.code == code))
                self._runs.delete_in(connection, [row[0] for row in posted])
            self.delete_in(connection, code)
        return self._writer.write(delete, wait=True)

    @staticmethod
    def delete_in(connection: sa.Connection, code: str) -> None:
        """Delete a class's rows in `connection`'s transaction: its answers and posts first, then the class
        (said outright, not left to ON DELETE CASCADE, which SQLite honours only with its foreign keys on)."""
        connection.execute(sa.delete(answers_table).where(answers_table.c.code == code))
        connection.execute(sa.delete(posts_table).where(posts_table.c.code == code))
        connection.execute(sa.delete(classes_table).where(classes_table.c.code == code))

    def save_post(self, code: str, post: dict) -> bool:
        """Insert or replace a post (the columns of posts_table, code aside)."""
        values = {**post, "code": code}
        return self._writer.write(lambda c: upsert(c, posts_table, values, ["post_id"]), wait=True)

    def update_post(self, post_id: str, *, wait: bool = False, **values: Any) -> bool:
        """Change a post's columns; by default without waiting (what a read of its run changed)."""
        return self._writer.write(lambda c: c.execute(sa.update(posts_table).where(posts_table.c.post_id == post_id)
                                                      .values(**values)), wait=wait)

    def delete_post(self, post_id: str) -> bool:
        return self._writer.write(lambda c: c.execute(sa.delete(posts_table).where(posts_table.c.post_id == post_id)),
                                  wait=True)

    def save_answer(self, code: str, step: int, learner: bytes, option: int | None) -> bool:
        """A learner's answer at a lesson's step; None withdraws it. One row: an answer changed replaces it."""
        where = (answers_table.c.code == code) & (answers_table.c.step == step) & (answers_table.c.learner == learner)

        def answer(connection: sa.Connection) -> None:
            # delete, then insert: not an upsert, for a withdrawn answer (None) leaves no row
            connection.execute(sa.delete(answers_table).where(where))
            if option is not None:
                connection.execute(sa.insert(answers_table).values(code=code, step=step, learner=learner,
                                                                   option=option))
        return self._writer.write(answer, wait=True)

    def load(self) -> list[StoredClass]:
        """Every class that has not ended, with its posts (in posting order) and answers."""
        cutoff = self._clock() - self._retention.class_hours * 3600  # an ended class not yet tidied stays out

        def query(connection: sa.Connection) -> list[StoredClass]:
            found = {}  # code -> StoredClass, the open classes only
            for row in connection.execute(sa.select(classes_table).where(classes_table.c.last_active >= cutoff)):
                found[row.code] = StoredClass(row.code, row.teacher_key, row.salt, row.challenge, row.pinned,
                                              row.lesson_step, list(row.revealed or []), row.last_active)
            # every post and answer is read, and those of ended classes (not yet tidied) are skipped here
            for row in connection.execute(sa.select(posts_table).order_by(posts_table.c.position)):
                if row.code in found:
                    found[row.code].posts.append(dict(row._mapping))
            for row in connection.execute(sa.select(answers_table)):
                if row.code in found:
                    found[row.code].answers.setdefault(row.step, {})[row.learner] = row.option
            return list(found.values())
        return self._writer.read(query, [])

    def max_post_position(self) -> int:
        """The last post's place in posting order (0 without posts): new posts are numbered after it."""
        return self._writer.read(lambda c: c.execute(sa.select(sa.func.max(posts_table.c.position))).scalar() or 0,
                                 0)
