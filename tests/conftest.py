"""What every test shares: one torch thread, no cache or training thread left to the next test, and
the real browser for the modules that ask for one.

The tests mirror the code: tests/minigpt/test_<module>.py for minigpt/<module>.py,
tests/app/test_<page>_page.py for a page and test_<module>.py for an app module, and
tests/cross/ for the suites that cut across them (the maths against references, the
translations, bad input, server hygiene, the real browser). Tiers, by marker (pyproject.toml):

    pytest                                   # everything: what CI runs
    pytest -m "not browser and not slow"     # the inner loop, under two minutes
    pytest tests/minigpt                     # the library alone: no Streamlit is imported
"""
from __future__ import annotations

import os
import sys

import pytest
import torch

from helpers.browser import CHROMIUM, CHROMIUM_ARGS, require_chromium
from helpers.postgres import database_url, postgres_server, postgres_url  # noqa: F401 (fixtures)
from helpers.ray_cluster import _ray_session, ray_cluster  # noqa: F401 (fixtures)
from minigpt.serve.runs.thread import stop_all_runs

# A learner's run trains at the server's priority here (app/state/runs.py's setting, which the servers the
# browser tests start inherit). Unset, a run's child trains at niceness 19: beside two CPU-bound
# processes at the normal priority such a child was measured at 1.5 steps/s against 191 alone, so a
# test waiting for its run would give up on a busy machine. tests/app/test_runs.py checks the
# priorities a server gets told or not, and tests/minigpt/serve/test_process.py the library's own.
os.environ["MINIGPT_TRAIN_NICE"] = "0"  # over any outer setting: test_runs.py checks it holds


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, driven by playwright, for a module's browser tests. Without chromium or
    playwright they skip, saying why; in CI (CI=true) they fail instead: CI never skips them
    silently (helpers.browser.require_chromium)."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(autouse=True)
def _own_data_folder(tmp_path, monkeypatch):
    """Each test's app keeps its database and checkpoints in a folder of its own (app/state/serving.py),
    never in the repository's data/ folder, and never what another test left."""
    monkeypatch.setenv("MINIGPT_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    # Tiny models are overhead-bound; on a shared 2-core box two intra-op threads
    # collapse under contention (a browser, a server and pytest run together).
    torch.set_num_threads(1)
    yield


@pytest.fixture(autouse=True)
def _fresh_resources():
    """Streamlit's cache_resource is process-wide and app threads outlive AppTest.run(): clear
    both, where a test has loaded Streamlit at all (the library's tests never do).

    Clearing calls the run registry's on_release, which stops its runs; stop_all_runs() also
    stops runs that tests built outside the registry."""
    _clear_streamlit_caches()
    yield
    _clear_streamlit_caches()
    stop_all_runs()


def _clear_streamlit_caches() -> None:
    streamlit = sys.modules.get("streamlit")
    if streamlit is not None:
        streamlit.cache_resource.clear()
        streamlit.cache_data.clear()


@pytest.fixture
def browser_cookies(monkeypatch):
    """Cookies a browser would send on its next visit: what the pages' scripts wrote into them (a test
    copies written_cookies into it, as the browser keeps them)."""
    from app.state import classroom
    jar: dict[str, str] = {}
    monkeypatch.setattr(classroom, "cookies", lambda: dict(jar))
    return jar
