"""Figure builders: heatmaps, loss curves, the time-lapse, the √d_k charts and the steps table."""

import json
import math

import numpy as np
import pytest

from minigpt import scaling_experiment, viz
from minigpt.runner import EvalRecord
from minigpt.sample import Step
from minigpt.train import TrainEvent

TEXT = "深度学习是人工智能"


def _attention(layers=3, heads=4, t=len(TEXT)):
    rng = np.random.default_rng(0)
    raw = np.tril(rng.random((layers, heads, t, t))) + 1e-3 * np.tril(np.ones((t, t)))
    return (raw / raw.sum(-1, keepdims=True)).astype(np.float32)


def _heatmaps(fig):
    return [trace for trace in fig.data if trace.type == "heatmap"]


@pytest.mark.parametrize("view, expected", [("layers", 3), ("heads", 4), ("grid", 12)])
def test_attention_figure_has_one_heatmap_per_panel(view, expected):
    assert len(_heatmaps(viz.attention_figure(_attention(), TEXT, view=view))) == expected


def test_heatmap_masks_the_future_and_labels_query_and_key():
    fig = viz.attention_figure(_attention(), TEXT, view="heads", layer=1)
    z = np.array(fig.data[0].z, dtype=float)
    assert np.isnan(z[np.triu_indices(len(TEXT), k=1)]).all()       # future: masked, no hover
    assert not np.isnan(z[np.tril_indices(len(TEXT))]).any()
    assert fig.data[0].y[2] == "2:学" and fig.data[0].x[0] == "0:深"
    assert "query" in fig.data[0].hovertemplate and "key" in fig.data[0].hovertemplate
    assert fig.layout.xaxis.title.text == "key" and fig.layout.yaxis.title.text == "query"
    np.testing.assert_allclose(z[3, :4], _attention()[1, 0, 3, :4], rtol=1e-6)


def test_grid_titles_and_labels_axes_once_per_row_and_column():
    fig = viz.attention_figure(_attention(), TEXT, view="grid")  # 3 rows x 4 columns
    x_titles = [fig.layout[f"xaxis{i if i > 1 else ''}"].title.text for i in range(1, 13)]
    y_titles = [fig.layout[f"yaxis{i if i > 1 else ''}"].title.text for i in range(1, 13)]
    assert x_titles == [None] * 8 + ["key"] * 4                   # the bottom row only
    assert y_titles == ["query", None, None, None] * 3             # the first column only


def test_layer_view_averages_the_heads():
    attention = _attention()
    fig = viz.attention_figure(attention, TEXT, view="layers")
    np.testing.assert_allclose(np.nan_to_num(np.array(fig.data[2].z, dtype=float)),
                               np.tril(attention[2].mean(0)), rtol=1e-5)


def test_repeated_and_whitespace_characters_get_unique_labels():
    labels = viz.position_labels("aa \n")
    assert labels == ["0:a", "1:a", "2:' '", "3:'\\n'"]


def test_heatmap_payload_stays_small_for_a_full_window():
    fig = viz.attention_figure(_attention(4, 4, 128), "x" * 128, view="grid")
    assert len(fig.to_json()) < 2_500_000


def test_bad_view_or_layer_is_refused():
    with pytest.raises(ValueError):
        viz.attention_figure(_attention(), TEXT, view="3d")
    with pytest.raises(ValueError):
        viz.attention_figure(_attention(), TEXT, view="heads", layer=3)


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
    assert len(fig.data[0].x) <= viz.MAX_POINTS + 1 and fig.data[0].x[-1] == 10_000


def test_timelapse_frame_is_titled_with_step_and_loss():
    record = EvalRecord(step=200, train_loss=1.0, val_loss=2.5, sample="深度", attention=_attention())
    fig = viz.timelapse_frame(record, TEXT)
    assert "step 200" in fig.layout.title.text and "2.500" in fig.layout.title.text


def test_scaling_figures_show_both_conditions_per_d_k():
    table = scaling_experiment()
    bars = viz.scaling_figure(table)
    assert [t.name for t in bars.data] == ["no scaling", "scaled by 1/√d_k"] * 2
    assert list(bars.data[0].y) == pytest.approx(table["entropy_unscaled"].tolist())
    std = viz.score_std_figure(table)
    assert list(std.data[1].y) == pytest.approx([math.sqrt(d) for d in table["d_k"]])


def test_steps_table_lists_choice_probability_and_top_five():
    steps = [Step(token=1, text="度", prob=0.9, top=[("度", 0.9), ("学", 0.05), (" ", 0.02), ("a", 0.01), ("b", 0.01)])]
    table = viz.steps_table(steps)
    assert table.loc[0, "chosen"] == "度" and table.loc[0, "p(chosen)"] == 0.9
    assert table.loc[0, "#1"] == "度 0.90" and table.loc[0, "#3"] == "' ' 0.02"
