"""What the pages say when the server's database cannot be used (app/state/serving.py over
minigpt.serve.store.database), and how long they wait for it: in the page's language and in the app's own
words, the driver's words going to the server's log; a data folder the server cannot write to; a
database locked at start, which holds the first page no longer than an action. The store's own
behaviour is tested in tests/minigpt/serve/test_store*.py, the restarts in tests/app/test_database.py."""
from __future__ import annotations

import logging
import os
import re
import sqlite3
from pathlib import Path

import pytest

from app.chrome.site import BOARD, TRAIN
from app.state import serving
from helpers.apptest import home, own_run, page, session, tiny_settings
from helpers.waiting import wait_until
from minigpt.serve.store import engine as engine_module
from minigpt.serve.store.database import Store

LATIN = re.compile(r"[A-Za-z]")


def data_file() -> Path:
    return Path(os.environ[serving.DATA_ENV]) / serving.DATABASE_FILE


def not_saving(at) -> list[str]:
    """The warnings that say results are not being saved, in either language."""
    return [w.value for w in at.warning if "not being saved" in w.value or "结果暂时没有保存" in w.value]


def start_tiny(at):
    """Start a tiny run from the Train page `at`; it trains whether or not anything is saved."""
    at = tiny_settings(at, max_steps=20, eval_interval=10)
    at.button(key="start").click().run()
    assert not at.exception and own_run(at)
    return at


def test_a_damaged_database_is_said_in_chinese_words_and_the_drivers_words_go_to_the_log(caplog):
    data_file().parent.mkdir(parents=True)
    data_file().write_bytes(b"not a database at all " * 200)
    with caplog.at_level(logging.WARNING):
        at = page(home("zh"), TRAIN.script)
    said = not_saving(at)
    assert said and "损坏" in said[0]
    assert not LATIN.search(said[0]), said[0]  # the driver's English ("file is not a database") stays off the page
    assert "file is not a database" in caplog.text  # ...and reaches whoever runs the server


def test_a_url_sqlalchemy_refuses_is_said_as_such_in_chinese_and_its_words_go_to_the_log(caplog):
    at = session("zh")
    at.secrets["connections"] = {serving.CONNECTION: {"url": "not a database url"}}
    with caplog.at_level(logging.WARNING):
        at.run()
        train = at.switch_page(TRAIN.script).run()
    said = not_saving(train)
    assert said and "SQLAlchemy 无法识别这个数据库 URL" in said[0] and "not a database url" not in said[0]
    assert "Could not parse SQLAlchemy URL" in caplog.text  # SQLAlchemy's own words, for whoever runs the server


def test_an_english_page_gives_the_apps_sentence_not_the_drivers():
    data_file().parent.mkdir(parents=True)
    data_file().write_bytes(b"not a database at all " * 200)
    said = not_saving(page(home("en"), TRAIN.script))
    assert said and "damaged" in said[0] and "file is not a database" not in said[0]


@pytest.mark.trains
def test_a_data_folder_that_cannot_be_written_is_said_in_both_languages_and_runs_train_from_memory(monkeypatch,
                                                                                                    caplog):
    folder = data_file().parent
    folder.mkdir(parents=True)
    real_access = os.access

    def access(path, mode, **kwargs):  # as a read-only disk answers, to root as well
        if Path(path) == folder and mode & os.W_OK:
            return False
        return real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    with caplog.at_level(logging.WARNING):
        train = page(home("en"), TRAIN.script)
    said = not_saving(train)
    assert said and "cannot write to its data folder" in said[0] and serving.DATA_ENV in said[0]
    assert "does not answer" not in said[0]
    assert str(folder) in caplog.text and str(folder) not in said[0]  # the path is for the log
    start_tiny(train)
    zh = page(home("zh"), TRAIN.script)
    said = not_saving(zh)
    assert said and "无法写入它的数据文件夹" in said[0]
    assert not data_file().exists()


@pytest.mark.trains
def test_a_data_folder_that_cannot_be_made_is_said_and_runs_train_from_memory(tmp_path, monkeypatch):
    in_the_way = tmp_path / "a file"
    in_the_way.write_text("a file where the data folder's parent should be")
    monkeypatch.setenv(serving.DATA_ENV, str(in_the_way / "data"))
    train = page(home(), TRAIN.script)
    said = not_saving(train)
    assert said and "cannot write to its data folder" in said[0]
    start_tiny(train)
    board = page(train, BOARD.script)
    assert not_saving(board)


@pytest.mark.trains
def test_a_read_only_database_file_is_said_as_such_once_a_write_meets_it():
    data_file().parent.mkdir(parents=True)
    Store.from_url(f"sqlite:///{data_file()}").close()  # an earlier server's file, opened read-only below
    at = session()
    at.secrets["connections"] = {serving.CONNECTION: {"url": f"sqlite:///file:{data_file()}?mode=ro&uri=true"}}
    at.run()
    train = start_tiny(at.switch_page(TRAIN.script).run())
    store = serving.store()
    wait_until(lambda: store.problem is not None, "the store to meet the read-only file")
    said = not_saving(train.run())
    assert said and "cannot be written" in said[0] and "read-only" in said[0]


def test_a_database_locked_at_start_holds_the_first_page_no_longer_than_an_action(monkeypatch):
    data_file().parent.mkdir(parents=True)
    Store.from_url(f"sqlite:///{data_file()}").close()  # an earlier server's file
    # its lock is waited for as long as it lasts: only a page that stops waiting is drawn before it goes
    monkeypatch.setattr(engine_module, "BUSY_TIMEOUT_MS", 3_600_000)
    other = sqlite3.connect(data_file(), isolation_level=None)  # a backup tool, another server: not even a read gets in
    other.execute("PRAGMA locking_mode = EXCLUSIVE")
    other.execute("BEGIN EXCLUSIVE")
    try:
        train = page(home(), TRAIN.script)  # the server's first page opens the store
        assert not train.exception
        said = not_saving(train)
        assert said and "has not answered yet" in said[0]
    finally:
        other.execute("ROLLBACK")
        other.close()
    store = serving.store()
    wait_until(lambda: store.ready, "the store to open once the lock has gone")
    assert store.problem is None and not not_saving(train.run())
