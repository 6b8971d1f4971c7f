"""minigpt/viz/: a y-axis title in Chinese reads level, above its axis; one in English stays where
Plotly puts it, turned along the axis. Every builder with a y title, built with a `tr` that
writes each message with Chinese in it. How the level titles are drawn: test_viz_drawn.py.

    pytest tests/minigpt/viz/test_viz_level_titles.py
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from minigpt import viz
from minigpt.viz import english
from minigpt.viz._layout import is_cjk


def chinese(message: str, /, **params) -> str:
    """A stand-in for the app's zh `tr`: every message with a Chinese word in front."""
    return "图：" + english(message, **params)


def built(tr) -> dict:
    """Every figure of minigpt.viz with a y-axis title, built with `tr`."""
    steps, losses = [0, 10, 20], [4.0, 3.5, 3.0]
    record = SimpleNamespace(name="a", steps=steps, train_loss=losses, val_steps=steps, val_loss=losses)
    table = pd.DataFrame({"d_k": [4, 16], "entropy_unscaled": [1.0, 0.5], "entropy_scaled": [2.0, 2.0],
                          "max_weight_unscaled": [0.6, 0.9], "max_weight_scaled": [0.3, 0.3],
                          "score_std_unscaled": [2.0, 4.0], "score_std_scaled": [1.0, 1.0]})
    race_side = SimpleNamespace(loss=3.0, entropy=np.array([1.0]), jacobian=np.array([0.5]))
    rng = np.random.default_rng(0)
    return {
        "the loss chart": viz.loss_figure(_events(), tr=tr),
        "the learning rate": viz.lr_figure([1e-4, 1e-3, 5e-4], 1, tr=tr),
        "a task's accuracy": viz.task_figure(_events(), chance=0.125, tr=tr),
        "the comparison": viz.compare_figure([record], tr=tr),
        "the class board": viz.board_figure([SimpleNamespace(label="a", post_id="p1", pinned=False, record=record)],
                                            tr=tr),
        "the √d_k race": viz.race_figure([SimpleNamespace(step=0, scaled=race_side, unscaled=race_side)], "loss",
                                         tr=tr),
        "the right keys": viz.right_key_figure(steps, np.full((3, 2, 4), 0.2), chance=0.125, tr=tr),
        "the √d_k entropy": viz.scaling_figure(table, "entropy", tr=tr),
        "the score's spread": viz.score_std_figure(table, tr=tr),
        "the positions": viz.positions_figure(rng.normal(size=(8, 16)), tr=tr),
        "their similarity": viz.similarity_figure(rng.normal(size=(8, 8)), tr=tr),
        "the embeddings": viz.embeddings_figure(rng.normal(size=(5, 2)), list("abcde"), np.array([0.3, 0.2]), tr=tr),
        "an attention heatmap": viz.attention_heatmap(np.tril(np.full((4, 4), 0.25)), "abcd", "t", tr=tr),
    }


def _events():
    from minigpt.lab.tasks import TaskScore
    from minigpt.train import TrainEvent

    return [TrainEvent(step=s, max_steps=100, train_loss=4.0 - s / 10, lr=1e-3, tokens_per_sec=1.0, elapsed=s,
                       val_loss=4.1 - s / 10, score=TaskScore(chars=0.5, lines=0.25, chance=0.125, count=8))
            for s in (0, 10, 20)]


def y_axes(figure) -> dict:
    layout = figure.to_plotly_json()["layout"]
    return {key: axis for key, axis in layout.items() if key.startswith("yaxis")}


def title(axis: dict) -> str:
    return (axis.get("title") or {}).get("text") or ""


@pytest.mark.parametrize("name", list(built(english)))
def test_a_chinese_y_title_reads_level_above_its_axis(name):
    english_figure, figure = built(english)[name], built(chinese)[name]
    titled = {key: title(axis) for key, axis in y_axes(english_figure).items() if title(axis)}
    assert titled, f"{name} has no y title"  # the list above is of the figures that have one
    layout = figure.to_plotly_json()["layout"]
    for key, text in titled.items():
        assert not is_cjk(title(layout[key])), (name, key)  # nothing left to plotly to turn
        note = next(a for a in layout["annotations"] if a["text"] == chinese(text))
        assert note["yref"] == f"y{key[5:]} domain" and note["y"] == 1 and note["yanchor"] == "bottom"
        assert note.get("textangle", 0) == 0
        right = layout[key].get("side") == "right"
        assert (note["x"], note["xanchor"]) == ((1, "right") if right else (0, "left"))
    english_margin = english_figure.layout.margin.t
    if english_margin is not None:  # the top margin grew to hold the title
        assert figure.layout.margin.t >= english_margin + 20


@pytest.mark.parametrize("name", list(built(english)))
def test_an_english_y_title_is_left_to_plotly(name):
    figure = built(english)[name]
    texts = [a.text for a in figure.layout.annotations]
    for key, axis in y_axes(figure).items():
        if title(axis):
            assert title(axis) not in texts, (name, key)


def test_a_figure_title_stays_above_the_level_y_title():
    figure = viz.attention_heatmap(np.tril(np.full((4, 4), 0.25)), "abcd", "层 1 · 头 2", tr=chinese)
    assert figure.layout.title.text == "层 1 · 头 2"
    assert (figure.layout.title.yref, figure.layout.title.y, figure.layout.title.yanchor) == ("container", 1, "top")
    assert viz.attention_heatmap(np.tril(np.full((4, 4), 0.25)), "abcd", "t").layout.title.y is None
