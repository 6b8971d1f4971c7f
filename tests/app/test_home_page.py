"""streamlit_app.py (Home): the shipped model without training, and a corpus that brings its own model.

    pytest tests/app/test_home_page.py
"""
from app import choices
from helpers.apptest import home, page
from minigpt import DEFAULT_CORPUS, load_pretrained
from app.site import ATTENTION, GENERATE


def test_the_english_corpus_brings_its_own_shipped_model_prompt_and_text():
    at = home()
    at.selectbox(key=choices.CORPUS).set_value("pydoc-en").run()
    assert {m.label: m.value for m in at.metric}["Corpus"] == "pydoc-en"
    page(at, GENERATE.script)
    assert not at.exception
    assert not [b for b in at.button if b.key.startswith("seed:")]  # the demo's seeds are Chinese
    assert at.text_input[0].value == "The "
    page(at, ATTENTION.script)
    assert not at.exception and not at.warning
    assert at.text_input[0].value.startswith("The")


def test_home_shows_the_shipped_model_without_training():
    at = home()
    shipped = load_pretrained(DEFAULT_CORPUS)
    values = {m.label: m.value for m in at.metric}
    assert values["Corpus"] == DEFAULT_CORPUS
    assert values["Parameters"] == f"{shipped.model.num_params():,}"
    assert values["Device"] == "cpu"
