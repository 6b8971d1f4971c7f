"""minigpt/serve/store/database.py on its own, against a SQLite file and a real PostgreSQL (`database_url`):
the schema and its migration, databases it must refuse and leave as they are (a newer schema, a
damaged file, a missing driver, a server that does not answer), secrets that never reach the
disk in clear, many writers at once (threads, and processes on one file), a kill in the middle of
saving, retention, and kept records.

Time that retention counts is a clock the test moves by hand; nothing here sleeps to wait.

    pytest tests/minigpt/serve/test_store.py
"""
import hashlib
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import sqlalchemy as sa

from helpers import ROOT
from helpers.postgres import free_port
from helpers.waiting import wait_until
from minigpt import CharTokenizer, GPTConfig, TrainConfig
from minigpt.lab.run_records import RunRecord
from minigpt.messages import LabError, Message
from minigpt.serve.store import keys
from minigpt.serve.classes.classes import Classes
from minigpt.serve.runs.run import EvalRecord
from minigpt.serve.store import engine as engine_module
from minigpt.serve.store import writer as writer_module
from minigpt.serve.store.codecs import record_json
from minigpt.serve.store.database import Store
from minigpt.serve.store.engine import create_engine
from minigpt.serve.store.faults import StoreError
from minigpt.serve.store.migrations import create_version_1, schema_version
from minigpt.serve.store.retention import Retention
from minigpt.serve.store.schema import SCHEMA_VERSION
from minigpt.train import TrainEvent

V1_TABLES = ("classes", "posts", "corpora", "runs", "run_events", "run_evals", "checkpoint_files", "kept_records")
V3_TABLES = ("lesson_answers", "lesson_sessions", "rounds", "learners", "learner_runs")  # what version 3 made
FOX = "the quick brown fox jumps over the lazy dog. " * 60
HOUR, DAY = 3600.0, 86400.0


class Clock:
    """Wall-clock seconds that pass only when the test says so."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Stores:
    """Stores a test opens, closed at its end (closing one twice would wait on a stopped writer)."""

    def __init__(self) -> None:
        self.opened: list[Store] = []

    def open(self, url: str, **settings) -> Store:
        store = Store.from_url(url, **settings)
        self.opened.append(store)
        return store

    def close(self, store: Store) -> None:
        self.opened.remove(store)
        store.close()


@pytest.fixture
def stores():
    opened = Stores()
    yield opened
    for store in list(opened.opened):
        opened.close(store)


# -- rows the tests write --------------------------------------------------------------------------
def _configs() -> tuple[GPTConfig, TrainConfig]:
    model = GPTConfig(vocab_size=28, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=16).validate()
    return model, TrainConfig(max_steps=20, batch_size=4, block_size=8, eval_interval=10, device="cpu").validate(model)


def _record(name: str = "alpha", **values) -> RunRecord:
    model, train = _configs()
    settings = dict(steps=(0, 10, 20), train_loss=(3.2958, 2.4142135623730951, 1.7012345678901234), val_steps=(0, 20),
                    val_loss=(3.3, 1.9876543210987654), elapsed=1.25, tokens_per_sec=812.5)
    settings.update(values)
    return RunRecord(name, "fox", model, train, **settings)


def _post(post_id: str, run_id: str, *, position: int = 0, learner: bytes = b"\x01" * 32, hidden: bool = False) -> dict:
    return {"post_id": post_id, "position": position, "name": f"post {post_id}", "run_id": run_id,
            "post_key": keys.hashed(keys.new_key()), "run_key": keys.hashed(keys.new_key()), "learner": learner,
            "corpus": "fox", "record": record_json(_record()), "sample": "the fox", "state": "finished", "step": 20,
            "hidden": hidden}


def _events(*steps: int) -> list[TrainEvent]:
    return [TrainEvent(step=s, max_steps=100, train_loss=3.0 - s / 100, lr=1e-3, tokens_per_sec=500.0 + s,
                       elapsed=s / 10, val_loss=2.5 - s / 100 if s % 20 == 0 else None) for s in steps]


def _evals(*steps: int) -> list[EvalRecord]:
    return [EvalRecord(s, 2.0 - s / 1000, 2.1 - s / 1000, f"sample at {s}") for s in steps]


def _now() -> float:
    return time.time()  # what the store keeps a class's activity in: wall-clock seconds


def _save_run(store: Store, run_id: str, text: str = FOX) -> bool:
    return store.runs.save(run_id, keys.hashed(keys.new_key()), {"recipe of": run_id}, text, "fox", line_order=None,
                          start_paused=False, max_steps=100)


def _count(engine: sa.Engine, table: str, where: str = "", **params) -> int:
    with engine.connect() as connection:
        return connection.execute(sa.text(f"SELECT COUNT(*) FROM {table} {where}"), params).scalar()


def _counts(engine: sa.Engine, tables) -> dict[str, int]:
    return {table: _count(engine, table) for table in tables}


def _dump(url: str) -> dict:
    """Every table's columns and rows, as plain values: what "left as it was" compares."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            inspector = sa.inspect(connection)
            dump = {}
            for name in sorted(inspector.get_table_names()):
                columns = [c["name"] for c in inspector.get_columns(name)]
                rows = connection.execute(sa.text(f"SELECT * FROM {name}")).all()
                dump[name] = (columns, sorted(repr(tuple(row)) for row in rows))
            return dump
    finally:
        engine.dispose()


def _is_sentence(problem) -> bool:
    """What a page shows: a template and its parameters (a Message, or the StoreError itself)."""
    return isinstance(problem, (Message, LabError)) and isinstance(problem.template, str) and bool(str(problem))


def _sqlite_path(url: str) -> Path | None:
    return Path(sa.engine.make_url(url).database) if url.startswith("sqlite") else None


def _set_version(url: str, version: int) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text("UPDATE minigpt_meta SET value = :v WHERE name = 'schema_version'"),
                               {"v": str(version)})
    finally:
        engine.dispose()


def _every_write_refused(store: Store) -> list[bool]:
    """What a page and a run would write, tried against a store that must not write: each one's answer."""
    now = 1_000_000.0
    return [store.classes.save("ZZZZ", keys.hashed("k"), b"s" * 16, now),
            store.classes.update("ZZZZ", pinned="p"),
            store.classes.save_post("ZZZZ", _post("p-new", "r-new")),
            store.classes.save_answer("ZZZZ", 1, 1, b"\x02" * 32, 1),
            _save_run(store, "r-new"),
            store.runs.update("r-new", step=5),
            store.runs.add_history("r-new", _events(10), _evals(10)),
            store.checkpoints.save("r-new", 10, {"config.json": b"{}", "model.safetensors": b"\x00" * 8}),
            store.records.save(_record()),
            store.runs.seen(["r-new"]),
            store.classes.delete("ZZZZ", with_runs=True),
            store.runs.delete(["r-new"]),
            store.flush(1.0)]


# -- the writer -----------------------------------------------------------------------------------
def test_the_writer_never_waits_on_itself_so_a_write_after_the_first_is_not_held_up(tmp_path, monkeypatch, stores):
    # after its first write the writer runs a retention pass: were that a write that waits for the writer,
    # it would wait on itself this long, holding up every write behind it (made long: no flush outlasts it)
    monkeypatch.setattr(writer_module, "WAIT_SECONDS", 30.0)
    store = stores.open(f"sqlite:///{tmp_path / 'store.db'}")
    assert store.classes.save("K7Q2", keys.hashed("k"), b"s" * 16, _now())
    for flushed in range(3):  # a flush can slip in before the pass begins; not three in a row
        assert store.flush(10), f"flush {flushed + 1} waited behind the writer"
    assert store.classes.save_answer("K7Q2", 1, 1, b"\x01" * 32, 2)


# -- the schema ------------------------------------------------------------------------------------
def test_a_new_database_is_made_at_the_current_schema_with_every_table(database_url, stores):
    store = stores.open(database_url)
    assert store.ready and store.problem is None
    with store.engine.connect() as connection:
        assert schema_version(connection) == SCHEMA_VERSION
        tables = set(sa.inspect(connection).get_table_names())
    assert {"minigpt_meta", *V3_TABLES, *V1_TABLES} <= tables
    _save_run(store, "first")
    assert store.flush(30)
    stores.close(store)
    again = stores.open(database_url)  # opened again: found current, nothing made anew, nothing lost
    assert again.ready and again.runs.load("first") is not None
    assert _count(again.engine, "minigpt_meta") == 1


def _version_1_database(url: str, teacher_key: str, tags: list[bytes]) -> dict:
    """A database as version 1 left it, with a row in every table; returns what the test checks."""
    engine = sa.create_engine(url)
    record = _record()
    lesson = {"step": 3, "revealed": [2],
              "answers": {"2": {tags[0].hex(): 1, tags[1].hex(): 0}, "3": {tags[0].hex(): 2}}}
    sha = hashlib.sha256(FOX.encode()).hexdigest()
    files = {"config.json": b'{"step": 20}', "model.safetensors": bytes(range(256)) * 4}
    try:
        with engine.begin() as connection:
            create_version_1(connection)
        with engine.begin() as connection:
            table = {name: sa.Table(name, sa.MetaData(), autoload_with=connection) for name in V1_TABLES}
            salt = b"\x07" * 16
            connection.execute(sa.insert(table["classes"]), [
                {"code": "K7Q2", "teacher_key": keys.hashed(teacher_key), "salt": salt,
                 "challenge": {"corpus": "fox", "max_steps": 500, "max_params": None}, "pinned": "p2",
                 "lesson": lesson, "created": _now(), "last_active": _now()},
                {"code": "M3NP", "teacher_key": keys.hashed("another"), "salt": b"\x08" * 16, "challenge": None,
                 "pinned": None, "lesson": {}, "created": _now(), "last_active": _now()}])
            connection.execute(sa.insert(table["posts"]), [{**_post("p1", "run1", position=0, learner=tags[0]),
                                                            "code": "K7Q2"},
                                                           {**_post("p2", "run1", position=1, learner=tags[1],
                                                                    hidden=True), "code": "K7Q2"}])
            connection.execute(sa.insert(table["corpora"]).values(sha256=sha, text=FOX))
            connection.execute(sa.insert(table["runs"]).values(
                run_id="run1", owner_key=keys.hashed("owner"), recipe={"recipe of": "run1"}, corpus_sha256=sha,
                corpus_label="fox", state="finished", step=20, elapsed=2.0, tokens_per_sec=900.0, stopped_early=False,
                error=None, line_order=None, start_paused=False, checkpoint_step=20, created=1.0, last_seen=_now()))
            connection.execute(sa.insert(table["run_events"]), [
                {"run_id": "run1", "step": e.step, "event": asdict(e)} for e in _events(0, 10, 20)])
            connection.execute(sa.insert(table["run_evals"]), [
                {"run_id": "run1", "step": r.step, "train_loss": r.train_loss, "val_loss": r.val_loss,
                 "sample": r.sample} for r in _evals(0, 20)])
            connection.execute(sa.insert(table["checkpoint_files"]), [
                {"run_id": "run1", "step": 20, "name": name, "data": data} for name, data in files.items()])
            connection.execute(sa.insert(table["kept_records"]).values(
                record_id=record.record_id, record=record_json(record), created=_now()))
        return {"counts": _counts(engine, V1_TABLES), "record": record, "files": files}
    finally:
        engine.dispose()


def test_a_version_1_database_is_migrated_keeping_every_row_and_each_answer_becomes_a_row(database_url, stores):
    tags = [hashlib.sha256(b"learner a").digest(), hashlib.sha256(b"learner b").digest()]
    before = _version_1_database(database_url, "teacher secret", tags)
    engine = create_engine(database_url)
    store = Store(engine)  # checkpoints in the database, as version 1 kept them
    stores.opened.append(store)
    assert store.ready and store.problem is None
    assert _counts(engine, V1_TABLES) == before["counts"]
    with engine.connect() as connection:
        assert schema_version(connection) == SCHEMA_VERSION
        columns = {c["name"] for c in sa.inspect(connection).get_columns("classes")}
        lessons = dict((code, (step, json.loads(revealed) if isinstance(revealed, str) else revealed))
                       for code, step, revealed in connection.execute(
                           sa.text("SELECT code, lesson_step, revealed FROM classes")))
        answers = {(code, session, step, bytes(learner), option)
                   for code, session, step, learner, option in connection.execute(
                       sa.text("SELECT code, session, step, learner, option FROM lesson_answers"))}
        sessions = dict(connection.execute(sa.text("SELECT code, session FROM classes")).all())
        rounds = connection.execute(sa.text("SELECT code, number, name FROM rounds ORDER BY code")).all()
        led = connection.execute(sa.text("SELECT code, number, steps FROM lesson_sessions")).all()
        # version 3's lesson is the teacher's own file: nothing of version 1's lesson value is left in it
        teachers_lessons = [row[0] for row in connection.execute(sa.text("SELECT lesson FROM classes"))]
        tables = set(sa.inspect(connection).get_table_names())
    assert {"lesson_step", "revealed", "lesson", "corpus", "round", "session", "led_at"} <= columns
    assert teachers_lessons == [None, None]
    # through version 2 into 3: every answer so far is the first lesson session's, in the table keyed by it
    assert "answers" not in tables and set(V3_TABLES) <= tables
    assert sessions == {"K7Q2": 1, "M3NP": None}
    assert [tuple(r) for r in rounds] == [("K7Q2", 1, ""), ("M3NP", 1, "")]  # every class in its first round
    assert [(code, number, json.loads(steps) if isinstance(steps, str) else steps)
            for code, number, steps in led] == [("K7Q2", 1, [3])]  # the lesson led so far: its first session
    assert lessons == {"K7Q2": (3, [2]), "M3NP": (None, [])}
    assert answers == {("K7Q2", 1, 2, tags[0], 1), ("K7Q2", 1, 2, tags[1], 0), ("K7Q2", 1, 3, tags[0], 2)}

    loaded = {c.code: c for c in store.classes.load()}
    assert set(loaded) == {"K7Q2", "M3NP"}
    k7 = loaded["K7Q2"]
    assert (k7.lesson_step, k7.revealed, k7.pinned) == (3, [2], "p2")
    assert k7.answers == {1: {2: {tags[0]: 1, tags[1]: 0}, 3: {tags[0]: 2}}}
    assert k7.challenge == {"corpus": "fox", "max_steps": 500, "max_params": None}
    assert [(p["post_id"], p["hidden"]) for p in k7.posts] == [("p1", False), ("p2", True)]
    assert keys.matches("teacher secret", k7.teacher_key)
    run = store.runs.load("run1")
    assert [e.step for e in run.history] == [0, 10, 20] and [r.step for r in run.evals] == [0, 20]
    assert store.checkpoints.load("run1") == (20, before["files"])
    assert store.records.load([before["record"].record_id]) == [before["record"]]

    classes = Classes(store=store)  # what a server opening on the migrated database serves
    assert classes.find("K7Q2").is_teacher("teacher secret")
    assert classes.lesson("K7Q2").step == 3 and classes.lesson("K7Q2").revealed == {2}
    assert classes.counts("K7Q2", "teacher secret", 2, 3) == [1, 1, 0]
    classes.lead("K7Q2", "teacher secret", 4)  # the teacher goes on: the same session, its reveals and counts kept
    assert classes.lesson("K7Q2").revealed == {2} and classes.counts("K7Q2", "teacher secret", 2, 3) == [1, 1, 0]
    session, = classes.course("K7Q2", "teacher secret")
    assert (session.number, session.steps, session.tallies) == (1, (3, 4), {2: (1, 1), 3: (0, 0, 1)})
    classes.new_round("K7Q2", "teacher secret", "week 2")
    assert [r.number for r in classes.rounds("K7Q2")] == [1, 2]


def test_a_migration_that_fails_leaves_the_version_1_database_as_it_was(database_url, stores):
    # one transaction: a migration that fails halfway (on an answer it cannot read) leaves no half-made
    # schema behind, or every later try fails on what it left
    _version_1_database(database_url, "teacher secret", [b"\x01" * 32, b"\x02" * 32])
    engine = sa.create_engine(database_url)
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE classes SET lesson = :lesson WHERE code = 'M3NP'"),
                           {"lesson": json.dumps({"step": 1, "answers": {"1": {"not hex": 1}}})})
    engine.dispose()
    before = _dump(database_url)
    store = stores.open(database_url)
    assert not store.ready and store.problem is not None
    stores.close(store)
    assert _dump(database_url) == before


def test_a_schema_newer_than_ours_is_refused_said_and_never_written(database_url, stores, tmp_path):
    store = stores.open(database_url)
    store.classes.save("K7Q2", keys.hashed("k"), b"s" * 16, _now())
    _save_run(store, "kept")
    assert store.flush(30)
    stores.close(store)
    _set_version(database_url, SCHEMA_VERSION + 1)
    before = _dump(database_url)
    path = _sqlite_path(database_url)
    data = path.read_bytes() if path else None

    store = stores.open(database_url)
    assert not store.ready and not store.ready  # asked again: still refused
    assert _is_sentence(store.problem)
    assert store.problem.params == {"found": SCHEMA_VERSION + 1, "ours": SCHEMA_VERSION}
    assert f"version {SCHEMA_VERSION + 1}" in str(store.problem) and f"version {SCHEMA_VERSION})" in str(store.problem)
    assert _every_write_refused(store) == [False] * 13
    assert store.classes.load() == [] and store.runs.load("kept") is None and store.checkpoints.load("kept") is None
    stores.close(store)
    assert _dump(database_url) == before
    if path is not None:
        assert path.read_bytes() == data
        assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no checkpoint folder, no journal left


# -- files that are not a store ----------------------------------------------------------------------
def _damaged(kind: str, path: Path, tmp_path: Path, stores: Stores) -> None:
    if kind == "random bytes":
        path.write_bytes(random.Random(7).randbytes(16384))
        return
    if kind == "a newer schema, in rollback-journal mode":  # as another tool, or an older SQLite, leaves a file
        connection = sqlite3.connect(path)
        connection.execute("CREATE TABLE minigpt_meta (name VARCHAR(32) PRIMARY KEY, value VARCHAR(64) NOT NULL)")
        connection.execute("INSERT INTO minigpt_meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION + 1),))
        connection.commit()
        connection.close()
        return
    whole = tmp_path / "whole" / "store.db"  # a real store's file, cut in half
    whole.parent.mkdir()
    store = stores.open(f"sqlite:///{whole}")
    for i in range(20):
        store.classes.save(f"C{i:03d}", keys.hashed("k"), b"s" * 16, _now())
        _save_run(store, f"run{i}", text=f"{FOX} {i}")
        store.runs.add_history(f"run{i}", _events(*range(0, 200, 10)), _evals(0, 100))
    assert store.flush(30)
    stores.close(store)
    data = whole.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("kind", ["truncated to half", "random bytes", "a newer schema, in rollback-journal mode"])
def test_a_damaged_or_foreign_sqlite_file_is_said_and_left_byte_for_byte_as_it_was(kind, tmp_path, stores, caplog):
    folder = tmp_path / "server"
    folder.mkdir()
    path = folder / "store.db"
    _damaged(kind, path, tmp_path, stores)
    data = path.read_bytes()

    store = stores.open(f"sqlite:///{path}")  # never raises: the app goes on from memory
    assert not store.ready and _is_sentence(store.problem)
    said = str(store.problem)
    if kind == "truncated to half":  # the driver's own words go to the server's log, not into the sentence
        assert "damaged" in said and "malformed" not in said and "malformed" in caplog.text
    elif kind == "random bytes":
        assert "damaged" in said and "not a database" not in said and "not a database" in caplog.text
    else:
        assert "newer" in said and f"version {SCHEMA_VERSION + 1}" in said
    assert _every_write_refused(store) == [False] * 13
    assert store.classes.load() == [] and store.runs.load("run1") is None
    stores.close(store)
    assert path.read_bytes() == data
    assert sorted(p.name for p in folder.iterdir()) == ["store.db"]


@pytest.mark.parametrize(("url", "driver", "package"), [
    ("postgresql+pg8000://user@127.0.0.1/minigpt", "pg8000", "pg8000"),
    ("mysql+pymysql://user@127.0.0.1/minigpt", "pymysql", "PyMySQL"),
])
def test_a_url_whose_driver_is_not_installed_names_the_package_to_install(url, driver, package):
    import importlib.util

    if importlib.util.find_spec(driver) is not None:
        pytest.skip(f"{driver} is installed here")
    for make in (create_engine, Store.from_url):
        with pytest.raises(StoreError) as raised:
            make(url)
        assert f"driver {driver}" in str(raised.value) and f'pip install "{package}"' in str(raised.value)


def test_a_database_that_does_not_answer_is_said_and_writes_give_up_at_once():
    pytest.importorskip("psycopg")
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/minigpt"  # nothing listens there
    seen: dict = {}

    def use() -> None:
        store = Store.from_url(url)
        seen["ready"], seen["problem"] = store.ready, store.problem
        seen["writes"] = _every_write_refused(store)
        seen["reads"] = (store.classes.load(), store.runs.load("r-new"), store.runs.max_line_order())
        store.close()

    thread = threading.Thread(target=use, daemon=True)
    thread.start()
    thread.join(timeout=60)  # a bound on a hang, not a timing: each call returns at once
    assert not thread.is_alive(), "the store hung on a database that does not answer"
    assert seen["ready"] is False and _is_sentence(seen["problem"]) and "does not answer" in str(seen["problem"])
    assert seen["writes"] == [False] * 13 and seen["reads"] == ([], None, 0)


# -- secrets -----------------------------------------------------------------------------------------
def _fox_spec(max_steps: int = 10):
    from minigpt.serve.runs.recipe import RunSpec

    tok = CharTokenizer.from_text(FOX)
    model = GPTConfig(vocab_size=tok.vocab_size, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=16).validate()
    train = TrainConfig(max_steps=max_steps, batch_size=4, block_size=8, eval_interval=5, eval_iters=1, warmup_steps=2,
                        device="cpu").validate(model)
    spec = RunSpec("", model, train, tuple(tok.chars), FOX, None, FOX[:8], "t", 8, log_interval=5, nice=0, threads=1)
    return spec


def _thread_builder(spec, resume):
    from minigpt.serve.runs.process import build_run

    return build_run(spec, resume, in_process=False)


@pytest.mark.trains
@pytest.mark.slow
def test_no_key_or_learner_id_reaches_the_disk_in_clear_and_every_key_still_works_after_reopening(tmp_path, stores):
    from minigpt.serve.classes.roster import BoardError
    from minigpt.serve.line.registry import RunRegistry

    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = stores.open(url)
    classes = Classes(store=store)
    opened = classes.open()
    registry = RunRegistry(max_runs=1, store=store, builder=_thread_builder, dispatcher=False)
    spec = _fox_spec()
    entry = registry.submit(spec, corpus="fox")
    wait_until(lambda: registry.get(entry.run_id).run.state == "finished", "the run to finish")
    learner = "learner-" + keys.new_key()
    post_id, post_key = classes.post(opened.code, entry, entry.key, "mine", learner=learner, corpus="fox")
    classes.lead(opened.code, opened.teacher_key, 1)
    classes.answer(opened.code, learner, 1, 2)
    registry.dispatch()
    registry.stop_all()
    assert store.flush(30)
    stores.close(store)

    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())  # the database, its -wal, the checkpoints
    on_disk = b"".join(p.read_bytes() for p in files)
    for written in (opened.code, entry.run_id, post_id):  # read where the store writes
        assert written.encode() in on_disk
    for secret in (opened.teacher_key, entry.key, post_key, learner):
        assert secret.encode() not in on_disk

    store = stores.open(url)
    classes = Classes(store=store)
    board = classes.find(opened.code)
    assert board.is_teacher(opened.teacher_key) and not board.is_teacher(post_key)
    assert classes.answered(opened.code, learner, 1) == 2
    registry = RunRegistry(max_runs=1, store=store, builder=_thread_builder, dispatcher=False)
    try:
        assert registry.get(entry.run_id).is_owner(entry.key)
        with pytest.raises(BoardError):
            classes.withdraw(opened.code, post_id, opened.teacher_key)
        classes.withdraw(opened.code, post_id, post_key)
        assert classes.view(opened.code, registry.get).rows == ()
        assert store.flush(30) and store.classes.load()[0].posts == []
    finally:
        registry.stop_all()


# -- many writers --------------------------------------------------------------------------------------
def test_thirty_threads_writing_at_once_lose_no_row(database_url, stores):
    store = stores.open(database_url)
    start = threading.Barrier(30)
    failures = []

    def learner(i: int) -> None:
        try:
            start.wait()
            code, run_id = f"C{i:03d}", f"run{i:03d}"
            store.classes.save(code, keys.hashed(f"teacher {i}"), bytes([i]) * 16, _now())
            store.classes.save_post(code, _post(f"post{i:03d}", run_id, position=i, learner=bytes([i]) * 32))
            store.classes.save_answer(code, 1, 1, bytes([i]) * 32, i % 4)
            _save_run(store, run_id)  # the same corpus for all: kept once
            store.runs.add_history(run_id, _events(0, 10, 20), _evals(20))
            store.runs.update(run_id, state="finished", step=20)
        except BaseException as err:  # noqa: BLE001 - said by the assertion below
            failures.append(err)

    threads = [threading.Thread(target=learner, args=(i,)) for i in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert store.flush(60)
    assert _counts(store.engine, ["classes", "posts", "lesson_answers", "runs", "run_events", "run_evals",
                                  "corpora"]) == {
        "classes": 30, "posts": 30, "lesson_answers": 30, "runs": 30, "run_events": 90, "run_evals": 30, "corpora": 1}
    loaded = {c.code: c for c in store.classes.load()}
    assert all(loaded[f"C{i:03d}"].answers == {1: {1: {bytes([i]) * 32: i % 4}}} for i in range(30))
    assert all(store.runs.load(f"run{i:03d}").state == "finished" for i in range(30))


def test_two_stores_opening_one_new_database_at_once_both_open_it(database_url, stores):
    # two servers started together: the first CREATE of each waits until both have looked for the schema,
    # as a real race has it; the loser must still open the database (wait its turn, or look again)
    arrived = threading.Barrier(2)
    engines = [create_engine(database_url) for _ in range(2)]
    opened: list = [None, None]

    def hold_first_create(engine: sa.Engine) -> None:
        waited = []

        def before(connection, cursor, statement, parameters, context, executemany):
            if not waited and statement.lstrip().upper().startswith("CREATE TABLE"):
                waited.append(True)
                try:
                    arrived.wait(timeout=5)  # a store that locks first makes the other wait before it looks
                except threading.BrokenBarrierError:
                    pass
        sa.event.listen(engine, "before_cursor_execute", before)

    def open_store(i: int) -> None:
        opened[i] = Store(engines[i])

    for engine in engines:
        hold_first_create(engine)
    threads = [threading.Thread(target=open_store, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    stores.opened.extend(s for s in opened if s is not None)
    assert all(s is not None for s in opened)
    assert [(s.ready, s.problem) for s in opened] == [(True, None), (True, None)]
    _save_run(opened[0], "one")
    _save_run(opened[1], "two")
    assert opened[0].flush(30) and opened[1].flush(30)
    assert opened[1].runs.load("one") is not None and opened[0].runs.load("two") is not None


WRITER = r"""
import sys
from minigpt.serve.store import keys
from minigpt.serve.runs.run import EvalRecord
from minigpt.serve.store.database import Store
from minigpt.train import TrainEvent

url, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = Store.from_url(url)
print("ready" if store.ready else f"refused: {store.problem}", flush=True)
sys.stdin.readline()  # go: both processes write at once
for i in range(n):
    run_id = f"{prefix}{i:03d}"
    store.classes.save(run_id, keys.hashed("k"), b"s" * 16, 1e12)
    store.runs.save(run_id, keys.hashed("k"), {"i": i}, "text of " + prefix, prefix, line_order=None,
                   start_paused=False, max_steps=100)
    store.runs.add_history(run_id, [TrainEvent(s, 100, 2.0, 1e-3, 100.0, s / 10) for s in (0, 10, 20)],
                      [EvalRecord(20, 2.0, 2.1, "sample")])
    store.runs.update(run_id, step=20, state="finished")
print("done" if store.flush(120) else "flush timed out", flush=True)
store.close()
"""


def _child_env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}


@pytest.mark.slow
def test_two_processes_writing_one_sqlite_file_at_once_lose_no_row_and_leave_it_whole(tmp_path, stores):
    path = tmp_path / "store.db"
    url, n = f"sqlite:///{path}", 40
    stores.close(stores.open(url))  # the schema first: this test is about the writes
    children = [subprocess.Popen([sys.executable, "-c", WRITER, url, prefix, str(n)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env())
                for prefix in ("a", "b")]
    try:
        assert [child.stdout.readline().strip() for child in children] == ["ready", "ready"]
        for child in children:
            child.stdin.write("go\n")
            child.stdin.flush()
        results = [child.communicate(timeout=240) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert [child.returncode for child in children] == [0, 0], [err for _out, err in results]
    assert [out.strip() for out, _err in results] == ["done", "done"]
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    store = stores.open(url)
    assert _counts(store.engine, ["classes", "runs", "run_events", "run_evals", "corpora"]) == {
        "classes": 2 * n, "runs": 2 * n, "run_events": 6 * n, "run_evals": 2 * n, "corpora": 2}
    assert all(store.runs.load(f"{p}{i:03d}").state == "finished" for p in "ab" for i in range(n))


KILLED = r"""
import itertools, sys
import torch
from helpers.tiny import tiny_lm
from minigpt.checkpoint import checkpoint_files
from minigpt.serve.store import keys
from minigpt.serve.runs.run import EvalRecord
from minigpt.serve.store.database import Store
from minigpt.serve.store.retention import Retention
from minigpt.train import TrainEvent

torch.set_num_threads(1)
store = Store.from_url(sys.argv[1], retention=Retention(checkpoints=2))
model, tok = tiny_lm()
first = next(model.parameters())
store.runs.save("killed", keys.hashed("k"), {"r": 1}, "text", "c", line_order=None, start_paused=False,
               max_steps=10_000)
assert store.flush(60)
for step in itertools.count(1):
    store.runs.add_history("killed", [TrainEvent(step, 10_000, 1.0 / step, 1e-3, 100.0, step / 10)],
                      [EvalRecord(step, 1.0 / step, 1.5 / step, f"sample {step}")])
    store.runs.update("killed", step=step, state="running")
    with torch.no_grad():
        first.add_(1.0)  # each checkpoint's weights say which step they are
    store.checkpoints.save("killed", step, checkpoint_files(model, tok, meta={"step": step}))
    if not store.flush(60):
        sys.exit("flush timed out")
    print(f"flushed {step}", flush=True)
"""


@pytest.mark.slow
def test_a_process_killed_while_saving_leaves_a_whole_store_with_every_flushed_write(tmp_path, stores):
    import torch

    from helpers.tiny import tiny_lm
    from minigpt.checkpoint import load_files

    path = tmp_path / "store.db"
    kill_after = random.randint(3, 15)
    child = subprocess.Popen([sys.executable, "-c", KILLED, f"sqlite:///{path}"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=_child_env())
    try:
        said = [child.stdout.readline().strip() for _ in range(kill_after)]
        os.kill(child.pid, signal.SIGKILL)  # the child is inside its next save by now
    finally:
        if child.poll() is None:
            child.kill()
        _out, err = child.communicate(timeout=60)
    assert said == [f"flushed {s}" for s in range(1, kill_after + 1)], (kill_after, said, err)
    assert child.returncode == -signal.SIGKILL

    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    store = stores.open(f"sqlite:///{path}")
    assert store.ready and store.problem is None
    run = store.runs.load("killed")
    assert [e.step for e in run.history][:kill_after] == list(range(1, kill_after + 1)), kill_after
    assert [r.step for r in run.evals][:kill_after] == list(range(1, kill_after + 1)), kill_after
    assert run.step >= kill_after
    step, files = store.checkpoints.load("killed")
    assert step >= kill_after
    checkpoint = load_files(files)  # complete and loadable: never a half-written save
    assert checkpoint.meta["step"] == step
    model, _tok = tiny_lm()
    expected = next(model.parameters()) + step  # each save added 1.0: the weights are those of its step
    assert torch.allclose(next(checkpoint.model.parameters()), expected, atol=1e-3)


# -- retention -----------------------------------------------------------------------------------------
def _checkpoint_steps(store: Store, run_id: str) -> set[int]:
    if store.checkpoint_dir is not None:
        folder = store.checkpoint_dir / run_id
        return {int(p.name.split("-")[1]) for p in folder.glob("checkpoint-*")} if folder.exists() else set()
    with store.engine.connect() as connection:
        return {row[0] for row in connection.execute(
            sa.text("SELECT DISTINCT step FROM checkpoint_files WHERE run_id = :r"), {"r": run_id})}


def test_retention_ends_classes_past_their_term_and_unseen_unposted_runs_and_keeps_the_newest_checkpoints(
        database_url, stores):
    clock = Clock()
    t0 = clock.now
    store = stores.open(database_url, retention=Retention(class_days=3, run_days=3.5, checkpoints=2), clock=clock)
    assert (store.checkpoint_dir is not None) == database_url.startswith("sqlite")  # folders beside SQLite's file
    store.classes.save("OLD1", keys.hashed("k"), b"s" * 16, last_active=t0)
    store.classes.save_post("OLD1", _post("p-gone", "gone"))
    store.classes.save_answer("OLD1", 1, 1, b"\x03" * 32, 2)
    store.classes.save_learner_run("OLD1", "gone", b"\x03" * 32, b"\x00" * 16, t0)
    _save_run(store, "gone", text="a corpus only the gone run used")
    _save_run(store, "posted")
    _save_run(store, "seen")
    for run_id in ("gone", "posted", "seen"):
        store.runs.add_history(run_id, _events(0, 10), _evals(10))
    store.checkpoints.save("gone", 10, {"config.json": b"gone"})
    for step in (10, 20, 30):
        files = {"config.json": f"step {step}".encode(), "model.safetensors": b"w" * step}
        store.checkpoints.save("posted", step, files)
    old_record = _record("old")
    store.records.save(old_record)
    clock.now = t0 + 2 * DAY  # KEEP opens two days later: its term ends two days later too
    store.classes.save("KEEP", keys.hashed("k"), b"s" * 16, last_active=clock.now)
    store.classes.save_post("KEEP", _post("p-posted", "posted"))
    assert store.flush(30)
    assert _checkpoint_steps(store, "posted") == {20, 30}  # the two newest
    assert store.checkpoints.load("posted") == (30, {"config.json": b"step 30", "model.safetensors": b"w" * 30})

    clock.now = t0 + 3 * DAY + 60  # OLD1 is past its term, however active its teacher was; KEEP is not
    store.classes.update("OLD1", last_active=clock.now)
    store.tidy()
    assert store.flush(30)
    assert _count(store.engine, "classes") == 1 and [c.code for c in store.classes.load()] == ["KEEP"]
    assert _count(store.engine, "posts") == 1 and _count(store.engine, "lesson_answers") == 0
    assert _count(store.engine, "rounds") == 1 and _count(store.engine, "learner_runs") == 0
    assert _count(store.engine, "runs") == 3  # days, not hours

    clock.now = t0 + 3.4 * DAY  # the class goes on, its post with it (and a tidy now would let no run go)
    store.classes.update("KEEP", last_active=clock.now)
    store.runs.seen(["seen"])  # its owner opened it
    new_record = _record("new")
    store.records.save(new_record)
    clock.now = t0 + 4 * DAY + 60
    store.tidy()
    assert store.flush(30)
    with store.engine.connect() as connection:
        runs = {row[0] for row in connection.execute(sa.text("SELECT run_id FROM runs"))}
    assert runs == {"posted", "seen"}  # posted: on an open class's board; seen: opened just now
    assert store.runs.load("gone") is None and store.checkpoints.load("gone") is None
    assert _count(store.engine, "run_events", "WHERE run_id = 'gone'") == 0
    assert _count(store.engine, "run_evals", "WHERE run_id = 'gone'") == 0
    assert _checkpoint_steps(store, "gone") == set() and _checkpoint_steps(store, "posted") == {20, 30}
    if store.checkpoint_dir is not None:
        assert not (store.checkpoint_dir / "gone").exists()
    else:
        assert _count(store.engine, "checkpoint_files", "WHERE run_id = 'gone'") == 0
    assert _count(store.engine, "corpora") == 1  # the gone run's own corpus went with it
    assert store.records.load([old_record.record_id, new_record.record_id]) == [new_record]


# -- a resumed run --------------------------------------------------------------------------------------
def test_a_resume_forgets_what_was_logged_after_its_checkpoint_and_keeps_the_checkpoints_own_step(database_url, stores):
    store = stores.open(database_url)
    _save_run(store, "r")
    store.runs.add_history("r", _events(*range(0, 50, 5)), _evals(0, 20, 40))
    assert store.runs.forget_after("r", 20)  # resumed from its checkpoint at step 20: it logs 25 and on again
    row = store.runs.load("r")
    assert [e.step for e in row.history] == [0, 5, 10, 15, 20] and [r.step for r in row.evals] == [0, 20]
    assert row.history[-1] == _events(20)[0] and row.evals[-1] == _evals(20)[0]  # the curve has no hole there


def test_a_kept_record_round_trips_exactly_and_comes_back_in_the_order_asked(database_url, stores):
    store = stores.open(database_url)
    first, second = _record("first"), _record("second", train_loss=(3.0, 2.0, 1.0000000000000002), elapsed=0.1)
    store.records.save(first)
    store.records.save(second)
    store.records.save(replace(first, name="first, renamed"))  # saved again: replaced, not doubled
    assert store.flush(30)
    assert _count(store.engine, "kept_records") == 2
    assert store.records.load([second.record_id, "no-such-record", first.record_id]) == [
        second, replace(first, name="first, renamed")]
    stores.close(store)
    assert stores.open(database_url).records.load([first.record_id]) == [replace(first, name="first, renamed")]


def test_a_kept_record_with_a_loss_that_is_not_finite_round_trips(database_url, stores):
    # JSON and PostgreSQL's json take no NaN or infinity (the store turns a run's events' into text): a
    # record of a run whose loss overflowed is kept all the same
    store = stores.open(database_url)
    record = _record("diverged", train_loss=(3.0, float("inf"), float("nan")), val_loss=(3.1, float("inf")))
    store.records.save(record)
    assert store.flush(30) and store.problem is None
    loaded = store.records.load([record.record_id])
    assert len(loaded) == 1, "the record was not kept"
    assert loaded[0].train_loss[:2] == (3.0, float("inf")) and math.isnan(loaded[0].train_loss[2])
    assert loaded[0].val_loss == (3.1, float("inf"))


# -- a database that is locked, or full, for a while -------------------------------------------------
def test_a_database_locked_by_another_process_is_said_and_every_write_lands_once_it_is_free(tmp_path, stores,
                                                                                            monkeypatch):
    monkeypatch.setattr(engine_module, "BUSY_TIMEOUT_MS", 200)  # give up waiting for the lock quickly: then retry
    monkeypatch.setattr(writer_module, "RETRY_SECONDS", 0.05)
    monkeypatch.setattr(writer_module, "WAIT_SECONDS", 0.1)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = stores.open(url)
    other = sqlite3.connect(tmp_path / "store.db", isolation_level=None)  # a backup tool, a second server
    other.execute("BEGIN EXCLUSIVE")
    queued = [_save_run(store, f"run{i}") for i in range(5)]  # each waits WAIT_SECONDS at most, then the page goes on
    assert queued == [False] * 5  # not in the database yet: the page is not told "saved"
    wait_until(lambda: store.problem is not None, "the store to say the database is busy")
    assert "busy" in str(store.problem) and _is_sentence(store.problem)
    other.execute("ROLLBACK")
    other.close()
    assert store.flush(30)
    assert store.problem is None
    assert _count(store.engine, "runs") == 5  # every write, once the lock was gone
    assert [row.run_id for row in (store.runs.load(f"run{i}") for i in range(5))] == [f"run{i}" for i in range(5)]


def test_a_full_database_is_said_and_loses_nothing_once_it_has_room(tmp_path, stores, monkeypatch):
    monkeypatch.setattr(writer_module, "RETRY_SECONDS", 0.05)
    monkeypatch.setattr(writer_module, "WAIT_SECONDS", 0.1)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = stores.open(url)
    assert _save_run(store, "first")
    pages = store.engine.connect().exec_driver_sql("PRAGMA page_count").scalar()
    room = {"pages": pages}  # the disk as full as the file is now: SQLite's own cap on its pages

    @sa.event.listens_for(store.engine, "begin")
    def cap(connection):
        connection.exec_driver_sql(f"PRAGMA max_page_count = {room['pages']}")

    store.engine.dispose()  # every connection from now on meets the cap
    big = "a long corpus that does not fit. " * 20_000
    assert store.runs.save("second", keys.hashed("k"), {}, big, "big", line_order=None, start_paused=False,
                          max_steps=1) is False
    wait_until(lambda: store.problem is not None and "full" in str(store.problem), "the store to say it is full")
    room["pages"] = 1_000_000  # room again (a disk cleared)
    assert store.flush(30) and store.problem is None
    assert store.runs.load("second").text == big and store.runs.load("first") is not None


def test_writes_made_while_the_database_was_away_at_start_land_in_order_once_it_answers(tmp_path, stores, monkeypatch):
    monkeypatch.setattr(engine_module, "BUSY_TIMEOUT_MS", 100)
    monkeypatch.setattr(writer_module, "RETRY_SECONDS", 0.05)
    monkeypatch.setattr(writer_module, "REOPEN_SECONDS", 0.05)
    other = sqlite3.connect(tmp_path / "store.db", isolation_level=None)  # the file held by another process
    other.execute("BEGIN EXCLUSIVE")
    store = stores.open(f"sqlite:///{tmp_path / 'store.db'}")
    assert not store.ready and "busy" in str(store.problem)
    assert _save_run(store, "early") is False  # not saved yet: the page is told so
    assert store.runs.update("early", step=7) is False and store.runs.add_history("early", _events(10), []) is False
    other.execute("ROLLBACK")
    other.close()
    wait_until(lambda: store.ready and store.flush(1.0), "the store to open and write what waited")
    row = store.runs.load("early")
    assert row is not None and row.step == 7 and [e.step for e in row.history] == [10] and store.problem is None
