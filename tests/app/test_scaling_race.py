"""app/views/scaling_race.py: the √d_k race on the Experiments page: both models drawn, the verdict in measured
numbers, the line for a training slot, and the race in Chinese.

    pytest tests/app/test_scaling_race.py
"""
from __future__ import annotations

import json

import pytest

from app.state import runs
from app.views.scaling_race import RACE_TICKET_KEY
from helpers.apptest import home, own_run, page, start_tiny_run
from helpers.waiting import wait_until
from helpers.figures import plotly_array
from helpers.language import assert_chinese
from minigpt.serve import server as face
from app.chrome.site import EXPERIMENTS


def race_page(lang: str | None = None, steps: int = 100):
    at = page(home(lang), EXPERIMENTS.script)
    at.select_slider(key="race_steps").set_value(steps)
    return at.button(key="race").click().run()


@pytest.mark.trains
@pytest.mark.slow
def test_the_race_draws_both_models_and_says_what_happened_in_the_measured_numbers():
    at = race_page()
    assert not at.exception and not at.warning
    charts = {spec["layout"]["title"]["text"]: spec for spec in map(json.loads, (c.proto.spec for c in at.get("plotly_chart")))}
    entropy = charts["Mean attention entropy (low = saturated)"]["data"]
    scaled, unscaled = (plotly_array(trace["y"]) for trace in entropy)
    assert [t["name"] for t in entropy] == ["with 1/√d_k", "without"]
    assert plotly_array(entropy[0]["x"])[-1] == 100 and len(scaled) == 11  # step 0, then every 10 steps
    assert unscaled[-1] < scaled[-1]  # saturated without the scaling
    jacobian = [plotly_array(t["y"]) for t in charts["How much of a change in the scores softmax lets through"]["data"]]
    said = [m.value for m in at.markdown if m.value.startswith("After 100 steps")]
    assert len(said) == 1
    assert f"an entropy of {unscaled[-1]:.2f} nats ({scaled[-1]:.2f})" in said[0]
    assert f"passed {jacobian[0][-1] / jacobian[1][-1]:.1f}× less" in said[0]
    again = at.run()  # the last race stays on the page
    assert sum(m.value.startswith("After 100 steps") for m in again.markdown) == 1


@pytest.mark.trains
@pytest.mark.slow
def test_a_race_on_a_full_server_waits_in_the_line_then_races_without_a_second_click(monkeypatch):
    monkeypatch.setenv(face.MAX_RUNS_ENV, "1")
    learner = start_tiny_run()
    at = race_page()
    assert not at.exception and not at.warning
    waiting = [i.value for i in at.info if i.value.startswith("The race waits for a training slot")]
    assert len(waiting) == 1 and "**1st in line**" in waiting[0]
    assert not any(m.value.startswith("After") for m in at.markdown)  # nothing trained past the slots
    ticket = at.session_state[RACE_TICKET_KEY][0]
    runs.registry().control(*own_run(learner), "stop")
    wait_until(lambda: runs.registry().get(*ticket).is_active(), "the race's turn")
    at.run()
    assert sum(m.value.startswith("After 100 steps") for m in at.markdown) == 1
    assert runs.registry().get(*ticket) is None and runs.registry().active_count() == 0  # its slot given back


@pytest.mark.trains
@pytest.mark.slow
def test_the_race_in_chinese():
    assert_chinese(race_page("zh"), "Experiments, after a race")


@pytest.mark.trains
@pytest.mark.slow
def test_the_race_trains_what_its_settings_say_and_names_the_layer_where_scaling_mattered_most(monkeypatch):
    """One head of the chosen d_k (d_model = d_k, as the label says), the chosen layers, steps and
    learning rate; with two layers, the verdict names the one whose softmax let through the most
    more with the scaling, read off the chart's own numbers."""
    from app.views import scaling_race

    seen = []
    real = scaling_race.scaling_race
    monkeypatch.setattr(scaling_race, "scaling_race", lambda config, train, *a, **k: seen.append((config, train))
                        or real(config, train, *a, **k))
    at = page(home(), EXPERIMENTS.script)
    at.select_slider(key="race_d_k").set_value(32)
    at.select_slider(key="race_layers").set_value(2)
    at.select_slider(key="race_lr").set_value(0.01)
    at.select_slider(key="race_steps").set_value(100)
    at.button(key="race").click().run()
    assert not at.exception
    (config, train), = seen
    assert (config.d_model, config.num_heads, config.d_k, config.num_layers) == (32, 1, 32, 2)
    assert (train.max_steps, train.lr) == (100, 0.01)
    charts = {spec["layout"]["title"]["text"]: spec for spec in map(json.loads, (c.proto.spec for c in at.get("plotly_chart")))}
    traces = charts["How much of a change in the scores softmax lets through"]["data"]
    by_layer = {t["name"]: plotly_array(t["y"])[-1] for t in traces}
    ratios = [by_layer[f"with 1/√d_k · layer {n}"] / by_layer[f"without · layer {n}"] for n in (1, 2)]
    named = next(m.value for m in at.markdown if m.value.startswith("After 100 steps"))
    assert f"layer {1 + ratios.index(max(ratios))}'s rows" in named, (ratios, named)


@pytest.mark.trains
@pytest.mark.slow
def test_when_the_two_losses_agree_the_page_says_why():
    at = race_page()
    points = at.session_state["race_shown"]
    gap = points[-1].unscaled.loss - points[-1].scaled.loss
    note = [i.value for i in at.info if "Why the two losses agree" in i.value]
    assert bool(note) == (abs(gap) < 0.05 * points[-1].scaled.loss)
    if note:
        assert f"within {abs(gap):.3f} nats" in note[0] and "task-sort" in note[0]
