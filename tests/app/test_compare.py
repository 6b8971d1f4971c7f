"""app/parts/compare.py: runs kept for comparison on the Experiments page, the read-only link in another
session, the run a new Start replaces, and the comparison in Chinese.

    pytest tests/app/test_compare.py
"""
from __future__ import annotations

import pytest

from helpers.apptest import home, page, plotly_spec, start_tiny_run, tiny_settings, wait_finished, wait_for_step
from helpers.language import assert_chinese
from app.state.kept_runs import KEPT_KEY, MAX_KEPT, MAX_NAME, NOTICE_KEY, shelf
from app.chrome.site import EXPERIMENTS, TRAIN


def finished(at, steps: int):
    """Wait for the run's end, its last event logged at `steps`."""
    assert wait_finished(at).run.snapshot().history[-1].step == steps
    return at.run()


def kept_run(at, steps: int, name: str):
    """Wait for the run's end, then keep it under `name`."""
    at = finished(at, steps)
    at.text_input(key="keep_name").set_value(name).run()
    at.button(key="keep_run").click().run()
    assert not at.exception
    return at


@pytest.mark.trains
@pytest.mark.slow
def test_two_kept_runs_compare_on_one_chart_with_the_setting_that_differs_and_a_link_for_others():
    at = kept_run(start_tiny_run(max_steps=40), 40, "slow")
    at = page(at, EXPERIMENTS.script)
    at.button(key="duplicate_run").click().run()  # the form filled with that run's settings, and on to Train
    assert not at.exception and at.session_state["max_steps"] == 40
    at = page(at, TRAIN.script)
    assert at.number_input(key="max_steps").value == 40
    at.select_slider(key="lr").set_value(3e-2).run()
    at.button(key="start").click().run()
    at = kept_run(at, 40, "fast")
    at = page(at, EXPERIMENTS.script)
    assert not at.exception
    curves = plotly_spec(at, len(at.get("plotly_chart")) - 1)
    names = [t["name"] for t in curves["data"]]
    assert names == ["slow · val loss", "slow · train loss", "fast · val loss", "fast · train loss"]
    settings, results = (d.value for d in at.dataframe)  # the settings that differ, then the results
    assert list(settings.index) == ["Learning rate", "Lowest learning rate"]  # the lowest follows lr
    assert list(settings.loc["Learning rate"]) == ["0.003", "0.03"]
    assert list(results["run"]) == ["slow", "fast"] and list(results["steps"]) == [40, 40]

    link = at.code[-1].value
    ids = link.split("compare=")[1].split("&")[0]
    other = home()  # another session: nothing of this one's, until it opens the link
    assert not page(other, EXPERIMENTS.script).dataframe
    shared = page(home(compare=ids), EXPERIMENTS.script)
    assert list(shared.dataframe[1].value["run"]) == ["slow", "fast"]
    assert shared.query_params["compare"] in (ids, [ids])  # kept in its address: a refresh brings them back
    assert at.query_params["compare"] in (ids, [ids])


@pytest.mark.trains
@pytest.mark.slow
def test_the_run_start_replaces_is_kept_and_the_current_one_is_compared_as_it_is_now():
    at = finished(start_tiny_run(max_steps=30), 30)
    at.select_slider(key="lr").set_value(3e-2).run()
    at.button(key="start").click().run()  # replaces the first run: it is kept on its own, as "run 1"
    at = page(at, EXPERIMENTS.script)
    assert not at.exception
    live = plotly_spec(at, len(at.get("plotly_chart")) - 1)
    first_names = [t["name"] for t in live["data"]]
    assert first_names[:2] == ["run 1 · val loss", "run 1 · train loss"]
    assert first_names[2].startswith("this run"), first_names  # the current run, "training" while it trains
    at = page(finished(page(at, TRAIN.script), 30), EXPERIMENTS.script)
    settings, results = (d.value for d in at.dataframe)
    assert list(results["run"]) == ["run 1", "this run"] and list(results["steps"]) == [30, 30]  # as it is now
    assert list(settings.loc["Learning rate"]) == ["0.003", "0.03"]
    assert "compare=" in at.code[-1].value and at.code[-1].value.count(",") == 0  # the link: run 1 only

    at.text_input(key="rename_name").set_value("slow").run()
    at.button(key="rename_run").click().run()
    assert list(at.dataframe[1].value["run"]) == ["slow", "this run"]
    shared = page(home(compare=at.query_params["compare"][0] if isinstance(at.query_params["compare"], list)
                       else at.query_params["compare"]), EXPERIMENTS.script)
    assert list(shared.dataframe[0].value["run"]) == ["slow"]  # renamed for the link too (one run: no settings table)
    assert "rename_source" not in [s.key for s in shared.selectbox]  # a run from a link is its owner's to name

    at = page(at, TRAIN.script)
    at.text_input(key="keep_name").set_value("fast").run()
    at.button(key="keep_run").click().run()
    at.button(key="start").click().run()  # kept as it is already: not kept a second time
    at = page(at, EXPERIMENTS.script)
    options = at.multiselect(key="compare_chosen").options  # as the learner reads them
    assert options[:2] == ["slow", "fast"] and len(options) == 3 and options[2].startswith("this run")


def test_a_link_to_runs_the_server_let_go_says_so():
    at = page(home(compare="AAAAAAAAAAAA,bad id!"), EXPERIMENTS.script)
    assert not at.exception and any("no longer on this server" in w.value for w in at.warning)


@pytest.mark.trains
@pytest.mark.slow
def test_the_comparison_in_chinese():
    at = kept_run(start_tiny_run("zh", max_steps=30), 30, "第一")
    at = page(at, EXPERIMENTS.script)
    assert_chinese(at, "Experiments, comparing a kept run")


@pytest.mark.trains
@pytest.mark.slow
def test_a_kept_run_past_the_sessions_limit_lets_the_oldest_go_and_says_so():
    """A session keeps MAX_KEPT runs: one more lets the oldest go (never the newest), with a notice."""
    at = finished(start_tiny_run(max_steps=20), 20)
    for n in range(1, MAX_KEPT + 2):
        at.text_input(key="keep_name").set_value(f"k{n}").run()
        at.button(key="keep_run").click().run()
    assert not at.exception
    kept = [record.name for record in shelf().get(at.session_state[KEPT_KEY])]
    assert kept == [f"k{n}" for n in range(2, MAX_KEPT + 2)]
    assert str(MAX_KEPT) in at.session_state[NOTICE_KEY]


@pytest.mark.trains
def test_a_replaced_run_is_kept_only_if_it_trained_a_step():
    """Reset twice: the first run, paused at step 0, is let go unkept. Ten steps later, Reset keeps it."""
    at = tiny_settings(page(home(), TRAIN.script), max_steps=100, eval_interval=5)
    at.button(key="reset").click().run()  # a run paused at step 0
    at.button(key="reset").click().run()  # replaces it: nothing to keep, it never stepped
    assert not at.exception and KEPT_KEY not in at.session_state
    at.button(key="step").click().run()  # ten steps, then paused
    assert wait_for_step(at, 10) == 10
    at.button(key="reset").click().run()
    assert not at.exception
    kept = shelf().get(at.session_state[KEPT_KEY])
    assert [(record.name, record.val_steps[-1]) for record in kept] == [("run 1", 10)]


@pytest.mark.trains
def test_one_name_kept_three_times_is_numbered_each_time():
    at = finished(start_tiny_run(max_steps=20), 20)
    for _ in range(3):
        at.text_input(key="keep_name").set_value("mine").run()
        at.button(key="keep_run").click().run()
    assert [record.name for record in shelf().get(at.session_state[KEPT_KEY])] == ["mine", "mine (2)", "mine (3)"]


@pytest.mark.trains
def test_keep_on_a_run_that_has_not_trained_a_step_says_so_and_keeps_nothing():
    """Keep pressed just after Start (here: Reset, paused at step 0) would put a run with no curve on
    the shelf, nothing to see on Experiments: it says to wait instead, as a replaced run that never
    trained a step is not kept either. Once the run has stepped, Keep keeps it."""
    at = tiny_settings(page(home(), TRAIN.script), max_steps=100, eval_interval=5)
    at.button(key="reset").click().run()
    at.text_input(key="keep_name").set_value("too soon").run()
    at.button(key="keep_run").click().run()
    assert not at.exception and KEPT_KEY not in at.session_state
    assert any("has not trained a step yet" in w.value for w in at.warning)
    at.button(key="step").click().run()  # ten steps, then paused again
    assert wait_for_step(at, 10) == 10
    at.button(key="keep_run").click().run()
    kept = shelf().get(at.session_state[KEPT_KEY])
    assert [(record.name, record.final_step) for record in kept] == [("too soon", 10)]


@pytest.mark.trains
@pytest.mark.slow
def test_a_pasted_long_name_is_cut_at_the_limit_and_the_page_says_so_then_kept_as_shown():
    """A browser drops a paste longer than a box's max_chars whole, without a word (issue 58): the box
    takes it, cuts it and says so."""
    at = finished(start_tiny_run(max_steps=20), 20)
    pasted = "a very long name " * 30
    at.text_input(key="keep_name").set_value(pasted).run()
    assert at.text_input(key="keep_name").value == pasted[:MAX_NAME]
    assert any(f"at most {MAX_NAME} characters" in c.value for c in at.caption), [c.value for c in at.caption]
    at.button(key="keep_run").click().run()
    assert [record.name for record in shelf().get(at.session_state[KEPT_KEY])] == [pasted[:MAX_NAME].strip()]
    at.text_input(key="keep_name").set_value("short").run()
    assert not any(f"at most {MAX_NAME} characters" in c.value for c in at.caption)  # the note goes once a name fits
