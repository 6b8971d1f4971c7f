"""The live server the browser and hygiene tests share (the browser itself: tests/conftest.py)."""
from __future__ import annotations

import pytest

from helpers.browser import LiveServer


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
