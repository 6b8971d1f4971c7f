"""minigpt/viz/ as Plotly draws it in a real browser: the tick labels a learner reads off the axes.

A figure's layout can be right on paper and still drawn wrong: Plotly's defaults decide the
ticks, and those change between its versions (an axis overlaying another ticks at the other's
gridlines unless told otherwise). These tests draw each figure with the plotly.js that plotly
ships, in Debian's chromium, and read the labels from the SVG. No server is needed.

    pytest tests/minigpt/viz/test_viz_drawn.py
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from minigpt import TrainConfig
from minigpt.lab.tasks import TaskScore
from minigpt.train import TrainEvent
from minigpt.viz import board_figure, compare_figure, loss_figure, race_figure, right_key_figure, task_figure

pytestmark = pytest.mark.browser
ROUND_STEPS = (1, 2, 2.5, 5)  # a tick step is one of these times a power of ten, as a person would mark an axis


def drawn_ticks(browser, figure) -> dict[str, list[float]]:
    """The numbers on each axis of `figure` as drawn: {"x": […], "y": […], "y2": […]}."""
    page = browser.new_page(viewport={"width": 700, "height": 450})
    try:
        page.set_content(figure.to_html(include_plotlyjs=True, full_html=True))
        page.wait_for_selector(".js-plotly-plot .xtick text")
        labels = page.evaluate("() => Object.fromEntries(['x', 'y', 'y2'].map(a => [a,"
                               " [...document.querySelectorAll(`.${a}tick text`)].map(t => t.textContent)]))")
    finally:
        page.close()
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


def test_the_learning_rate_axis_is_ticked_in_round_rates_up_to_the_rate_drawn(browser):
    """Left to Plotly's default the rate axis ticked at the loss axis' gridlines: 0.000295082,
    0.000590164 … beside a peak of 0.003."""
    cfg = TrainConfig(lr=3e-3, warmup_steps=50, max_steps=600)
    history = events(range(0, 61, 5), cfg)
    ticks = drawn_ticks(browser, loss_figure(history, uniform=math.log(500)))
    peak = max(e.lr for e in history)
    assert len(ticks["y2"]) >= 2 and round_step(ticks["y2"]), ticks["y2"]
    assert ticks["y2"][0] == 0 and ticks["y2"][-1] <= 1.05 * peak, (ticks["y2"], peak)
    assert round_step(ticks["y"]) and round_step(ticks["x"]) and ticks["x"][0] == 0, ticks


@pytest.mark.parametrize("steps", [[], [0], [0, 5]], ids=["before the first step", "the step-0 evaluation", "two"])
def test_a_young_run_is_drawn_on_whole_steps_from_0_and_no_rate_before_it_has_one(browser, steps):
    """Plotly pads an axis of one point, or of none, to either side: step -1, 0.2, 0.4 …; and with
    no rate logged yet the rate axis would read 0 to 1."""
    ticks = drawn_ticks(browser, loss_figure(events(steps, TrainConfig(warmup_steps=10)), uniform=math.log(500)))
    assert ticks["x"] and all(x >= 0 and x == int(x) for x in ticks["x"]), ticks["x"]
    assert (ticks["y2"] == []) == (steps == []), ticks["y2"]


def test_a_tasks_accuracy_from_its_first_evaluation_is_on_whole_steps_from_0(browser):
    first = TrainEvent(step=0, max_steps=300, train_loss=2.1, lr=1e-4, tokens_per_sec=1.0, elapsed=0.0, val_loss=2.1,
                       score=TaskScore(chars=0.125, lines=0.0, chance=0.125, count=64))
    ticks = drawn_ticks(browser, task_figure([first], chance=0.125))
    assert ticks["x"] and all(x >= 0 and x == int(x) for x in ticks["x"]), ticks["x"]
    assert ticks["y"][0] == 0 and round_step(ticks["y"]), ticks["y"]


def first_evaluation(name: str, loss: float) -> SimpleNamespace:
    """A run's record as the board and the comparison read it, at its step-0 evaluation."""
    return SimpleNamespace(name=name, steps=[0], train_loss=[loss], val_steps=[0], val_loss=[loss])


def race_point(step: int, loss: float) -> SimpleNamespace:
    side = SimpleNamespace(loss=loss, entropy=np.array([1.0]), jacobian=np.array([0.5]))
    return SimpleNamespace(step=step, scaled=side, unscaled=side)


YOUNG_STEP_AXES = {  # every figure over training steps, as it looks at a run's first evaluation
    "the class board": lambda: board_figure([SimpleNamespace(label="小明", post_id="p1", pinned=False,
                                                             record=first_evaluation("小明", 6.6))]),
    "the comparison": lambda: compare_figure([first_evaluation("first", 6.6), first_evaluation("faster", 6.5)]),
    "the √d_k race": lambda: race_figure([race_point(0, 6.6)], "loss"),
    "the time-lapse's right keys": lambda: right_key_figure([0], np.full((1, 2, 4), 0.2), chance=0.125),
}


@pytest.mark.parametrize("name", YOUNG_STEP_AXES)
def test_every_figure_over_steps_starts_at_step_0_in_whole_steps(browser, name):
    """The board at the start of a class, when each learner has posted a run at its step-0
    evaluation, read step −1, −0.5, 0, 0.5, 1 off the projector."""
    ticks = drawn_ticks(browser, YOUNG_STEP_AXES[name]())
    assert ticks["x"] and all(x >= 0 and x == int(x) for x in ticks["x"]), ticks["x"]
