"""pages/Experiments.py: knock-outs measured on a copy no other page or session sees, each kept
result under its own model and knock-out, and the head-importance grid.

    pytest tests/app/test_experiments_page.py
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from app.state import choices
from helpers.apptest import home, page, plotly_spec, start_tiny_run, wait_finished
from helpers.figures import plotly_array
from helpers.language import assert_chinese
from helpers.maths import hand_forward
from minigpt import load_corpus, load_pretrained, validation_windows
from minigpt.corpus import DEMO_SENTENCE
from minigpt.lab.tasks import task_for_corpus
from app.chrome.site import ATTENTION, EXPERIMENTS


@pytest.fixture(scope="module")
def shipped():
    checkpoint = load_pretrained("course-zh")
    return checkpoint.model, checkpoint.tokenizer.encode(DEMO_SENTENCE)


@pytest.mark.slow
def test_the_experiments_page_measures_a_knockout_on_a_copy_other_pages_and_sessions_never_see(shipped):
    model, ids = shipped
    at = page(home(), EXPERIMENTS.script)
    assert not at.exception
    base = float(at.metric[0].value)
    assert len(at.metric) == 1 and len(at.code) == 1 and any("Nothing is knocked out" in i.value for i in at.info)
    layer_one = [(0, h) for h in range(model.config.num_heads)]
    at.multiselect[0].set_value(layer_one).run()
    at.checkbox(key="knockout_positions").check().run()
    assert not at.exception
    after = float(at.metric[1].value)
    assert after > base + 0.1 and at.metric[1].delta == f"{after - base:+.3f}"
    whole, knocked = (c.value for c in at.code[:2])
    assert whole != knocked  # the same prompt and seed, another model
    want = hand_forward(model, ids, zero_heads=set(layer_one), positions=False)["layers"]
    for layer in range(model.config.num_layers):  # each layer's mean over its heads, by hand
        shown = np.nan_to_num(plotly_array(plotly_spec(at, layer)["data"][0]["z"]))
        np.testing.assert_allclose(shown, want[layer]["weights"].mean(0).numpy(), atol=1e-5)

    # the model every other page and session uses is as it was
    fresh = load_pretrained("course-zh").model
    assert all(torch.equal(v, fresh.state_dict()[k]) for k, v in model.state_dict().items())
    attention = page(at, ATTENTION.script)
    assert not attention.exception
    other = page(home(), EXPERIMENTS.script)
    assert len(other.metric) == 1 and other.metric[0].value == f"{base:.3f}"  # nothing knocked out there


@pytest.mark.slow
def test_a_knockout_measured_again_shows_its_own_numbers_not_another_ones():
    """The page keeps each knock-out's loss and sample for the session: turning one off and on again
    shows its numbers again, and another knock-out never shows the kept ones."""
    at = page(home(), EXPERIMENTS.script)
    base = at.metric[0].value
    window = at.slider[0]
    shown = {}
    for name, positions, width in [("positions", True, window.max), ("window", False, 3), ("both", True, 3),
                                   ("none", False, window.max), ("positions again", True, window.max)]:
        at.checkbox(key="knockout_positions").set_value(positions)
        at.slider[0].set_value(width).run()
        assert not at.exception
        shown[name] = (at.metric[0].value, at.metric[1].value if len(at.metric) > 1 else None,
                       tuple(c.value for c in at.code))
    assert {whole for whole, _, _ in shown.values()} == {base}
    assert shown["none"][1] is None and len(shown["none"][2]) == 1
    knocked = [shown[name][1] for name in ("positions", "window", "both")]
    assert len(set(knocked)) == 3, knocked  # three knock-outs, three losses
    assert shown["positions again"] == shown["positions"]


@pytest.mark.slow
def test_two_uploads_of_the_same_name_and_step_keep_their_own_knockout_numbers():
    """The page keeps knock-out results per model: two checkpoints named alike, at the same step and
    with the same vocabulary, are still two models."""
    import copy

    from app.state import choices
    from app.views import uploads
    from minigpt import checkpoint_zip

    shipped = load_pretrained("course-zh")
    changed = copy.deepcopy(shipped.model)
    with torch.no_grad():
        changed.blocks[0].self_attn.W_O.weight.mul_(0.25)  # another model: its first layer's heads much weaker
    meta = {"corpus": "course-zh", "step": 1000}
    at = home()
    at.radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    shown = []
    for model in (shipped.model, changed):
        data = checkpoint_zip(model, shipped.tokenizer, meta=meta)
        page(at, "streamlit_app.py").file_uploader(key=uploads.CHECKPOINT_UPLOAD) \
            .set_value(("mine.zip", data, "application/zip")).run()
        assert not at.error
        page(at, EXPERIMENTS.script).checkbox(key="knockout_positions").check().run()
        assert not at.exception
        shown.append((at.metric[0].value, at.metric[1].value))
        at.checkbox(key="knockout_positions").uncheck().run()
    assert shown[0][0] != shown[1][0] and shown[0][1] != shown[1][1], shown


@pytest.mark.slow
def test_head_importance_draws_the_layer_by_head_grid_and_names_the_costliest_head():
    at = page(home(), EXPERIMENTS.script)
    at.button(key="measure_heads").click().run()
    assert not at.exception
    figure = plotly_spec(at, len(at.get("plotly_chart")) - 1)
    rise = plotly_array(figure["data"][0]["z"])
    layer, head = np.unravel_index(int(rise.argmax()), rise.shape)
    assert rise.max() > 0.01
    assert any(f"layer {layer + 1}'s head {head + 1}" in c.value for c in at.caption)


@pytest.mark.slow
def test_the_experiments_page_in_chinese_after_a_knockout_and_the_importance_grid():
    at = page(home("zh"), EXPERIMENTS.script)
    at.multiselect[0].set_value([(0, 0)]).run()
    at.checkbox(key="knockout_shuffled").check().run()
    at.button(key="measure_heads").click().run()
    assert_chinese(at, "Experiments")


@pytest.mark.parametrize("corpus", ["task-copy", "task-reverse", "task-sort"])
@pytest.mark.slow
def test_a_task_model_is_measured_on_the_windows_its_training_measured(corpus):
    """Issue: the task models were measured on windows that start mid-line, which they never saw:
    6.01, 6.92 and 5.42 nats, worse than a uniform guess. The page's val loss is now the one their
    training recorded, and a head's importance is the rise the hand-written forward pass gives."""
    checkpoint = load_pretrained(corpus)
    at = home()
    at.selectbox(key=choices.CORPUS).set_value(corpus).run()
    at = page(at, EXPERIMENTS.script)
    assert not at.exception
    assert at.metric[0].value == f"{checkpoint.meta['val_loss']:.3f}"  # recorded when it was trained
    at.button(key="measure_heads").click().run()
    rise = plotly_array(plotly_spec(at, len(at.get("plotly_chart")) - 1)["data"][0]["z"])
    task = task_for_corpus(corpus)
    ids = torch.tensor(checkpoint.tokenizer.encode(load_corpus(corpus)))
    windows = validation_windows(ids, checkpoint.train_config, task.line_length)
    layer, head = np.unravel_index(int(rise.argmax()), rise.shape)
    by_hand = []
    for x, y in windows:  # the costliest head zeroed, in the forward pass written out by hand
        for row, target in zip(x.tolist(), y):
            logits = hand_forward(checkpoint.model, row, zero_heads={(int(layer), int(head))})["logits"]
            by_hand.append(torch.nn.functional.cross_entropy(logits, target).item())
    assert rise.max() == pytest.approx(np.mean(by_hand) - checkpoint.meta["val_loss"], abs=2e-3)
    assert rise.max() > 1.0 and rise.min() > -0.05  # a head it leans on; none it does better without


@pytest.mark.trains
def test_a_finished_run_shows_one_val_loss_on_train_and_experiments():
    """Issue: Train showed 3.957 for a run and Experiments 3.777, two samples of windows. Both now
    measure the run's own validation windows: at its last evaluation, the same number."""
    at = start_tiny_run(max_steps=50, eval_interval=25)
    entry = wait_finished(at)
    at.run()
    trained = {m.label: m.value for m in at.metric}["Val loss (nats)"]
    page(at, EXPERIMENTS.script)
    assert at.metric[0].value == trained == f"{entry.run.snapshot().evals[-1].val_loss:.3f}"
