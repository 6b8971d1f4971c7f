"""The line for a training slot, in a real browser: two learners on a server with one slot.

The second learner presses Start while the first one's run trains: their page says where they
stand in line, and, once the first learner stops, their own run trains without their pressing
anything again, the page redrawing by itself. Every wait is for a condition on the page.

    pytest tests/cross/test_browser_line.py
"""
from __future__ import annotations

import pytest

from app.state.train_settings import RANGES
from helpers.browser import LiveServer, main_button, new_context, wait_for_settings, wait_rendered

pytestmark = pytest.mark.browser
TRAINING_MS = 180_000  # how long a tiny run may take to show its first steps on a busy machine


@pytest.fixture(scope="module")
def one_slot(browser, shots):
    with LiveServer({"OMP_NUM_THREADS": "1", "MINIGPT_MAX_RUNS": "1"}, log=shots / "streamlit.log") as live:
        yield live
        code, _seconds = live.stop()
    assert code == 0, f"the server exited with {code}; see {shots / 'streamlit.log'}"


def _learner(browser, server, steps: int | None = None):
    """A learner of their own (a new browser context) on Train, with the smallest model set, and
    `steps` steps where given."""
    page = new_context(browser, viewport={"width": 1400, "height": 1800}).new_page()
    page.goto(server.url + "/Train", wait_until="domcontentloaded")
    wait_rendered(page, "Train")
    for label in ("d_model", "num_layers"):  # their sliders' minimum
        page.locator('[data-testid="stSlider"]', has_text=label).get_by_role("slider").press("Home")
    wait_for_settings(page, "d_model:16", "num_layers:1")
    if steps is not None:
        box = page.get_by_role("spinbutton", name="Steps", exact=True)
        box.fill(str(steps))
        box.press("Enter")
        wait_for_settings(page, f"max_steps:{steps}")
    return page


def main(page):
    return page.get_by_test_id("stMainBlockContainer")


def side(page):
    return page.get_by_test_id("stSidebar")


def _steps_drawn(page, at_least: int) -> None:
    page.wait_for_function("(n) => { const p = document.querySelector('.js-plotly-plot');"
                           " return p && p.data && p.data[0].x.length >= n }", arg=at_least, timeout=TRAINING_MS)


def test_the_second_learner_sees_their_place_then_trains_without_pressing_again(browser, one_slot, shots):
    # the most steps the form takes: a run the second learner's page cannot outlast on a busy machine (it
    # ends when the first learner presses Stop), so the second is in line whenever they press Start
    first = _learner(browser, one_slot, steps=RANGES["max_steps"][1])
    main_button(first, "Start").click()
    _steps_drawn(first, 2)

    second = _learner(browser, one_slot, steps=RANGES["max_steps"][1])  # still training when the test looks
    main_button(second, "Start").click()
    main(second).get_by_text("1st in line", exact=False).wait_for(timeout=TRAINING_MS)
    side(second).get_by_text("Your training run: 1st in line", exact=False).wait_for()  # on every page
    main(second).get_by_text("1 training slot on this server · 1 in use · 1 run waiting", exact=True).wait_for()
    assert "run=" in second.url and "key=" in second.url  # a refresh keeps the place
    assert main_button(second, "Cancel my place").is_enabled()
    second.screenshot(path=shots / "line_waiting.png", full_page=True)

    second.reload(wait_until="domcontentloaded")  # a refresh: still in line, still first
    main(second).get_by_text("1st in line", exact=False).wait_for(timeout=TRAINING_MS)

    main_button(first, "Stop").click()  # the first learner is done: the slot frees
    _steps_drawn(second, 2)  # the second's page redraws itself with their run training
    assert main_button(second, "Pause").is_enabled()
    assert second.get_by_text("in line", exact=False).count() == 0  # neither the page nor the sidebar
    second.screenshot(path=shots / "line_started.png", full_page=True)
    main_button(second, "Stop").click()
    main(second).get_by_text("stopped", exact=True).wait_for()
    first.close()
    second.close()
