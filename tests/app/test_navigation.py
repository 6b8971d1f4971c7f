"""app/navigation.py and app/chrome/site.py: the pages in sidebar order at their addresses; every
page renders, on the default model and on a task model (that the server freezes what its libraries
made at import out of the garbage collector's walk: test_home_page).

    pytest tests/app/test_navigation.py
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from helpers import ROOT
from helpers.apptest import PAGES, home, page
from app.chrome import site
from app.views.generation import GENERATION_KEY
from app.chrome.site import GENERATE
from minigpt import load_pretrained
from minigpt.lab.tasks import TASKS

# the addresses teachers have shared: a page's file may be renamed, never its address
ADDRESSES = ["", "Lesson", "Train", "Generate", "Attention", "Scaling", "Inside", "Model", "Experiments", "Glossary", "Board"]


def test_every_page_file_is_a_page_and_keeps_its_address():
    """The sidebar's order is PAGES' (navigation draws the links), so no file carries a number."""
    files = {path.relative_to(ROOT).as_posix() for path in (ROOT / "pages").glob("*.py")}
    assert {page.script for page in site.PAGES[1:]} == files
    assert [page.url_path for page in site.PAGES] == ADDRESSES
    assert all((ROOT / page.script).is_file() for page in site.PAGES)
    assert [site.page_of(str(ROOT / page.script)) for page in site.PAGES] == list(site.PAGES)


def test_the_sidebar_lists_the_pages_in_the_order_of_site_pages_whatever_their_files_are_called():
    """A page added between two renames no other file: its place is its place in PAGES."""
    links = page(home(), site.GLOSSARY.script).sidebar.get("page_link")
    assert [link.proto.page for link in links] == [p.url_path for p in site.PAGES]
    assert [link.proto.label for link in links] == [p.label for p in site.PAGES]
    assert [p.url_path for p in site.PAGES] != sorted(p.url_path for p in site.PAGES)  # not the files' own order


@pytest.mark.parametrize("name", ["reverse", "sort"])
@pytest.mark.slow
def test_every_page_works_on_a_task_model_and_generate_answers_the_question(name):
    at = home()
    at.selectbox(key="corpus").set_value(f"task-{name}").run()
    for path in PAGES:
        at = page(at, path)
        assert not at.exception and not at.error, (path, [e.value for e in at.exception or at.error])
    at = page(at, GENERATE.script)
    prompt = load_pretrained(f"task-{name}").meta["probe_text"][:7]  # the question and its separator
    box = next(t for t in at.text_input if t.key.startswith("prompt:"))
    assert box.value == prompt
    at.slider(key="temperature").set_value(0.0)
    at.number_input(key="max_new_tokens").set_value(7)
    at.button(key="generate").click().run()
    assert not at.exception and not at.error
    answer = TASKS[name].answer(prompt[:6])
    assert at.session_state[GENERATION_KEY]["text"] == prompt + answer + "\n"  # greedy decoding answers it


@pytest.mark.parametrize("path", [None, *PAGES])
def test_every_page_renders_without_exception(path):
    at = home() if path is None else page(home(), path)
    assert not at.exception
    assert not at.error
    assert len(at.title) == 1


# a teacher's link to one page, opened first in a fresh server process: nothing imported, no Home
# drawn before it, the library not loaded (Home loads it in the background; this page must load it)
COLD_LINK = """
import json, sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file("streamlit_app.py", default_timeout=600)
at.query_params["lang"] = "zh"
at.switch_page(sys.argv[1]).run()
print(json.dumps({"exception": [e.value for e in at.exception], "error": [e.value for e in at.error],
                  "title": [t.value for t in at.title], "torch": "torch" in sys.modules}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("path", PAGES)
def test_a_cold_deep_link_opens_the_page_it_names(path):
    done = subprocess.run([sys.executable, "-c", COLD_LINK, path], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert shown["exception"] == [] and shown["error"] == []
    assert len(shown["title"]) == 1
    assert re.search("[\u4e00-\u9fff]", shown["title"][0])  # in the language the link asked for
    assert shown["torch"]  # every page but Home waits for the library before it draws (app.state.warmup)
