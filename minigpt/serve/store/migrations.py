"""The schema's version (in the table `minigpt_meta`) and the steps between versions: a new database
is made at the current version; an older one is migrated, one step at a time (`MIGRATIONS`), inside one
transaction; a newer one is refused, never written to, and said so."""
from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

from .engine import writing
from .faults import StoreError
from .schema import (SCHEMA_VERSION, answers_table, learner_runs_table, learners_table, meta_table, metadata,
                     rounds_table, sessions_table, version_1, version_2)

MIGRATION_LOCK = 0x6D696E69  # PostgreSQL: the advisory lock a migration holds ("mini")


def create_version_1(connection: sa.Connection) -> None:
    """The schema as version 1 made it (the migration's starting point, and its test's)."""
    md = version_1()
    md.create_all(connection)  # in dependency order: classes and corpora before what points at them
    connection.execute(sa.insert(md.tables["minigpt_meta"]).values(name="schema_version", value="1"))


def _migrate_1_to_2(connection: sa.Connection) -> None:
    """The answers move out of the classes' lesson value into rows of their own (thirty learners
    answering at once no longer rewrite one row); the lesson's step and reveals get columns."""
    old = version_1().tables["classes"]
    rows = connection.execute(sa.select(old.c.code, old.c.lesson)).all()  # read before the column goes
    new = version_2()
    classes, answers_2 = new.tables["classes"], new.tables["answers"]
    answers_2.create(connection)
    # plain DDL, not a table rebuild: SQLite (3.35 on) and PostgreSQL both add and drop a column in place
    connection.execute(sa.text("ALTER TABLE classes ADD COLUMN lesson_step INTEGER"))
    connection.execute(sa.text("ALTER TABLE classes ADD COLUMN revealed JSON"))
    for code, lesson in rows:
        lesson = lesson or {}
        # version 2's classes, whose columns the two ALTERs above have just made
        connection.execute(sa.update(classes).where(classes.c.code == code).values(
            lesson_step=lesson.get("step"), revealed=list(lesson.get("revealed", []))))
        # version 1 keyed a learner's answer by the hex of their tag, and JSON made the step a string
        answers = [{"code": code, "step": int(step), "learner": bytes.fromhex(learner), "option": int(option)}
                   for step, given in (lesson.get("answers") or {}).items() for learner, option in given.items()]
        if answers:
            connection.execute(sa.insert(answers_2), answers)
    connection.execute(sa.text("ALTER TABLE classes DROP COLUMN lesson"))


def _migrate_2_to_3(connection: sa.Connection) -> None:
    """A class lasts the term: its lesson, corpus, round and lesson session get columns, a post its round,
    and the answers move to a table keyed by the lesson session too (every answer so far was the first
    session's); rounds, sessions, learners and their runs get tables of their own."""
    old = version_2().tables["answers"]
    for column in ("lesson JSON", "corpus JSON", "round INTEGER", "session INTEGER", "led_at FLOAT"):
        connection.execute(sa.text(f"ALTER TABLE classes ADD COLUMN {column}"))
    connection.execute(sa.text("ALTER TABLE posts ADD COLUMN round INTEGER"))
    for table in (answers_table, sessions_table, rounds_table, learners_table, learner_runs_table):
        table.create(connection)
    # a key cannot be widened in place (SQLite): the rows are copied into the new table, then the old goes
    rows = [dict(row._mapping, session=1) for row in connection.execute(sa.select(old))]
    if rows:
        connection.execute(sa.insert(answers_table), rows)
    # every class is in its first round; a class that was led, or answered, is in its first lesson session,
    # led last when its teacher was last there (a table of the columns alone: nothing borrowed from today's)
    classes = sa.table("classes", sa.column("code"), sa.column("lesson_step"), sa.column("session"),
                       sa.column("created"), sa.column("last_active"), sa.column("led_at"))
    answered = {code for (code,) in connection.execute(sa.select(old.c.code).distinct())}
    for code, step, created, last_active in connection.execute(
            sa.select(classes.c.code, classes.c.lesson_step, classes.c.created, classes.c.last_active)).all():
        connection.execute(sa.insert(rounds_table).values(code=code, number=1, name="", started=created))
        if step is not None or code in answered:
            connection.execute(sa.insert(sessions_table).values(code=code, number=1, started=created, lesson="",
                                                                steps=[step] if step is not None else []))
            connection.execute(sa.update(classes).where(classes.c.code == code).values(session=1, led_at=last_active))
    old.drop(connection)


MIGRATIONS: dict[int, Callable[[sa.Connection], None]] = {1: _migrate_1_to_2, 2: _migrate_2_to_3}  # N to N + 1


def schema_version(connection: sa.Connection) -> int | None:
    """The database's schema version; None for a database with none of our tables."""
    if not sa.inspect(connection).has_table(meta_table.name):
        return None
    value = connection.execute(sa.select(meta_table.c.value).where(meta_table.c.name == "schema_version")).scalar()
    return int(value) if value is not None else None


def migrate(engine: sa.Engine) -> int:
    """Make the database's schema the current one: create it, or run each migration from its version,
    in one transaction that holds the database's write lock (DDL is transactional in PostgreSQL, and
    in SQLite as the store drives it: see engine._sqlite_begin). Returns the version it found (0: a new
    database). StoreError for a version newer than this code's. The version is read first without
    writing: a newer or damaged database is never written to."""
    with engine.connect() as connection:
        found = schema_version(connection)
    if found is not None and found > SCHEMA_VERSION:
        raise _newer(found)
    if found == SCHEMA_VERSION:  # the usual start: nothing written, not even a lock taken
        return found
    with writing(engine) as connection:
        # PostgreSQL's DDL takes no lock on tables that do not exist yet: two servers starting at once would
        # both create them. The advisory lock makes one wait for the other; it ends with the transaction
        if connection.dialect.name == "postgresql":
            connection.execute(sa.select(sa.func.pg_advisory_xact_lock(MIGRATION_LOCK)))
        found = schema_version(connection)  # again, under the lock: another process may have made it meanwhile
        if found is None:
            metadata.create_all(connection)
            connection.execute(sa.insert(meta_table).values(name="schema_version", value=str(SCHEMA_VERSION)))
            return 0
        if found > SCHEMA_VERSION:
            raise _newer(found)
        # one step at a time, all in this transaction: a step that fails leaves the version it found
        for version in range(found, SCHEMA_VERSION):
            MIGRATIONS[version](connection)
        if found < SCHEMA_VERSION:
            connection.execute(sa.update(meta_table).where(meta_table.c.name == "schema_version")
                               .values(value=str(SCHEMA_VERSION)))
        return found


def _newer(found: int) -> StoreError:
    return StoreError("The database's schema is version {found}, written by a newer MiniGPT Lab than this one "
                      "(version {ours}). Update the app, or point it at another database: this one is left as it "
                      "is.", found=found, ours=SCHEMA_VERSION)
