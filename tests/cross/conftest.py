"""The real browser and the live server the browser and hygiene tests share.

Without chromium or playwright these tests skip, saying why; in CI (CI=true) they fail instead:
CI never skips them silently (helpers.browser.require_chromium)."""
from __future__ import annotations

import pytest

from helpers.browser import CHROMIUM, CHROMIUM_ARGS, LiveServer, require_chromium


@pytest.fixture(scope="module")
def browser():
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    """Where a module's screenshots go (printed at the end of a run with -rA)."""
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def server(browser, shots):
    """`streamlit run` for the whole module; it must exit cleanly when the module is done."""
    with LiveServer({"OMP_NUM_THREADS": "1"}, log=shots / "streamlit.log") as live:
        yield live
        code, _seconds = live.stop()
    assert code == 0, f"the server exited with {code}; see {shots / 'streamlit.log'}"
