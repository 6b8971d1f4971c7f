"""pages/Attention.py: the heatmaps against the forward pass by hand, the unscaled view and its
caption, paging a long text, unknown characters, a task model's right keys, and the time-lapse.

    pytest tests/app/test_attention_page.py
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from app.state import runs
from helpers.apptest import home, own_run, page, plotly_spec, start_tiny_run, wait_finished
from helpers.figures import plotly_array
from helpers.language import assert_chinese
from helpers.maths import hand_forward
from helpers.waiting import wait_until
from minigpt import DEFAULT_CORPUS, load_corpus, load_pretrained
from minigpt.corpus import DEMO_SENTENCE
from app.chrome.site import ATTENTION


def test_the_unscaled_caption_counts_the_rows_whose_top_key_changed():
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    at = page(home(), ATTENTION.script)
    at.checkbox(key="attention_unscaled").check().run()
    text = at.text_input[0].value
    ids = checkpoint.tokenizer.encode(text)
    weights = {scale: np.stack([l["weights"].numpy() for l in hand_forward(checkpoint.model, ids, scale)["layers"]])
               for scale in (True, False)}
    moved = (weights[True].argmax(-1) != weights[False].argmax(-1)).reshape(len(weights[True]), -1)  # by hand
    caption = next(c.value for c in at.caption if "most-attended key changed" in c.value)
    assert moved[0].sum() == 0 and moved[1:].sum() > 0  # layer 1 cannot change; later layers here do
    for layer, rows in enumerate(moved):
        assert f"layer {layer + 1}: {rows.sum()} of {rows.size}" in caption
    assert "same ranking" not in caption


def test_a_long_text_is_paged_and_every_position_keeps_its_label():
    at = page(home(), ATTENTION.script)
    text = load_corpus(DEFAULT_CORPUS).replace("\n", "")[200:230]  # 30 characters, inside the trained 32
    at.text_input[0].set_value(text).run()
    pages = at.select_slider(key=f"attention_page:{len(text)}")
    assert pages.options and not at.exception
    assert pages.options == ["1–24", "25–30"]
    for index in range(len(pages.options)):
        at.select_slider(key=f"attention_page:{len(text)}").set_value(index).run()
        assert not at.exception
        spec = plotly_spec(at)
        ticks = spec["layout"]["xaxis"]["ticktext"]
        assert 1 <= len(ticks) <= 24 and spec["layout"]["xaxis"]["tickangle"] == 0
        assert plotly_array(spec["data"][0]["z"]).shape == (len(ticks), len(ticks))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_attention_page_scores_a_task_model(lang):
    at = home(lang)
    at.selectbox(key="corpus").set_value("task-reverse").run()
    at = page(at, ATTENTION.script)
    assert not at.exception and not at.error
    note = next(m.value for m in at.markdown if ("**reverse** task" if lang == "en" else "**反转**任务") in m.value)
    checkpoint = load_pretrained("task-reverse")
    probe = checkpoint.meta["probe_text"]
    if lang == "zh":
        assert_chinese(at, "Attention on a task model", besides=[probe])
    ids = torch.tensor([checkpoint.tokenizer.encode(probe)])
    attention = checkpoint.model(ids, return_attention=True)[2]
    # the right keys written out: answer row 6 + i reads question position 5 - i
    by_hand = np.array([[[a[0, h, 6 + i, 5 - i].item() for i in range(6)] for h in range(a.shape[1])]
                        for a in attention]).mean(-1)
    table = at.dataframe[-1].value
    np.testing.assert_allclose(table.to_numpy(), by_hand, atol=1e-6)
    assert f"**{by_hand.max():.0%}**" in note and by_hand.max() > 0.6
    spec = plotly_spec(at, 0)  # the first layer's heatmap
    assert any(t.get("type") == "scatter" and len(t["x"]) == 6 for t in spec["data"])


@pytest.mark.parametrize("view, panels", [("layers", lambda c: c.num_layers),
                                          ("heads", lambda c: c.num_heads),
                                          ("grid", lambda c: c.num_layers * c.num_heads)],
                         ids=["layers", "heads", "grid"])
def test_attention_view_holds_one_heatmap_per_panel(view, panels):
    config = load_pretrained(DEFAULT_CORPUS).model.config
    at = page(home(), ATTENTION.script)
    at.radio(key="attention_view").set_value(view).run()
    heatmaps = [t for i in range(len(at.get("plotly_chart"))) for t in plotly_spec(at, i)["data"]]
    assert len(heatmaps) == panels(config) and all(t["type"] == "heatmap" for t in heatmaps)
    assert "query" in heatmaps[0]["hovertemplate"] and "key" in heatmaps[0]["hovertemplate"]
    assert heatmaps[0]["x"][0] == "0:深"


def test_attention_names_unknown_characters():
    at = page(home(), ATTENTION.script)
    at.text_input[0].set_value("深度 Zebra").run()
    assert any("'Z'" in w.value for w in at.warning)
    assert not at.get("plotly_chart")


def _heatmaps(at) -> list[np.ndarray]:
    charts = range(len(at.get("plotly_chart")))
    return [plotly_array(t["z"]) for i in charts for t in plotly_spec(at, i)["data"] if t["type"] == "heatmap"]


def test_attention_page_default_figure_is_the_hand_computed_attention_and_the_checkbox_drops_the_scale():
    """Each layer's panel is the mean over heads of softmax(QK^T/sqrt(d_k)), masked; ticking
    "Without 1/sqrt(d_k)" shows softmax(QK^T) instead, both computed here by hand."""
    model = load_pretrained(DEFAULT_CORPUS).model
    at = page(home(), ATTENTION.script)
    text = at.text_input[0].value
    assert text == DEMO_SENTENCE
    ids = load_pretrained(DEFAULT_CORPUS).tokenizer.encode(text)
    for unscaled in (False, True):
        if unscaled:
            at.checkbox(key="attention_unscaled").check().run()
        want = hand_forward(model, ids, scale=not unscaled)["layers"]
        shown = _heatmaps(at)
        assert len(shown) == model.config.num_layers
        for layer, (z, expected) in enumerate(zip(shown, want)):
            mean = expected["weights"].mean(0).numpy()
            future = np.triu(np.ones_like(mean, dtype=bool), k=1)
            assert np.isnan(z[future]).all()  # the future is masked, drawn grey
            np.testing.assert_allclose(z[~future], mean[~future], atol=2e-5,
                                       err_msg=f"layer {layer + 1}, unscaled={unscaled}")


@pytest.mark.trains
@pytest.mark.slow
def test_the_time_lapse_replays_the_run_evaluations():
    at = start_tiny_run(eval_interval=5)
    entry = runs.registry().get(own_run(at)[0])
    wait_until(lambda: len(entry.run.snapshot().evals) >= 2, "two evaluations")
    page(at, ATTENTION.script)
    steps = at.select_slider(key="timelapse_step").options
    assert len(steps) >= 2
    at.select_slider(key="timelapse_step").set_value(steps[0]).run()
    assert any(m.value.startswith(f"**Step {int(steps[0]):,}** · val loss") for m in at.markdown)


@pytest.mark.trains
@pytest.mark.slow
def test_play_shows_every_evaluation_of_the_time_lapse_in_order_then_stops():
    """Issue: the time-lapse had no Play button. Play starts at the first evaluation and each timer
    tick (a rerun here: AppTest has no timer) shows the next, until the last, where it stops."""
    at = start_tiny_run(max_steps=20, eval_interval=5)
    entry = wait_finished(at)
    steps = [r.step for r in entry.run.snapshot().evals]
    assert steps == [0, 5, 10, 15, 20]
    page(at, ATTENTION.script)
    at.button(key="timelapse_play").click().run()
    shown = []
    for _tick in range(len(steps) + 2):
        shown.append(next(int(m.value.split("**")[1].split()[1].replace(",", "")) for m in at.markdown
                          if m.value.startswith("**Step ")))
        at.run()
    assert shown[:len(steps)] == steps and set(shown[len(steps):]) == {steps[-1]}  # in order, then it stays
    assert "timelapse_playing" not in at.session_state
