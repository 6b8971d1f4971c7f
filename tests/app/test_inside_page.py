"""pages/Inside.py: the one-weight view shows the heatmap's row for the chosen query.

    pytest tests/app/test_inside_page.py
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from app.state import choices
from app.views import uploads
from helpers.apptest import home, page, plotly_spec
from helpers.figures import plotly_array
from helpers.maths import hand_forward
from helpers.tiny import tiny_lm
from minigpt import checkpoint_zip, load_pretrained
from minigpt.corpus import DEMO_SENTENCE
from app.chrome.site import INSIDE


@pytest.fixture(scope="module")
def shipped():
    checkpoint = load_pretrained("course-zh")
    return checkpoint.model, checkpoint.tokenizer.encode(DEMO_SENTENCE)


def test_the_inside_page_shows_the_row_of_the_heatmap_for_the_chosen_query(shipped):
    model, ids = shipped
    at = page(home(), INSIDE.script)
    at.text_input[0].set_value(DEMO_SENTENCE).run()
    at.selectbox(key=f"inside_layer:{model.config.num_layers}").set_value(1)
    at.selectbox(key=f"inside_head:{model.config.num_heads}").set_value(2)
    at.select_slider(key=f"inside_query:{len(ids)}").set_value(6).run()
    assert not at.exception
    for scale in (None, False):
        weights = plotly_array(plotly_spec(at, 0)["data"][3]["y"])  # the softmax bars, under q and k and 2 rows of bars
        want = model.attention_maps(torch.tensor([ids]), scale_attention=scale)[1, 2, 6].numpy()
        np.testing.assert_allclose(weights, want, atol=1e-6)
        assert np.all(weights[7:] == 0)  # the future keys, masked
        example = next(x.value for x in at.latex if "softmax" in x.value)  # the worked example: the heaviest key
        assert f"k_{{{int(want.argmax())}}}" in example and f"\\rightarrow {want.max():.3f}" in example, example
        at.checkbox(key="inside_unscaled").check().run()
    assert len(at.dataframe[0].value) == model.config.num_layers * model.config.num_heads
    assert any("√d_k = √16 = 4.00" in c.value for c in at.caption)  # d_model 64 over 4 heads: d_k 16


def test_a_model_trained_without_the_scaling_shows_its_own_unscaled_row():
    """An uploaded model whose config leaves out 1/√d_k: with the checkbox off, the view divides by 1,
    as the model does, and its weights are the hand-written forward pass's under the model's config."""
    model, tok = tiny_lm(seed=3, scale_attention=False)
    with torch.no_grad():  # large weights: scaled and unscaled rows then differ clearly
        for p in model.parameters():
            p.mul_(4)
    at = home()
    at.radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    data = checkpoint_zip(model, tok, meta={"corpus": "unscaled"})
    at.file_uploader(key=uploads.CHECKPOINT_UPLOAD).set_value(("unscaled.zip", data, "application/zip")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at = page(at, INSIDE.script)
    text = "the cat sat on"
    at.text_input[0].set_value(text).run()
    at.selectbox(key=f"inside_layer:{model.config.num_layers}").set_value(1)
    at.selectbox(key=f"inside_head:{model.config.num_heads}").set_value(1)
    at.select_slider(key=f"inside_query:{len(text)}").set_value(len(text) - 1).run()
    assert not at.exception
    want = hand_forward(model, tok.encode(text))["layers"][1]["weights"][1, -1].numpy()
    scaled = hand_forward(model, tok.encode(text), scale=True)["layers"][1]["weights"][1, -1].numpy()
    assert not np.allclose(want, scaled, atol=1e-3)  # the two can be told apart
    weights = plotly_array(plotly_spec(at, 0)["data"][3]["y"])  # the softmax bars
    np.testing.assert_allclose(weights, want, atol=1e-6)
    assert any("divided by 1.00" in c.value for c in at.caption)
