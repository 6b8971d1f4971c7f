"""The line message in Chinese (app/parts/line.py and its entries in the zh catalog): what a learner
waiting for a training slot reads says what the English says, for one slot as for many, and a Start
the line refuses says why in the page's language. The line itself is tested in tests/app/test_runs.py,
tests/minigpt/serve/test_registry.py and test_line_limit.py."""
from __future__ import annotations

import pytest

from app.chrome import i18n
from app.chrome.site import TRAIN
from app.state import runs
from helpers.apptest import home, own_run, page, start_tiny_run, tiny_settings
from helpers.language import GLOSSED, english_words
from minigpt.serve import server as face

ALL = ("都", "全部", "所有", "每个")  # "all", "every": words for many, which one slot is not


@pytest.mark.trains
def test_a_learner_waiting_for_the_servers_one_slot_reads_that_it_is_taken_not_that_all_are(monkeypatch):
    monkeypatch.setenv(face.MAX_RUNS_ENV, "1")
    start_tiny_run("zh")
    waiting = start_tiny_run("zh")
    assert runs.registry().get(*own_run(waiting)).is_waiting()
    shown = [i.value for i in waiting.info if i.value.startswith("**排在第 1 位**")]
    assert len(shown) == 1, [i.value for i in waiting.info]
    assert "1 个" in shown[0] and not any(word in shown[0] for word in ALL), shown[0]
    assert "。 " not in shown[0], shown[0]  # its sentences run on, as Chinese writes them


def test_before_any_pace_the_chinese_says_no_run_has_trained_not_that_none_has_finished():
    # a run still training gives the server its pace too: the estimate waits for a run that trained at all
    said = i18n.catalog("zh").gettext("no run has trained on this server yet, so it cannot tell when yours starts")
    assert "训练" in said and "完" not in said, said


@pytest.mark.trains
def test_a_start_that_would_wait_past_the_lesson_is_refused_in_chinese_saying_how_long(monkeypatch):
    monkeypatch.setenv(face.MAX_RUNS_ENV, "1")
    training = runs.registry().get(*own_run(start_tiny_run("zh")))
    runs.registry().speeds.finished(training.spec.shape, 20_000, 2_000_000.0)  # its size trains at 0.01 steps/s here
    at = tiny_settings(page(home("zh"), TRAIN.script))
    at.button(key="start").click().run()  # it would start when the training run ends: in about 2,000,000 s
    shown = [e.value for e in at.error]
    assert len(shown) == 1 and "120" in shown[0] and not english_words(shown[0], GLOSSED), shown
    assert runs.registry().waiting_count() == 0
