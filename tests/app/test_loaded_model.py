"""app/state/loaded_model.py: the model the pages use follows the session's choice: a new run becomes it.

    pytest tests/app/test_loaded_model.py
"""
import pytest

from app.state import choices
from helpers.apptest import page, start_tiny_run
from app.chrome.site import ATTENTION


@pytest.mark.trains
def test_starting_a_run_makes_it_the_loaded_model_for_generate_and_attention():
    at = start_tiny_run()
    page(at, ATTENTION.script)
    assert not at.exception
    # one layer, mean view, for the learner's text (the run's time-lapse may show beside it once it has evaluated)
    assert [c.key for c in at.get("plotly_chart") if not c.key.startswith("timelapse")] == ["attention:0"]
    assert at.session_state[choices.MODEL_SOURCE] == choices.TRAINED
