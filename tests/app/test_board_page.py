"""pages/10_Board.py and app/board.py: a teacher and three learners, each in a session of their own,
through the whole class board: starting a class, joining from its link, posting from Train,
withdrawing, hiding and pinning, the challenge's ranking and refusals, a closed class and an unknown
code, in English and in Chinese.

    pytest tests/app/test_board_page.py
"""
from __future__ import annotations

import pytest

from helpers.apptest import home, page, plotly_spec, tiny_settings, unescaped, wait_finished
from helpers.language import assert_chinese
from app import board
from app.site import BOARD, EXPERIMENTS, TRAIN

pytestmark = [pytest.mark.trains, pytest.mark.slow]


def teacher_class(lang: str | None = None):
    at = page(home(lang), BOARD.script)
    at.button(key="board_start").click().run()
    assert not at.exception
    return at, at.session_state[board.CLASS_KEY]


def learner_posts(code: str, name: str, max_steps: int = 30, lang: str | None = None):
    """A learner opens the class's link, trains a tiny run to its end on Train and posts it."""
    at = home(lang, **{"class": code})
    assert at.session_state[board.CLASS_KEY] == code  # the link alone joins
    at = tiny_settings(page(at, TRAIN.script), max_steps=max_steps)
    at.button(key="start").click().run()
    wait_finished(at)
    at.run()
    at.text_input(key="board_post_name").set_value(name).run()
    at.button(key="board_post").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    said = [unescaped(c.value) for c in at.caption if code in c.value]
    assert len(said) == 1 and name in said[0], said  # under the button, for as long as it is on the board
    return at


def on_board(at):
    at = page(at, BOARD.script)
    assert not at.exception
    return at


def legend(at) -> list[str]:
    spec = plotly_spec(at, 0)
    return [t["name"] for t in spec["data"] if t.get("showlegend") is not False]


def test_a_teacher_and_three_learners_post_withdraw_hide_rank_and_close():
    teacher, code = teacher_class()
    link = teacher.code[0].value
    assert f"class={code}" in link and "teacher=" not in link  # the class's link never carries the key
    assert "teacher" not in teacher.query_params and teacher.query_params["class"] in (code, [code])
    ada = learner_posts(code, "ada")
    bob = learner_posts(code, "bob <b>")
    cy = learner_posts(code, "cy", max_steps=40)

    teacher = on_board(teacher)
    assert legend(teacher) == ["ada", "bob &lt;b&gt;", "cy"]  # one entry per run, markup shown as typed
    table = teacher.dataframe[0].value
    assert list(table["run"]) == ["ada", "bob <b>", "cy"] and list(table["steps"]) == [30, 30, 40]
    assert list(table["Steps"]) == ["30", "30", "40"]  # max_steps is the one setting that differs

    # bob withdraws his run, after a refresh (a new session from his address: the run's id and key);
    # nobody else can: ada's session holds no key to it
    bob_post = next(iter(bob.session_state[board.POSTS_KEY]))
    assert not [b for b in on_board(ada).button if b.key == f"board_withdraw_{bob_post}"]
    run_id, run_key = bob.session_state["own_run"]
    refreshed = on_board(home(**{"class": code, "run": run_id, "key": run_key}))
    refreshed.button(key=f"board_withdraw_{bob_post}").click().run()
    assert not refreshed.exception and not refreshed.error
    teacher = on_board(teacher)
    assert legend(teacher) == ["ada", "cy"]

    # learners hold no teacher's key: no controls, even with a guessed key in the address
    intruder = on_board(home(**{"class": code, "teacher": "guess"}))
    assert board.TEACHER_KEY not in intruder.session_state
    assert not {"board_hide", "board_pin", "board_close"} & {b.key for b in intruder.button}
    assert not {"board_hide", "board_close"} & {b.key for b in on_board(ada).button}

    # the teacher sets a challenge: at most 30 steps; cy's run was set to 40, so it is refused
    teacher.number_input(key="challenge_steps").set_value(30)
    teacher.number_input(key="challenge_params").set_value(0)
    teacher.button(key="FormSubmitter:board_challenge-Set the challenge").click().run()
    shown = "\n".join(m.value for m in teacher.markdown)
    assert "**1.** ada:" in shown and "cy: set to train 40 steps, more than 30" in shown

    # hide cy's run: gone from every viewer's chart, still listed (as hidden) for the teacher
    cy_post = next(iter(cy.session_state[board.POSTS_KEY]))
    teacher.selectbox(key="board_pick").set_value(cy_post).run()
    teacher.button(key="board_hide").click().run()
    assert legend(on_board(ada)) == ["ada"] and legend(teacher) == ["ada"]
    assert teacher.button(key="board_hide").label == "Show again"

    # a page change keeps the class in the address; the teacher's controls survive it
    teacher = on_board(page(teacher, EXPERIMENTS.script))
    assert teacher.query_params["class"] in (code, [code]) and teacher.button(key="board_close")

    teacher.button(key="board_close").click().run()
    after = on_board(ada)
    assert any(f"The class {code} has closed" in w.value for w in after.warning)
    assert after.button(key="board_start")  # and it offers to start one


def test_an_unknown_code_says_so_and_offers_to_start_a_class():
    at = on_board(home(**{"class": "ZZZZ"}))
    assert any("There is no class ZZZZ" in w.value for w in at.warning)
    assert at.button(key="board_start") and not at.get("plotly_chart")


def test_only_the_runs_owner_sees_the_post_button():
    _teacher, code = teacher_class()
    owner = learner_posts(code, "mine")
    run_id = owner.session_state["own_run"][0]
    watcher = page(home(**{"class": code, "run": run_id}), TRAIN.script)  # a read-only link to the run
    assert not watcher.exception and not [b for b in watcher.button if b.key == "board_post"]


def test_the_board_in_chinese():
    teacher, code = teacher_class("zh")
    learner_posts(code, "小明", lang="zh")
    teacher = on_board(teacher)
    assert legend(teacher) == ["小明"]
    assert_chinese(teacher, "the class board", besides=[code, "小明"])


def test_the_teachers_link_gives_the_controls_back_after_a_refresh_and_leaves_the_address_bar():
    teacher, code = teacher_class()
    expander_link = next(c.value for c in teacher.code if "teacher=" in c.value)  # shown to the teacher alone
    key = expander_link.split("teacher=")[1].split("&")[0]
    refreshed = on_board(home(**{"class": code, "teacher": key}))
    assert refreshed.session_state[board.TEACHER_KEY] == (code, key)
    assert refreshed.button(key="board_close")  # the controls are back
    assert "teacher" not in refreshed.query_params  # and the key is gone from the address a projector shows
    assert refreshed.query_params["class"] in (code, [code])
