"""app/chrome/charts.py's shared_figure: a figure a class asks for in every session is built once per
process, and each session still gets its own language's words and its own text's figure.

    pytest tests/app/test_shared_figures.py
"""
from __future__ import annotations

import numpy as np
from helpers.apptest import home, page, plotly_spec

from app.chrome import charts
from app.chrome.site import ATTENTION, MODEL
from minigpt.viz import attention_heatmap


def encoding_axis(lang: str) -> str:
    """A fresh session's positional-encoding figure on Inside the model: the title of its dimension axis.
    The figure's one argument is the model's encodings, the same in every language: only the language
    tells the two sessions' figures apart."""
    return plotly_spec(page(home(lang), MODEL.script), 0)["layout"]["xaxis"]["title"]["text"]


def test_sessions_in_turn_each_get_their_own_languages_figure():
    english = "dimension (0 … d_model − 1):<br>fast waves on the left, slow on the right"
    assert encoding_axis("en") == english
    assert encoding_axis("zh") == "维度（0 … d_model − 1）：<br>左边是快的波，右边是慢的波"
    assert encoding_axis("en") == english


def test_a_learners_own_text_gets_its_own_heatmap():
    default = page(home(), ATTENTION.script)
    shown = default.text_input[0].value
    own = page(home(), ATTENTION.script)
    own.text_input[0].set_value("人工智能").run()  # characters the shipped model knows
    assert plotly_spec(own)["layout"]["xaxis"]["ticktext"] == ["人", "工", "智", "能"]
    assert plotly_spec(default.run())["layout"]["xaxis"]["ticktext"] == list(shown)


def test_another_choice_on_the_page_gets_its_own_figure():
    at = page(home(), MODEL.script)
    picker = next(s for s in at.selectbox if s.key.startswith("embedding_pick:"))
    first = plotly_spec(at, 2)  # positions, their likeness, then the embeddings
    picker.set_value((picker.value + 1) % len(picker.options)).run()
    assert plotly_spec(at, 2) != first  # another character chosen: another red dot and neighbours


def test_the_same_arguments_in_the_same_language_share_one_figure_and_new_ones_do_not():
    weights = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]  # each row spread evenly over what it sees
    first = charts.shared_figure(attention_heatmap, weights, "abc", "one head")
    assert charts.shared_figure(attention_heatmap, weights.copy(), "abc", "one head") is first
    other = charts.shared_figure(attention_heatmap, np.eye(3), "abc", "one head")
    assert other is not first
    assert np.asarray(other.data[0].z)[2, 2] == 1.0 and np.asarray(first.data[0].z)[2, 2] == 1 / 3
