"""minigpt/viz/: the figure builders: heatmaps, loss and learning-rate curves, the task figures, the
√d_k charts and the steps table, checked on the figures' own numbers.

    pytest tests/minigpt/viz/test_viz.py
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from helpers.figures import over_steps, plotly_array
from helpers.maths import hand_lr
from minigpt import PRESETS, SampledToken, TrainConfig, viz
from minigpt.lab.diagnosis import overfitting
from minigpt.lab.scaling import scaling_experiment
from minigpt.lab.tasks import TASKS, TaskScore, right_key_mask
from minigpt.train import TrainEvent, lr_schedule
from minigpt.viz import attention_heatmap, lr_figure, right_key_figure, task_figure
from minigpt.viz._layout import AXIS_PX, HEADING_PX, MAX_POINTS


def test_the_learning_rate_chart_is_warmup_then_cosine():
    cfg = PRESETS["tiny"].train
    y = lr_figure(lr_schedule(cfg), cfg.warmup_steps).data[0].y
    assert len(y) == cfg.max_steps
    for step in (0, 1, cfg.warmup_steps - 1, cfg.warmup_steps, 150, cfg.max_steps - 1):
        assert y[step] == pytest.approx(hand_lr(step, cfg.lr, cfg.min_lr, cfg.warmup_steps, cfg.max_steps))
    assert y[0] == pytest.approx(cfg.lr / cfg.warmup_steps) and max(y) == pytest.approx(cfg.lr)
    label, = lr_figure(lr_schedule(cfg), cfg.warmup_steps).layout.annotations  # "warmup ends": low on the line, clear of the curve's peak there
    assert label.yref == "y domain" and label.y == 0 and label.yanchor == "bottom"


REVERSE, COPY, SORT = TASKS["reverse"], TASKS["copy"], TASKS["sort"]


def test_the_heatmap_outlines_the_right_keys():
    mask = right_key_mask(REVERSE, "dbahcf", 13)
    fig = attention_heatmap(np.tril(np.ones((13, 13))) / 13, "dbahcf<fchabd", expected=mask)
    marks = fig.data[1]
    assert list(zip(marks.y, marks.x)) == [(f"{6 + i}:{'dbahcf<fchabd'[6 + i]}", f"{5 - i}:{'dbahcf'[5 - i]}")
                                           for i in range(6)]
    page_two = attention_heatmap(np.eye(13), "dbahcf<fchabd", start=8, expected=mask)
    assert list(page_two.data[1].y) == []  # the anti-diagonal's cells of rows 8.. lie in columns before 8


def test_task_and_right_key_figures_plot_the_numbers():
    history = [TrainEvent(s, 100, 1.0, 1e-3, 1.0, 1.0, val_loss=1.0, score=TaskScore(a, w, 1 / 8))
               for s, a, w in [(0, 0.1, 0.0), (50, 0.6, 0.2), (100, 1.0, 1.0)]]
    history.insert(1, TrainEvent(10, 100, 1.0, 1e-3, 1.0, 1.0))  # a logged interval, no evaluation
    fig = task_figure(history, 0.125)
    assert list(fig.data[0].x) == [0, 50, 100] and list(fig.data[0].y) == [0.1, 0.6, 1.0]
    assert list(fig.data[1].y) == [0.0, 0.2, 1.0]
    scores = np.array([[[0.1, 0.3], [0.2, 0.1]], [[0.9, 0.4], [0.2, 0.5]]])  # (steps, layers, heads)
    fig = right_key_figure([0, 100], scores, 0.11, chosen=100)
    assert [list(t.y) for t in fig.data] == [[0.3, 0.9], [0.2, 0.5]]  # each layer's best head


TEXT = "深度学习是人工智能"


def _attention(layers=3, heads=4, t=len(TEXT)):
    rng = np.random.default_rng(0)
    raw = np.tril(rng.random((layers, heads, t, t))) + 1e-3 * np.tril(np.ones((t, t)))
    return (raw / raw.sum(-1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("view, expected", [("layers", 3), ("heads", 4), ("grid", 12)])
def test_a_view_has_one_panel_per_layer_head_or_both(view, expected):
    panels = viz.attention_panels(_attention(), view=view, layer=1)
    assert len(panels) == expected
    titles = [title for title, _ in panels]
    assert len(set(titles)) == expected and all("layer" in t for t in titles)


def test_heatmap_masks_the_future_and_labels_query_and_key():
    attention = _attention()
    fig = viz.attention_heatmap(attention[1, 0], TEXT, "layer 2 · head 1")
    z = np.array(fig.data[0].z, dtype=float)
    assert np.isnan(z[np.triu_indices(len(TEXT), k=1)]).all()       # future: masked, no hover
    assert not np.isnan(z[np.tril_indices(len(TEXT))]).any()
    assert fig.data[0].y[2] == "2:学" and fig.data[0].x[0] == "0:深"
    assert "query" in fig.data[0].hovertemplate and "key" in fig.data[0].hovertemplate
    assert fig.layout.xaxis.title.text == "key" and fig.layout.yaxis.title.text == "query"
    np.testing.assert_allclose(z[3, :4], attention[1, 0, 3, :4], rtol=1e-6)


@pytest.mark.parametrize("length", [10, 24, 40])
def test_every_query_and_key_keeps_an_upright_label_and_a_readable_cell(length):
    """Issue B8: labels vanished past 24 characters, and CJK keys were drawn on their side."""
    text = ("深度学习是人工智能的重要领域" * 3)[:length]
    attention = _attention(1, 1, length)[0, 0]
    for start, stop in [(a, min(a + viz.POSITIONS_PER_HEATMAP, length)) for a in range(0, length, viz.POSITIONS_PER_HEATMAP)]:
        fig = viz.attention_heatmap(attention, text, "", start, stop)
        for axis in (fig.layout.xaxis, fig.layout.yaxis):
            assert list(axis.ticktext) == list(text[start:stop])     # every position labelled
            assert axis.tickmode == "array" and axis.tickangle == 0
        assert stop - start <= viz.POSITIONS_PER_HEATMAP
        assert fig.layout.height >= 17 * (stop - start)             # cells stay at least ~17 px tall
        assert list(fig.data[0].x) == viz.position_labels(text)[start:stop]


def test_layer_view_averages_the_heads():
    attention = _attention()
    title, weights = viz.attention_panels(attention, view="layers")[2]
    assert title.startswith("layer 3")
    np.testing.assert_allclose(weights, attention[2].mean(0), rtol=1e-6)


def test_repeated_and_whitespace_characters_get_unique_labels():
    labels = viz.position_labels("aa \n")
    assert labels == ["0:a", "1:a", "2:' '", "3:'\\n'"]


def test_heatmap_payload_stays_small_for_a_full_window():
    attention = _attention(1, 1, 128)[0, 0]
    assert len(viz.attention_heatmap(attention, "x" * 128, "", 0, 128).to_json()) < 150_000


def test_bad_view_layer_or_positions_are_refused():
    with pytest.raises(ValueError):
        viz.attention_panels(_attention(), view="3d")
    with pytest.raises(ValueError):
        viz.attention_panels(_attention(), view="heads", layer=3)
    with pytest.raises(ValueError):
        viz.attention_heatmap(_attention()[0, 0], TEXT, "", 5, 5)


def test_loss_figure_plots_train_val_and_lr():
    history = [TrainEvent(step=s, max_steps=30, train_loss=3 - s / 10, lr=1e-3, tokens_per_sec=1.0, elapsed=s,
                          val_loss=(3.5 - s / 10) if s % 10 == 0 else None) for s in range(5, 31, 5)]
    fig = viz.loss_figure(history)
    names = [t.name for t in fig.data]
    assert names == ["train loss", "val loss", "learning rate"]
    assert list(fig.data[1].x) == [10, 20, 30]
    assert fig.data[2].yaxis == "y2"


def test_loss_figure_downsamples_long_histories():
    history = [TrainEvent(step=s, max_steps=10**5, train_loss=1.0, lr=1e-3, tokens_per_sec=1.0, elapsed=s)
               for s in range(1, 10_001)]
    fig = viz.loss_figure(history)
    assert len(fig.data[0].x) <= MAX_POINTS + 1 and fig.data[0].x[-1] == 10_000


def test_loss_figure_marks_overfitting_and_the_uniform_guess_and_keeps_lr_ticks_positive():
    history = [TrainEvent(step=s, max_steps=40, train_loss=3 - s / 20, lr=1e-3 * s / 40, tokens_per_sec=1.0,
                          elapsed=s, val_loss=[3.0, 2.5, 2.8, 3.2][s // 10 - 1]) for s in (10, 20, 30, 40)]
    over = overfitting([(e.step, e.train_loss, e.val_loss) for e in history])
    assert over is not None and over.best_step == 20 and over.step == 40
    fig = viz.loss_figure(history, uniform=math.log(208), overfit=over)
    assert any("ln V = 5.34" in a.text for a in fig.layout.annotations)
    assert any("overfitting" in a.text for a in fig.layout.annotations)
    assert fig.layout.yaxis2.range[0] == 0  # the lr axis starts at 0: no negative ticks
    # ticks as a textbook writes them (0.0004), never 4.1e-4: d3's ~g stays plain from 1e-6 to 1e21
    assert fig.layout.yaxis2.tickformat == "~g" and viz.lr_figure(lr_schedule(TrainConfig())).layout.yaxis.tickformat == "~g"


def test_scaling_figures_show_both_conditions_per_d_k():
    table = scaling_experiment()
    for metric in ("entropy", "max_weight"):
        bars = viz.scaling_figure(table, metric)
        assert [t.name for t in bars.data] == ["no scaling", "scaled by 1/√d_k"]
        assert list(bars.data[0].y) == pytest.approx(table[f"{metric}_unscaled"].tolist())
        assert list(bars.data[1].y) == pytest.approx(table[f"{metric}_scaled"].tolist())
    std = viz.score_std_figure(table)
    assert list(std.data[1].y) == pytest.approx([math.sqrt(d) for d in table["d_k"]])
    assert list(std.layout.xaxis.ticktext) == ["4", "16", "64", "256"]  # a log axis labelled at the d_k values


def test_steps_table_lists_choice_probability_and_top_five():
    steps = [SampledToken(token=1, text="度", prob=0.9, top=[("度", 0.9), ("学", 0.05), (" ", 0.02), ("a", 0.01), ("b", 0.01)]),
             SampledToken(token=2, text="学", prob=0.3, top=[("习", 0.6), ("学", 0.3), ("a", 0.05), ("b", 0.03), (" ", 0.02)])]
    table = viz.steps_table(steps)
    assert list(table.columns) == ["step", "chosen", "p(chosen)", "likeliest five"]
    assert list(table["chosen"]) == ["度", "学"] and list(table["p(chosen)"]) == [0.9, 0.3]  # every row, not the first
    assert list(table["likeliest five"]) == ["度 学 ␣ a b", "习 学 a b ␣"]  # a space shown as a sign
    chinese = viz.steps_table(steps, tr=lambda m, **p: {"p(chosen)": "p（抽中）"}.get(m, m))
    assert list(chinese["p（抽中）"]) == [0.9, 0.3]


def test_every_figure_the_fast_views_build_is_valid_plotly():
    """The views that redraw as a slider moves build their figures as plain dicts, unvalidated:
    plotly's own validation (a misspelt property raises) must accept every one of them."""
    import plotly.graph_objects as go
    import torch

    from minigpt import load_pretrained
    from minigpt.corpus import DEMO_SENTENCE
    from minigpt.lab.tasks import TASKS, right_key_mask
    from minigpt.lab.heads import attention_row
    from minigpt.lab.predictions import beliefs, next_logits
    from minigpt.sample import Sampling

    checkpoint = load_pretrained("course-zh")
    ids = checkpoint.tokenizer.encode(DEMO_SENTENCE)
    maps = checkpoint.model.attention_maps(torch.tensor([ids])).numpy()
    figures = [viz.attention_heatmap(maps[0, 1], DEMO_SENTENCE, "t", 2, 12),
               viz.attention_heatmap(maps[0, 0][:13, :13], "dbahcf<fchabd",
                                     expected=right_key_mask(TASKS["reverse"], "dbahcf", 13)),
               viz.beliefs_figure(beliefs(next_logits(checkpoint.model, ids), Sampling(0.8, top_k=5, top_p=0.9)),
                                  checkpoint.tokenizer.chars),
               viz.step_attention_figure(maps[:, 0, -1, :], DEMO_SENTENCE)]
    for scale in (None, False):
        row = attention_row(checkpoint.model, ids, 1, 2, 10, scale_attention=scale)
        figures += [viz.attention_row_figure(row, DEMO_SENTENCE), viz.keys_figure(row, DEMO_SENTENCE),
                    viz.values_figure(row, DEMO_SENTENCE), viz.weight_figure(row, DEMO_SENTENCE)]
    for fig in figures:
        validated = go.Figure(fig.to_plotly_json())  # raises ValueError on an invalid property or value
        assert len(validated.data) == len(fig.data) >= 1
    row_figure = figures[4]
    assert [t.yaxis for t in row_figure.data] == ["y", "y2", "y3"]  # three rows of bars, one axis of keys
    assert row_figure.layout.xaxis.matches == row_figure.layout.xaxis2.matches == "x3"


def test_the_weight_figure_stacks_keys_scores_and_values_in_bands_that_do_not_overlap():
    import plotly.graph_objects as go

    from minigpt import load_pretrained
    from minigpt.corpus import DEMO_SENTENCE
    from minigpt.lab.heads import attention_row

    checkpoint = load_pretrained("course-zh")
    row = attention_row(checkpoint.model, checkpoint.tokenizer.encode(DEMO_SENTENCE), 1, 2, 10)
    parts = [viz.keys_figure(row, DEMO_SENTENCE), viz.attention_row_figure(row, DEMO_SENTENCE),
             viz.values_figure(row, DEMO_SENTENCE)]
    spec = viz.weight_figure(row, DEMO_SENTENCE).to_plotly_json()
    whole = go.Figure(spec)  # validated
    alone = [trace for part in parts for trace in part.to_plotly_json()["data"]]
    assert [t.type for t in whole.data] == ["heatmap", "bar", "bar", "bar", "heatmap"]
    for mine, theirs in zip(spec["data"], alone):  # the same numbers as the figures standing alone
        for field in ("x", "y", "z"):
            if field in theirs:
                assert np.array_equal(plotly_array(mine[field]), plotly_array(theirs[field])) \
                    if field == "z" or field == "y" and theirs["type"] == "bar" else mine[field] == theirs[field]
    assert len({t.yaxis for t in whole.data}) == 5 and len({t.xaxis for t in whole.data}) == 5
    layout = whole.layout
    domains = [layout[f"yaxis{t.yaxis[1:]}"].domain for t in whole.data]
    assert all(0 <= low < high <= 1 for low, high in domains)
    assert all(below[1] < above[0] for above, below in zip(domains, domains[1:]))  # top to bottom, apart
    assert [layout[f"xaxis{t.xaxis[1:]}"].matches for t in whole.data[1:3]] == [whole.data[3].xaxis] * 2  # one key axis
    for trace, (low, high) in zip([whole.data[0], whole.data[4]], [domains[0], domains[4]]):
        assert trace.colorbar.y == pytest.approx((low + high) / 2) and trace.colorbar.len == pytest.approx(high - low)
    assert layout.height == sum(p.layout.height for p in parts) + 3 * (HEADING_PX + AXIS_PX)
    texts = [a.text for a in layout.annotations]
    assert "<b>1. The query and the keys</b>" in texts and parts[0].layout.title.text in texts
    assert all(a.text in texts for a in parts[1].layout.annotations)  # the three rows' own titles


def test_the_embedding_scatter_labels_only_the_text_the_chosen_character_and_its_neighbours():
    chars = [chr(0x4E00 + i) for i in range(300)]
    coords = np.random.default_rng(1).normal(size=(300, 2))
    fig = viz.embeddings_figure(coords, chars, np.array([0.2, 0.1]), labelled=[5, 9, 11], chosen=40,
                                neighbours=[41, 9, 42])
    dots, named = fig.data
    assert dots.mode == "markers" and len(dots.x) == 300  # every character, unlabelled
    assert named.mode == "markers+text" and list(named.text) == [chars[i] for i in (5, 9, 11, 40, 41, 42)]
    colour = dict(zip(named.text, named.marker.color))
    assert colour[chars[40]] == "#E53935" and colour[chars[41]] == colour[chars[9]] == "#FB8C00"
    assert colour[chars[5]] == "#1E88E5"
    assert len(viz.embeddings_figure(coords, chars, np.array([0.2, 0.1])).data) == 1  # nothing to name: no labels


@pytest.mark.parametrize("last", [0, 5, 9, 10, 60])
def test_every_figure_over_steps_keeps_its_axis_from_step_0_and_in_whole_steps_while_young(last):
    """Plotly pads a short axis to either side of its points (step −1, −0.5 …) unless the range is
    nonnegative, and ticks it in fractions unless dtick is 1; from 10 steps on its own ticks are
    whole, and one tick per step would crowd the axis. The spec is written here, not read from
    the code. How they are drawn: tests/minigpt/viz/test_viz_drawn.py, in chromium."""
    for name, figure in over_steps(sorted({0, last})).items():
        axis = figure.layout.xaxis
        assert axis.rangemode == "nonnegative", name
        assert axis.dtick == (1 if last < 10 else None), (name, axis.dtick)
