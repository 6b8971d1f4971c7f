"""What the store (minigpt/serve/store/database.py) holds after a class: the SQLite file and the
checkpoint folders beside it, as the app's default keeps them, or a database named by `--url`.

One lesson (the default): a class of `--learners` learners, each training one run of the class
challenge's settings (the default Small preset, 300 steps, early stop off, as bench/kept_runs.py) on
the default corpus through a registry with the store, posting it to the class's board, answering
every question of the lesson and keeping one run for comparison. It reports the database's and the
checkpoints' bytes, per learner and in all, with the default retention (one checkpoint per run).

A course (`--sessions N`): the same class over N lesson sessions, SESSIONS_A_WEEK a week on the
classes' clock (which the bench moves on; nothing waits for days to pass). Each session opens a new
round of the board; every learner opens the class (seen), the teacher leads every step of the lesson
and reveals each one after all the learners have answered it, and each learner trains a run, notes
it as theirs in the class (its owner key derived from their token, as the app does) and posts it.
Nothing of an open class expires (store/retention.py): a run on a board, or a learner's in the class,
stays all term. After each session: the store's bytes; at the end, the rows and bytes of each table,
and what a term of `--term-weeks` weeks costs at the measured rate, against Community Cloud's disk and a
hosted PostgreSQL's free tier. `--batch-size 1` trains the same runs for a fraction of the time: the
bytes stored do not depend on it (the same weights' shapes, the same steps logged and evaluated).

    python -m bench.store_size --learners 40
    python -m bench.store_size --learners 30 --sessions 10 --batch-size 1
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import secrets
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa
import torch

from bench.common import print_header, print_table, run_settings
from minigpt import DEFAULT_CORPUS, probe_text
from minigpt.lab.run_records import RunRecord, RunShelf
from minigpt.serve.classes.classes import Classes
from minigpt.serve.classes.learners import new_learner_token, run_key
from minigpt.serve.line.registry import RunRegistry
from minigpt.serve.runs.process import build_run
from minigpt.serve.runs.recipe import RunSpec
from minigpt.serve.store.database import Store

LESSON_STEPS = 15  # questions a learner answers: one per lesson step
OPTIONS = 4        # a question's options, as the built-in lesson's have at most
MB = 2**20
DAY = 86400.0
SESSIONS_A_WEEK = 2
ENDED = ("finished", "error", "stopped", "closed")
# what the store may grow to: Community Cloud's storage per app ("Storage: No minimum, 50GB maximum", its
# docs' resource limits, February 2024), which does not outlive a reboot; and a hosted PostgreSQL's free
# tier, ASSUMED 0.5 GB (Neon's and Supabase's free plans at the time of writing: check the provider's own)
LIMITS = {"Community Cloud's disk (50 GB, lost on a reboot)": 50 * 10**9,
          "a hosted PostgreSQL free tier (assumed 0.5 GB)": 5 * 10**8}


class Clock:
    """The classes' clock, which the bench moves on between sessions instead of waiting for days."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


def spec_and_registry(args, store: Store) -> tuple[RunSpec, RunRegistry]:
    text, tokenizer, model, train = run_settings(DEFAULT_CORPUS, args.steps)
    if args.batch_size:
        train = dataclasses.replace(train, batch_size=args.batch_size).validate(model)
    spec = RunSpec("", model, train, tuple(tokenizer.chars), text, DEFAULT_CORPUS,
                   probe_text(tokenizer, text)[: train.block_size], text[:1], 80, nice=0, threads=1)
    registry = RunRegistry(max_runs=args.slots, store=store, builder=lambda s, r: build_run(s, r, in_process=False),
                           waiting_idle_seconds=24 * 3600)  # every learner waits as long as it takes
    return spec, registry


def trained(registry: RunRegistry, entries: list) -> None:
    """Until every run has ended; SystemExit unless all of them finished."""
    while True:  # a bench, not a test: it looks every second until the class has finished training
        states = [registry.get(e.run_id, e.key).run.state for e in entries]  # each owner's sign of life
        if all(state in ENDED for state in states):
            break
        time.sleep(1.0)
    if states.count("finished") != len(entries):
        raise SystemExit(f"not every run finished: {sorted(states)}")


def one_lesson(args, store: Store, folder: Path) -> None:
    """A class of learners, one lesson: each trains, posts, answers and keeps a run."""
    spec, registry = spec_and_registry(args, store)
    classes, shelf = Classes(store=store), RunShelf(store=store)
    opened = classes.open()
    started = time.perf_counter()
    # the whole class presses Start
    entries = [registry.submit(spec, corpus=DEFAULT_CORPUS) for _ in range(args.learners)]
    for n, entry in enumerate(entries):
        classes.post(opened.code, entry, entry.key, f"learner {n}", learner=str(n), corpus=DEFAULT_CORPUS)
        for step in range(1, LESSON_STEPS + 1):
            classes.answer(opened.code, str(n), step, n % OPTIONS)  # one answer per question, as a learner gives
    trained(registry, entries)
    for entry in entries:
        shelf.put(RunRecord.of_run("kept", DEFAULT_CORPUS, spec.model, spec.train, entry.run.snapshot()))
    settle(registry, store)
    seconds = time.perf_counter() - started
    database, checkpoints = disk_bytes(store, folder)
    print(f"{args.learners} learners, {args.steps} steps each ({spec.model.num_params():,} parameters), trained in "
          f"{seconds:.0f} s on {args.slots} slots; store in {folder}")
    print_table(["", "MB in all", "KB per learner"], [
        [name, f"{size / MB:.2f}", f"{size / args.learners / 1024:.0f}"]
        for name, size in (("database (the SQLite file, its WAL checkpointed)", database),
                           ("checkpoints (one per run)", checkpoints), ("total", database + checkpoints))])


def settle(registry: RunRegistry, store: Store) -> None:
    registry.dispatch()  # the last writes queued by the runs' ends
    registry.stop_all()
    store.flush(60)  # every write on disk before the sizes are read


def disk_bytes(store: Store, folder: Path) -> tuple[int, int]:
    """The database's bytes (SQLite: the file, its WAL and shared memory; else the database's own count)
    and the checkpoint folders' (0 where checkpoints are in the database)."""
    tidy_up(store)
    if store.engine.dialect.name == "sqlite":
        database = sum(p.stat().st_size for p in folder.glob("minigpt.db*"))
    else:
        with store.engine.connect() as connection:
            database = connection.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one()
    checkpoints = store.checkpoint_dir
    folders = sum(p.stat().st_size for p in checkpoints.rglob("*") if p.is_file()) if checkpoints else 0
    return database, folders


def tidy_up(store: Store, full: bool = False) -> None:
    """What the database does by itself between two sessions days apart, done now: SQLite moves its
    WAL's pages into the file (what stays, not a buffer); PostgreSQL's VACUUM (autovacuum's work) makes
    the space of deleted rows reusable: a run's checkpoint replaces its last one at every evaluation.
    `full`: PostgreSQL's VACUUM FULL, which rewrites each table to its live rows alone."""
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        if store.engine.dialect.name == "sqlite":
            connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        else:
            connection.exec_driver_sql("VACUUM FULL" if full else "VACUUM")


def live_bytes(store: Store) -> int:
    """The database's bytes in use: SQLite's pages less its free list; PostgreSQL after VACUUM FULL."""
    with store.engine.connect() as connection:
        if store.engine.dialect.name == "sqlite":
            pages = [connection.exec_driver_sql(f"PRAGMA {n}").scalar_one()
                     for n in ("page_count", "freelist_count", "page_size")]
            return (pages[0] - pages[1]) * pages[2]
    tidy_up(store, full=True)
    with store.engine.connect() as connection:
        return connection.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one()


def table_sizes(store: Store) -> list[tuple[str, int, int]]:
    """Each table's rows and bytes (its indexes included): SQLite's dbstat, PostgreSQL's own count."""
    with store.engine.connect() as connection:
        names = sa.inspect(connection).get_table_names()
        rows = {name: connection.execute(sa.select(sa.func.count()).select_from(sa.table(name))).scalar_one()
                for name in names}
        if store.engine.dialect.name == "sqlite":
            sized = connection.execute(sa.text(  # an index's pages count for its table
                "SELECT m.tbl_name, SUM(d.pgsize) FROM dbstat d JOIN sqlite_master m ON m.name = d.name "
                "GROUP BY m.tbl_name")).all()
        else:
            sized = [(name, connection.execute(sa.text("SELECT pg_total_relation_size(:t)"), {"t": name}).scalar_one())
                     for name in names]
    size = dict(sized)
    return sorted(((name, rows[name], size.get(name, 0)) for name in names), key=lambda t: -t[2])


def one_session(classes: Classes, opened, learners: list[str], spec: RunSpec, registry: RunRegistry,
                number: int) -> list:
    """A lesson session: a new round, everyone in, every step led, answered and revealed; each learner's
    run started, noted as theirs and posted. Its runs, to wait for."""
    code, key = opened.code, opened.teacher_key
    if number > 1:
        classes.new_round(code, key, f"session {number}")
    for token in learners:
        classes.seen(code, token)
    for step in range(1, LESSON_STEPS + 1):
        classes.lead(code, key, step)
        for n, token in enumerate(learners):
            classes.answer(code, token, step, (n + number) % OPTIONS)
        classes.reveal(code, key, step)
    entries = []
    for n, token in enumerate(learners):
        salt = secrets.token_bytes(16)
        entry = registry.submit(spec, corpus=DEFAULT_CORPUS, key=run_key(token, salt))
        classes.note_run(code, token, entry.run_id, salt)
        classes.post(code, entry, entry.key, f"learner {n}", learner=token, corpus=DEFAULT_CORPUS)
        entries.append(entry)
    classes.lead(code, key, None)  # the teacher stops leading: the session is over
    return entries


def course(args, store: Store, folder: Path) -> None:
    """The class over `--sessions` lesson sessions: the store's bytes after each, its tables at the end,
    and a term's cost at the measured rate."""
    spec, registry = spec_and_registry(args, store)
    clock = Clock()
    classes = Classes(store=store, clock=clock)
    opened = classes.open()
    learners = [new_learner_token() for _ in range(args.learners)]
    store.open()  # its tables and the class's row made: what a store holds before any session
    started, grown = time.perf_counter(), [disk_bytes(store, folder)]
    for number in range(1, args.sessions + 1):
        clock.offset += 7 * DAY / SESSIONS_A_WEEK  # the next session, days later on the classes' clock
        entries = one_session(classes, opened, learners, spec, registry, number)
        trained(registry, entries)
        registry.dispatch()
        store.flush(60)
        grown.append(disk_bytes(store, folder))
        print(f"session {number}: {sum(grown[-1]) / MB:.1f} MB ({time.perf_counter() - started:.0f} s)", flush=True)
    settle(registry, store)
    grown[-1] = disk_bytes(store, folder)
    sessions = len(classes.course(opened.code, opened.teacher_key))
    print(f"\n{args.learners} learners, {args.sessions} sessions ({sessions} in the course's log), "
          f"{spec.train.max_steps} steps a run, batch {spec.train.batch_size} "
          f"({spec.model.num_params():,} parameters), {time.perf_counter() - started:.0f} s on {args.slots} slots; "
          f"{store.engine.dialect.name} store in {folder}")
    report_course(args, store, grown)


def report_course(args, store: Store, grown: list[tuple[int, int]]) -> None:
    print_table(["after session", "database MB", "checkpoints MB", "total MB"],
                [[n or "0 (the empty store)", f"{d / MB:.2f}", f"{c / MB:.2f}", f"{(d + c) / MB:.2f}"]
                 for n, (d, c) in enumerate(grown)])
    print_table(["table", "rows", "MB (with its indexes)"],
                [[name, f"{rows:,}", f"{size / MB:.2f}"] for name, rows, size in table_sizes(store)])
    print(f"the database's bytes in use (SQLite: less its free pages; PostgreSQL: after VACUUM FULL): "
          f"{live_bytes(store) / MB:.2f} MB of {grown[-1][0] / MB:.2f} MB")
    first, last = sum(grown[1]), sum(grown[-1])
    # a session's growth from the second on; the first also stored the corpus and made the tables' first pages
    per_session = (last - first) / (len(grown) - 2) if len(grown) > 2 else first
    term = args.term_weeks * SESSIONS_A_WEEK
    term_bytes = first + per_session * (term - 1)
    print(f"first session {first / MB:.1f} MB, each one after it {per_session / MB:.1f} MB "
          f"({per_session / args.learners / 1024:.0f} KB a learner); a term of {args.term_weeks} weeks x "
          f"{SESSIONS_A_WEEK} sessions = {term} sessions: {term_bytes / MB:.0f} MB for one class\n")
    print_table(["where", "classes of this size a term fits", "sessions of one class it fits"],
                [[name, f"{limit / term_bytes:.1f}", f"{1 + (limit - first) / per_session:.0f}"]
                 for name, limit in LIMITS.items()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=40)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--sessions", type=int, default=0, help="a course of this many lesson sessions (0: one lesson)")
    parser.add_argument("--term-weeks", type=int, default=14)
    parser.add_argument("--batch-size", type=int, default=0, help="the runs' batch size (0: the preset's)")
    parser.add_argument("--url", help="an SQLAlchemy URL of an empty database (default: SQLite in a new folder)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print_header("the store's size after a class" + (f" over {args.sessions} sessions" if args.sessions else ""))
    folder = Path(tempfile.mkdtemp(prefix="minigpt-store-"))
    # the default engine in a folder of its own, or the database named
    store = Store.from_url(args.url or f"sqlite:///{folder / 'minigpt.db'}")
    (course if args.sessions else one_lesson)(args, store, folder)
    store.close()
    os.environ.pop("MINIGPT_DATA_DIR", None)


if __name__ == "__main__":
    main()
