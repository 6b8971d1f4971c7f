"""app/state/serving.py and what the pages do with the store: runs and classes across a restart of
the server (its process-wide resources let go and made again, as a new process makes them), an
interrupted run resumed from the Train page, a database that cannot be used, the teacher's erase.
The store's own behaviour is tested in tests/minigpt/serve/test_store*.py."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from app.chrome.site import BOARD, TRAIN
from app.state import classroom, kept_runs, runs, serving
from helpers.apptest import (PAGES, home, own_run, page, session, start_tiny_run, step_of, wait_finished,
                             wait_for_step)
from helpers.waiting import wait_until

pytestmark = pytest.mark.trains


def restart() -> None:
    """What a new server process does: the registry (its runs closed, what they logged written), the
    classes and the store are made again, from the database."""
    serving.server.clear()


def data_file() -> Path:
    return Path(os.environ[serving.DATA_ENV]) / serving.DATABASE_FILE


def warnings(at) -> list[str]:
    return [w.value for w in at.warning]


def test_the_default_is_an_sqlite_file_in_the_data_folder_and_saving_is_on():
    at = page(home(), TRAIN.script)
    assert not at.exception
    server = serving.server()
    assert server.store is not None and server.store_problem is None and server.store.engine.dialect.name == "sqlite"
    assert data_file().is_file()
    assert not any("not being saved" in w for w in warnings(at))


def test_a_finished_run_outlives_a_restart_at_its_owners_address():
    at = start_tiny_run(max_steps=30, eval_interval=10)
    entry = wait_finished(at)
    run_id, key = own_run(at)
    history = [(e.step, e.train_loss) for e in entry.run.snapshot().history]
    restart()
    back = page(home(run=run_id, key=key), TRAIN.script)
    assert not back.exception
    assert own_run(back) == (run_id, key)  # the owner's key still opens it: the store kept its digest
    assert {m.label: m.value for m in back.metric}["State"] == "finished"
    stored = runs.registry().get(run_id)
    assert [(e.step, e.train_loss) for e in stored.run.snapshot().history] == history
    assert not any("no longer on this server" in w for w in warnings(back))


def test_an_interrupted_run_says_where_it_goes_on_from_and_resumes_on_its_owners_click():
    at = start_tiny_run(max_steps=2_000, eval_interval=10)
    wait_for_step(at, 25)  # past two evaluations, so past two checkpoints
    run_id, key = own_run(at)
    restart()  # the run was training: closed with the registry, it keeps its last evaluation's checkpoint
    back = page(home(run=run_id, key=key), TRAIN.script)
    assert {m.label: m.value for m in back.metric}["State"] == "interrupted"
    note = next(w for w in warnings(back) if "Interrupted at step" in w)
    resume = runs.registry().get(run_id).run.resume_step
    assert resume is not None and resume % 10 == 0 and resume >= 20 and f"step {resume:,}" in note
    assert not back.button(key="resume").disabled
    back.button(key="resume").click().run()
    assert not back.exception
    entry = runs.registry().get(run_id, key)
    wait_until(lambda: entry.run.snapshot().step > resume, "the resumed run to train on past its checkpoint")
    assert entry.run_id == run_id and step_of(back.run()) > resume


def test_a_watcher_of_an_interrupted_run_cannot_resume_it():
    at = start_tiny_run(max_steps=2_000, eval_interval=10)
    wait_for_step(at, 15)
    run_id, _key = own_run(at)
    restart()
    watcher = page(home(run=run_id), TRAIN.script)
    assert any("Its owner can resume it" in w for w in warnings(watcher))
    assert watcher.button(key="resume").disabled


def test_a_database_url_whose_driver_is_missing_is_said_and_the_app_trains_from_memory():
    at = session()
    at.secrets["connections"] = {serving.CONNECTION: {"url": "postgresql+pg8000://learner@127.0.0.1:1/minigpt"}}
    at.run()
    at.switch_page(TRAIN.script).run()
    said = [w for w in warnings(at) if "not being saved" in w]
    assert said and "pg8000" in said[0] and "pip install" in said[0]
    at.button(key="start").click().run()
    assert not at.exception and own_run(at)  # training goes on, in memory


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["a data folder that cannot be made", "a URL SQLAlchemy refuses"],
                         ids=["folder-not-made", "url-refused"])
def test_a_database_that_cannot_be_made_is_said_and_every_page_serves_from_memory(fault, tmp_path, monkeypatch):
    at = session()
    if fault == "a data folder that cannot be made":
        in_the_way = tmp_path / "a file"  # root may write anywhere, but no one makes a folder inside a file
        in_the_way.write_text("not a folder")
        monkeypatch.setenv(serving.DATA_ENV, str(in_the_way / "data"))
    else:
        at.secrets["connections"] = {serving.CONNECTION: {"url": "not a database url"}}
    assert not at.run().exception
    for path in PAGES:
        assert not page(at, path).exception, path
    at = page(at, TRAIN.script)
    assert any("not being saved" in w for w in warnings(at))
    at.button(key="start").click().run()
    assert not at.exception and own_run(at)  # training goes on, in memory
    board = page(at, BOARD.script)
    assert not board.exception and any("not being saved" in w for w in warnings(board))
    board.button(key="board_start").click().run()  # a class opens, from memory
    assert not board.exception and board.session_state[classroom.CLASS_KEY]


def test_a_damaged_database_file_is_said_on_train_and_the_board_and_left_as_it_was():
    data_file().parent.mkdir(parents=True, exist_ok=True)
    data_file().write_bytes(b"not a database at all " * 200)
    before = data_file().read_bytes()
    at = page(home(), TRAIN.script)
    assert any("not being saved" in w and "damaged" in w for w in warnings(at))
    at.button(key="start").click().run()
    assert not at.exception
    board = page(at, BOARD.script)
    assert any("not being saved" in w for w in warnings(board))
    board.button(key="board_start").click().run()  # a class opens, from memory
    assert board.session_state[classroom.CLASS_KEY]
    assert data_file().read_bytes() == before


def test_a_class_outlives_a_restart_and_its_teacher_erases_its_data():
    at = start_tiny_run(max_steps=30, eval_interval=10)
    wait_finished(at)
    run_id, _key = own_run(at)
    board = page(at, BOARD.script)
    board.button(key="board_start").click().run()
    code = board.session_state[classroom.CLASS_KEY]
    _code, teacher = board.session_state[classroom.TEACHER_KEY]
    train = page(board, TRAIN.script)
    train.text_input(key="board_post_name").input("Ada").run()
    train.button(key="board_post").click().run()
    assert not train.exception
    restart()
    view = classroom.board_view(code)
    assert [(row.label, row.run_id, row.state) for row in view.rows] == [("Ada", run_id, "finished")]
    assert classroom.classes().find(code).is_teacher(teacher)
    classroom.erase_class(code, teacher)
    store = serving.store()
    store.flush(10)
    assert store.classes.load() == [] and store.runs.load(run_id) is None
    restart()
    assert runs.registry().get(run_id) is None


def test_a_database_from_a_newer_version_is_said_in_chinese_and_left_alone():
    from minigpt.serve.store.database import Store
    from minigpt.serve.store.schema import SCHEMA_VERSION

    data_file().parent.mkdir(parents=True)
    store = Store.from_url(f"sqlite:///{data_file()}")  # an older app's file, rewritten below by a newer one
    store.close()
    with sqlite3.connect(data_file()) as connection:
        connection.execute("UPDATE minigpt_meta SET value = ? WHERE name = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    before = data_file().read_bytes()
    at = page(home("zh"), TRAIN.script)
    said = [w for w in warnings(at) if "结果暂时没有保存" in w]
    assert said and str(SCHEMA_VERSION + 1) in said[0] and str(SCHEMA_VERSION) in said[0]
    assert data_file().read_bytes() == before


def test_a_kept_comparison_outlives_a_restart_at_its_address():
    at = start_tiny_run(max_steps=30, eval_interval=10)
    wait_finished(at)
    at.button(key="keep_run").click().run()
    kept = at.session_state[kept_runs.KEPT_KEY]
    record = kept_runs.shelf().get(kept)[0]
    restart()
    back = page(home(compare=",".join(kept)), TRAIN.script)
    assert back.session_state[kept_runs.KEPT_KEY] == kept
    assert kept_runs.shelf().get(kept) == [record]
