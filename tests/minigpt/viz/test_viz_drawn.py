"""minigpt/viz/ as Plotly draws it in a real browser: the tick labels a learner reads off the axes.

A figure's layout can be right on paper and still drawn wrong: Plotly's defaults decide the
ticks, and those change between its versions (an axis overlaying another ticks at the other's
gridlines unless told otherwise). These tests draw each figure with the plotly.js that plotly
ships, in Debian's chromium, and read the labels from the SVG. No server is needed.

    pytest tests/minigpt/viz/test_viz_drawn.py
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from helpers.browser import plotly_page
from helpers.figures import over_steps
from minigpt import TrainConfig
from minigpt.train import TrainEvent
from minigpt.viz import loss_figure

pytestmark = pytest.mark.browser
ROUND_STEPS = (1, 2, 2.5, 5)  # a tick step is one of these times a power of ten, as a person would mark an axis


@pytest.fixture(scope="module")
def plot(browser):
    """One page with the plotly.js that plotly ships, loaded once; each test draws on it afresh."""
    with plotly_page(browser, 700, 450) as page:
        yield page


def drawn_ticks(plot, figure) -> dict[str, list[float]]:
    """The numbers on each axis of `figure` as drawn: {"x": […], "y": […], "y2": […]}."""
    labels = plot.evaluate("async (figure) => { const div = document.getElementById('figure'); Plotly.purge(div);"
                           " await Plotly.newPlot(div, figure.data, figure.layout);"  # resolves once it is drawn
                           " return Object.fromEntries(['x', 'y', 'y2'].map(a => [a,"
                           " [...div.querySelectorAll(`.${a}tick text`)].map(t => t.textContent)])) }",
                           json.loads(figure.to_json()))
    return {axis: [number(text) for text in texts] for axis, texts in labels.items()}


def number(label: str) -> float:
    """A tick label's value: Plotly writes minus as U+2212, and a percentage with its sign."""
    label = label.replace("\u2212", "-")
    return float(label[:-1]) / 100 if label.endswith("%") else float(label)


def round_step(ticks: list[float]) -> bool:
    """Evenly spaced, by 1, 2, 2.5 or 5 times a power of ten."""
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    if not gaps or gaps[0] <= 0 or any(not math.isclose(g, gaps[0], rel_tol=1e-6) for g in gaps):
        return False
    mantissa = gaps[0] / 10 ** math.floor(math.log10(gaps[0]))
    return any(math.isclose(mantissa, m, rel_tol=1e-6) for m in ROUND_STEPS)


def events(steps, cfg: TrainConfig) -> list[TrainEvent]:
    """A run's log at `steps`: the warmup's rate written out by hand (cfg.lr · (step + 1) / warmup),
    a falling loss, an evaluation every tenth step."""
    return [TrainEvent(step=s, max_steps=cfg.max_steps, train_loss=4.0 - s / 100,
                       lr=cfg.lr * min(1.0, (s + 1) / cfg.warmup_steps), tokens_per_sec=1.0, elapsed=s,
                       val_loss=(4.2 - s / 100) if s % 10 == 0 else None) for s in steps]


def test_the_learning_rate_axis_is_ticked_in_round_rates_up_to_the_rate_drawn(plot):
    """Left to Plotly's default the rate axis ticked at the loss axis' gridlines: 0.000295082,
    0.000590164 … beside a peak of 0.003."""
    cfg = TrainConfig(lr=3e-3, warmup_steps=50, max_steps=600)
    history = events(range(0, 61, 5), cfg)
    ticks = drawn_ticks(plot, loss_figure(history, uniform=math.log(500)))
    peak = max(e.lr for e in history)
    assert len(ticks["y2"]) >= 2 and round_step(ticks["y2"]), ticks["y2"]
    assert ticks["y2"][0] == 0 and ticks["y2"][-1] <= 1.05 * peak, (ticks["y2"], peak)
    assert round_step(ticks["y"]) and round_step(ticks["x"]) and ticks["x"][0] == 0, ticks
    assert len(ticks["x"]) <= 10, ticks["x"]  # 60 steps are not ticked one by one


def whole_steps_from_0(ticks: list[float]) -> bool:
    return bool(ticks) and ticks[0] == 0 and all(x == int(x) for x in ticks)


@pytest.mark.parametrize("steps", [[], [0], [0, 2], [0, 5]],
                         ids=["before the first step", "the step-0 evaluation", "two steps", "five steps"])
def test_a_young_run_is_drawn_on_whole_steps_from_0_and_no_rate_before_it_has_one(plot, steps):
    """Plotly pads an axis of one point, or of none, to either side: step -1, 0.2, 0.4 …; and with
    no rate logged yet the rate axis would read 0 to 1."""
    ticks = drawn_ticks(plot, loss_figure(events(steps, TrainConfig(warmup_steps=10)), uniform=math.log(500)))
    assert whole_steps_from_0(ticks["x"]), ticks["x"]
    assert (ticks["y2"] == []) == (steps == []), ticks["y2"]


FIGURES = sorted(over_steps([0]))


@pytest.mark.parametrize("steps", [[0], [0, 2]], ids=["the step-0 evaluation", "two steps"])
@pytest.mark.parametrize("name", FIGURES)
def test_every_figure_over_steps_draws_a_young_run_on_whole_steps_from_0(plot, name, steps):
    """The board at the start of a class, when each learner has posted a run at its step-0
    evaluation, read step −1, −0.5, 0, 0.5, 1 off the projector."""
    ticks = drawn_ticks(plot, over_steps(steps)[name])
    assert whole_steps_from_0(ticks["x"]), ticks["x"]


@pytest.mark.parametrize("name", FIGURES)
def test_every_figure_over_steps_ticks_a_grown_run_in_round_steps_from_0(plot, name):
    ticks = drawn_ticks(plot, over_steps(range(0, 61, 5))[name])
    assert ticks["x"][0] == 0 and round_step(ticks["x"]) and len(ticks["x"]) <= 10, ticks["x"]


def drawn_y_titles(plot, figure) -> dict:
    """The figure's y titles as drawn: those Plotly draws along an axis ("turned"), and the level ones
    (annotations) with where they sit, in px from the figure's top, beside the plot area's top."""
    return plot.evaluate(
        "async (figure) => { const div = document.getElementById('figure'); Plotly.purge(div);"
        " await Plotly.newPlot(div, figure.data, figure.layout);"
        " const top = div.querySelector('.nsewdrag').getBoundingClientRect().top;"
        " const svg = div.querySelector('.main-svg').getBoundingClientRect();"
        " const level = [...div.querySelectorAll('.annotation')].map(a => { const box = a.getBoundingClientRect();"
        "   return {text: a.textContent, top: box.top - svg.top, bottom: box.bottom - svg.top,"
        "           transform: a.querySelector('text').getAttribute('transform') || ''} });"
        " return {turned: [...div.querySelectorAll('.ytitle, .y2title')].map(t => t.textContent).filter(t => t),"
        "         level, plot_top: top - svg.top} }",
        json.loads(figure.to_json()))


def test_a_chinese_y_title_is_drawn_level_above_the_plot_and_inside_the_figure(plot):
    """The Model page drew 位置 turned 90° beside the position heatmap."""
    from minigpt.viz import loss_figure, positions_figure

    chinese = {"position": "位置", "cross-entropy loss (nats)": "交叉熵损失（奈特）", "learning rate": "学习率"}
    tr = lambda message, **params: chinese.get(message, message).format(**params)  # noqa: E731
    figures = [positions_figure(np.random.default_rng(0).normal(size=(8, 16)), tr=tr),
               loss_figure(events(range(0, 61, 5), TrainConfig(warmup_steps=10)), tr=tr)]
    for figure, titles in zip(figures, [{"位置"}, {"交叉熵损失（奈特）", "学习率"}]):
        drawn = drawn_y_titles(plot, figure)
        assert drawn["turned"] == [], drawn
        level = [note for note in drawn["level"] if note["text"] in titles]
        assert {note["text"] for note in level} == titles, drawn
        for note in level:
            assert "rotate" not in note["transform"], note
            assert 0 <= note["top"] and note["bottom"] <= drawn["plot_top"] + 1, (note, drawn["plot_top"])
    english = drawn_y_titles(plot, positions_figure(np.random.default_rng(0).normal(size=(8, 16))))
    assert english["turned"] == ["position"]
