"""The layers: the library (minigpt) imports no Streamlit and nothing of the app, and its tests
(tests/minigpt) run without either, so a newcomer working on the model never waits for them.

    pytest tests/cross/test_layers.py
"""
import os
import subprocess
import sys

import pytest

from helpers import ROOT

FOREIGN = ("streamlit", "app")  # what the library and its tests must never load


def _loaded_after(code: str) -> list[str]:
    """The foreign modules a fresh interpreter holds after running `code` from the repository."""
    probe = code + f"\nimport sys\nprint(sorted(m for m in sys.modules if m.split('.')[0] in {FOREIGN!r}))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])})
    return eval(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_every_library_module_imports_no_streamlit_and_no_app():
    code = ("import importlib, pkgutil, minigpt\n"
            "for m in pkgutil.walk_packages(minigpt.__path__, 'minigpt.'):\n"
            "    if not m.name.endswith('__main__'):\n"
            "        importlib.import_module(m.name)\n"
            "for name in minigpt.__all__:\n"
            "    getattr(minigpt, name)")
    assert _loaded_after(code) == []


@pytest.mark.slow
def test_the_library_tests_import_no_streamlit_and_no_app():
    """Collecting tests/minigpt imports every module there and every helper they use."""
    code = ("import pytest\n"
            "assert pytest.main(['tests/minigpt', '--collect-only', '-q', '-p', 'no:cacheprovider']) == 0")
    assert _loaded_after(code) == []
