"""app/views/uploads.py: corpora and checkpoints uploaded on Home: the good ones used, the bad ones
refused with a reason, a removed corpus forgotten, an uploaded model bringing its own texts.

    pytest tests/app/test_uploads.py
"""
import pytest

from app.state import choices, runs
from app.views import uploads
from app.chrome.text import md
from helpers.apptest import (POEM, home, own_run, page, plotly_spec, start_tiny_run, upload_and_train, wait_finished,
                             wait_for_step)
from minigpt import DEFAULT_CORPUS
from app.chrome.site import ATTENTION, TRAIN


@pytest.mark.trains
@pytest.mark.slow
def test_an_uploaded_checkpoint_brings_its_own_texts():
    at = upload_and_train(POEM, d_model=32, num_heads=2, num_layers=1, d_ff=64, max_len=16, block_size=8,
                           max_steps=30, eval_interval=30, batch_size=8)
    wait_finished(at)
    data = runs.run_checkpoint_zip(runs.registry().get(own_run(at)[0]))
    fresh = home()  # a new session, on the default corpus
    fresh.radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    fresh.file_uploader(key=uploads.CHECKPOINT_UPLOAD).set_value(("poem.zip", data, "application/zip")).run()
    page(fresh, ATTENTION.script)
    text = fresh.text_input[0].value
    assert text == POEM.splitlines()[0][:8], text  # the poem's own first line, no invisible newline
    assert len(text) <= 8 and not fresh.warning  # it fits the trained 8 positions: nothing is cut, nothing said
    heatmap = plotly_spec(fresh)["data"][0]
    assert heatmap["x"][0] == f"0:{text[0]}"


def test_removing_an_uploaded_corpus_goes_back_to_the_default():
    at = home()
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("poem.txt", POEM.encode(), "text/plain")).run()
    assert at.selectbox(key=choices.CORPUS).value == "poem.txt (uploaded)"
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(None).run()
    assert at.selectbox(key=choices.CORPUS).value == DEFAULT_CORPUS
    assert "poem.txt (uploaded)" not in at.selectbox(key=choices.CORPUS).options


def test_a_bad_corpus_upload_gets_an_error_message():
    at = home()
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("junk.txt", b"\x00\x01\x02binary", "text/plain")).run()
    assert any("junk" in e.value and "binary" in e.value for e in at.error)
    assert at.selectbox(key=choices.CORPUS).value == DEFAULT_CORPUS


def test_an_uploaded_corpus_becomes_the_training_corpus():
    at = home()
    text = "the quick brown fox jumps over the lazy dog. " * 20
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("fox.txt", text.encode(), "text/plain")).run()
    assert not at.error
    assert at.selectbox(key=choices.CORPUS).value == "fox.txt (uploaded)"
    assert any("No model ships" in i.value for i in at.info)
    page(at, TRAIN.script)
    assert any(md("fox.txt") in c.value for c in at.caption)


def test_a_bad_checkpoint_upload_gets_an_error_message():
    at = home()
    at.radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    at.file_uploader(key=uploads.CHECKPOINT_UPLOAD).set_value(("model.zip", b"not a zip", "application/zip")).run()
    assert any(e.value.startswith("model") and "zip" in e.value for e in at.error)


@pytest.mark.trains
def test_a_downloaded_checkpoint_loads_again_on_home():
    at = start_tiny_run()
    wait_for_step(at, 1)
    entry = runs.registry().get(own_run(at)[0])
    data = runs.run_checkpoint_zip(entry)
    page(at, "streamlit_app.py")
    at.radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    at.file_uploader(key=uploads.CHECKPOINT_UPLOAD).set_value(("mine.zip", data, "application/zip")).run()
    assert not at.error
    values = {m.label: m.value for m in at.metric}
    assert values["Parameters"] == f"{entry.run.inference_model().num_params():,}"
    assert values["Corpus"] == DEFAULT_CORPUS
