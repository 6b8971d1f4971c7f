"""streamlit_app.py (Home): the shipped model without training, a corpus that brings its own model,
and a first visit that does not wait for torch.

    pytest tests/app/test_home_page.py
"""
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from app.state import choices
from helpers.apptest import home, page
from helpers import ROOT
from minigpt import DEFAULT_CORPUS, BUILTIN_CORPORA, available_devices, load_pretrained
from app.chrome.site import ATTENTION, GENERATE


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


# Home on a fresh server, in a fresh interpreter: first with the library's loading held back, as a
# first visitor finds it while torch loads; then once it has loaded
FIRST_VISIT = """
import gc, json, sys
from streamlit.testing.v1 import AppTest
from app.state import warmup
start, warmup.start = warmup.start, lambda after=0.0, then=None: None  # torch still loading: hold the load back
if sys.argv[1] == "unknown":  # a CUDA build, or a Mac: only torch can say which devices there are
    warmup.devices_without_torch = lambda: None
at = AppTest.from_file("streamlit_app.py", default_timeout=600).run()
first = {"exception": [e.value for e in at.exception], "torch": "torch" in sys.modules, "numpy": "numpy" in sys.modules,
         "metrics": {m.label: m.value for m in at.metric},
         "device": [(s.options, s.disabled) for s in at.selectbox if s.label == "Device"],
         "corpora": at.selectbox(key="corpus").options, "frozen": gc.get_freeze_count()}
warmup.start = start
warmup.wait()
at.run()
then = {"exception": [e.value for e in at.exception], "torch": "torch" in sys.modules,
        "device": [(s.options, s.disabled) for s in at.selectbox if s.label == "Device"],
        "frozen": gc.get_freeze_count(), "walked": len(gc.get_objects())}
print(json.dumps([first, then]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("devices", ["known", "unknown"])
def test_a_first_visit_draws_home_without_torch_and_the_devices_once_it_has_loaded(devices):
    """Importing torch takes seconds, and a fresh server's first visitor waited for it on Home.
    Once loaded, what the imports made is frozen: Streamlit collects garbage after every script run
    (runner.postScriptGC), and walking the ~250,000 objects of torch, plotly, pandas and Streamlit
    took ~240 ms with the GIL held, after every widget move."""
    done = subprocess.run([sys.executable, "-c", FIRST_VISIT, devices], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    first, then = json.loads(done.stdout.strip().splitlines()[-1])
    assert first["exception"] == [] and first["torch"] is False
    assert first["numpy"] is False  # nor numpy: the tasks, the run records and the diagnosis import it where they use it
    shipped = load_pretrained(DEFAULT_CORPUS)  # the model itself, counted from its tensors
    device = "cpu" if devices == "known" else "being found…"  # this machine's torch is the CPU build
    assert first["metrics"] == {"Corpus": DEFAULT_CORPUS, "Parameters": f"{shipped.model.num_params():,}",
                                "Steps trained": f"{shipped.meta['step']:,}", "Status": "pretrained",
                                "Device": device}
    # the CPU build's one device, or a stand-in: never a choice made for the learner before torch can tell
    assert first["device"] == ([[["cpu"], False]] if devices == "known" else [[["being found…"], True]])
    assert first["corpora"] == list(BUILTIN_CORPORA)  # the task corpora too
    assert then["exception"] == [] and then["torch"] is True
    assert then["device"] == [[available_devices(), False]]
    # what the imports made, torch's included, is out of the garbage collector's walk (app.state.warmup)
    assert then["frozen"] > first["frozen"] > 0 and then["walked"] < then["frozen"] / 2


def test_the_devices_read_from_torchs_build_are_the_ones_torch_finds(tmp_path, monkeypatch):
    """Home lists the devices before torch has loaded only where its build rules every other out."""
    from app.state import warmup

    assert warmup.devices_without_torch() in (None, available_devices())
    fake = tmp_path / "torch"  # a torch package's folder: only its version.py is read
    fake.mkdir()
    monkeypatch.setattr(sys, "platform", "linux")
    for version, expected in (("cuda: Optional[str] = None\nhip: Optional[str] = None\n", ["cpu"]),
                              ("cuda: Optional[str] = '12.6'\nhip: Optional[str] = None\n", None),
                              ("cuda = None\nhip = '6.2'\n", None), ("__version__ = '2.13.0'\n", None)):
        (fake / "version.py").write_text("from typing import Optional\n" + version)
        monkeypatch.setattr(importlib.util, "find_spec", lambda name: importlib.machinery.ModuleSpec(
            name, None, origin=str(fake / "__init__.py")))
        assert warmup.devices_without_torch() == expected, version
    monkeypatch.setattr(sys, "platform", "darwin")  # Apple's GPUs: only torch can tell
    assert warmup.devices_without_torch() is None
