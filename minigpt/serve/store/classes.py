"""A class as the store keeps it: its row (the teacher's key, the learners' salt, the challenge, the
lesson's step and reveals), its posts in posting order, and one row per learner's answer. What a
teacher or a learner does here waits for its write (WAIT_SECONDS): a page that says "posted" has."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .engine import upsert
from .schema import (answers_table, classes_table, learner_runs_table, learners_table, posts_table, rounds_table,
                     sessions_table)

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
    created: float = 0.0               # wall clock: the class ends class_days after it
    lesson: dict | None = None         # ClassLesson's fields
    corpus: dict | None = None         # ClassCorpus's fields
    session: int = 0
    led_at: float | None = None        # wall clock
    posts: list[dict] = field(default_factory=list)                   # posts_table's columns, in posting order
    answers: dict[int, dict[int, dict[bytes, int]]] = field(default_factory=dict)  # session -> step -> tag -> option
    sessions: list[dict] = field(default_factory=list)  # number, started, lesson, steps: oldest first
    rounds: list[dict] = field(default_factory=list)    # Round's fields, oldest first
    learners: dict[bytes, float] = field(default_factory=dict)            # tag -> last seen (wall clock)
    runs: dict[str, tuple[bytes, bytes]] = field(default_factory=dict)   # run id -> (tag, salt), oldest first


class ClassRows:
    """The classes, their posts and answers (`store.classes`)."""

    def __init__(self, writer: Writer, runs: RunRows, retention: Retention, clock: Callable[[], float]) -> None:
        self._writer, self._runs, self._retention, self._clock = writer, runs, retention, clock

    def save(self, code: str, teacher_key: bytes, salt: bytes, last_active: float) -> bool:
        """A new class; `last_active` in wall-clock seconds."""
        now = self._clock()  # when asked, not when written: the write may wait in the queue
        values = {"code": code, "teacher_key": teacher_key, "salt": salt, "challenge": None, "pinned": None,
                  "lesson_step": None, "revealed": [], "created": now, "last_active": last_active, "round": 1,
                  "session": 0}

        def insert(connection: sa.Connection) -> None:
            connection.execute(sa.insert(classes_table).values(**values))
            connection.execute(sa.insert(rounds_table).values(code=code, number=1, name="", started=now))
        return self._writer.write(insert, wait=True)

    def update(self, code: str, *, wait: bool = True, **values: Any) -> bool:
        """Change a class's columns: challenge, pinned, lesson_step, revealed, last_active, lesson, corpus,
        round, session, led_at."""
        return self._writer.write(lambda c: c.execute(sa.update(classes_table).where(classes_table.c.code == code)
                                                      .values(**values)), wait=wait)

    def delete(self, code: str, *, with_runs: bool = False) -> bool:
        """A class's rows (every part of it with it); with_runs: the runs posted to it, and those its learners
        started in it, too."""
        def delete(connection: sa.Connection) -> None:
            if with_runs:  # read before the posts go: they are what names the class's runs
                posted = connection.execute(sa.select(posts_table.c.run_id).where(posts_table.c.code == code)
                                            .union(sa.select(learner_runs_table.c.run_id)
                                                   .where(learner_runs_table.c.code == code)))
                self._runs.delete_in(connection, [row[0] for row in posted])
            self.delete_in(connection, code)
        return self._writer.write(delete, wait=True)

    @staticmethod
    def delete_in(connection: sa.Connection, code: str) -> None:
        """Delete a class's rows in `connection`'s transaction: its answers and posts first, then the class
        (said outright, not left to ON DELETE CASCADE, which SQLite honours only with its foreign keys on)."""
        for table in (answers_table, posts_table, sessions_table, rounds_table, learners_table, learner_runs_table):
            connection.execute(sa.delete(table).where(table.c.code == code))
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

    def save_answer(self, code: str, session: int, step: int, learner: bytes, option: int | None) -> bool:
        """A learner's answer at a lesson's step; None withdraws it. One row: an answer changed replaces it."""
        where = ((answers_table.c.code == code) & (answers_table.c.session == session)
                 & (answers_table.c.step == step) & (answers_table.c.learner == learner))

        def answer(connection: sa.Connection) -> None:
            # delete, then insert: not an upsert, for a withdrawn answer (None) leaves no row
            connection.execute(sa.delete(answers_table).where(where))
            if option is not None:
                connection.execute(sa.insert(answers_table).values(code=code, session=session, step=step,
                                                                   learner=learner, option=option))
        return self._writer.write(answer, wait=True)

    def save_session(self, code: str, session: dict) -> bool:
        """A lesson session's row (number, started, lesson, steps), inserted or replaced."""
        values = {**session, "steps": list(session["steps"]), "code": code}
        return self._writer.write(lambda c: upsert(c, sessions_table, values, ["code", "number"]), wait=True)

    def save_round(self, code: str, round_: dict) -> bool:
        """A round of the board: its number, name and start (wall clock)."""
        values = {**round_, "code": code}
        return self._writer.write(lambda c: c.execute(sa.insert(rounds_table).values(**values)), wait=True)

    def save_learner(self, code: str, learner: bytes, seen: float, *, first: bool) -> bool:
        """A learner seen in the class (`first`: the first time), not waited for: every page's first look."""
        values = {"code": code, "learner": learner, "first_seen": seen, "last_seen": seen}
        if first:
            return self._writer.write(lambda c: upsert(c, learners_table, values, ["code", "learner"]), wait=False)
        where = (learners_table.c.code == code) & (learners_table.c.learner == learner)
        return self._writer.write(lambda c: c.execute(sa.update(learners_table).where(where).values(last_seen=seen)),
                                  wait=False)

    def save_learner_run(self, code: str, run_id: str, learner: bytes, salt: bytes, created: float, *,
                         dropped: list[str] = ()) -> bool:
        """A run a learner started in the class; `dropped`: their older notes that go (not their runs)."""
        values = {"code": code, "run_id": run_id, "learner": learner, "salt": salt, "created": created}

        def save(connection: sa.Connection) -> None:
            upsert(connection, learner_runs_table, values, ["code", "run_id"])
            if dropped:
                connection.execute(sa.delete(learner_runs_table).where(
                    (learner_runs_table.c.code == code) & learner_runs_table.c.run_id.in_(list(dropped))))
        return self._writer.write(save, wait=True)

    def delete_learner(self, code: str, learner: bytes, run_ids: list[str]) -> bool:
        """Every row of one learner in the class: posts, answers, seen, noted runs, and `run_ids` themselves."""
        def delete(connection: sa.Connection) -> None:
            for table in (posts_table, answers_table, learners_table, learner_runs_table):
                connection.execute(sa.delete(table).where((table.c.code == code) & (table.c.learner == learner)))
            self._runs.delete_in(connection, run_ids)
        return self._writer.write(delete, wait=True)

    def load(self) -> list[StoredClass]:
        """Every class that has not ended, with its posts (in posting order), answers, lesson sessions,
        rounds, learners and their runs."""
        cutoff = self._clock() - self._retention.class_days * 86400  # an ended class not yet tidied stays out

        def query(connection: sa.Connection) -> list[StoredClass]:
            found = {}  # code -> StoredClass, the open classes only
            for row in connection.execute(sa.select(classes_table).where(classes_table.c.created >= cutoff)):
                found[row.code] = StoredClass(row.code, row.teacher_key, row.salt, row.challenge, row.pinned,
                                              row.lesson_step, list(row.revealed or []), row.last_active,
                                              row.created, row.lesson, row.corpus, row.session or 0, row.led_at)
            _load_parts(connection, found)
            return list(found.values())
        return self._writer.read(query, [])

    def max_post_position(self) -> int:
        """The last post's place in posting order (0 without posts): new posts are numbered after it."""
        return self._writer.read(lambda c: c.execute(sa.select(sa.func.max(posts_table.c.position))).scalar() or 0,
                                 0)


def _load_parts(connection: sa.Connection, found: dict[str, StoredClass]) -> None:
    """What hangs from each open class in `found`; the rows of ended classes (not yet tidied) are skipped."""
    for row in connection.execute(sa.select(posts_table).order_by(posts_table.c.position)):
        if row.code in found:
            found[row.code].posts.append(dict(row._mapping))
    for row in connection.execute(sa.select(answers_table)):
        if row.code in found:
            found[row.code].answers.setdefault(row.session, {}).setdefault(row.step, {})[row.learner] = row.option
    for row in connection.execute(sa.select(sessions_table).order_by(sessions_table.c.number)):
        if row.code in found:
            found[row.code].sessions.append({"number": row.number, "started": row.started, "lesson": row.lesson,
                                             "steps": list(row.steps)})
    for row in connection.execute(sa.select(rounds_table).order_by(rounds_table.c.number)):
        if row.code in found:
            found[row.code].rounds.append({"number": row.number, "name": row.name, "started": row.started})
    for row in connection.execute(sa.select(learners_table)):
        if row.code in found:
            found[row.code].learners[row.learner] = row.last_seen
    for row in connection.execute(sa.select(learner_runs_table).order_by(learner_runs_table.c.created)):
        if row.code in found:
            found[row.code].runs[row.run_id] = (row.learner, row.salt)
