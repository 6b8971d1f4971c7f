"""Our pages in Streamlit's AppTest: a session, its pages, a tiny run, and what the pages drew.

AppTest ignores `run_every`: a page that polls a run is rerun by hand (`at.run()`) until the
condition a test needs holds (`wait_for_step`, `wait_finished`), never after a fixed sleep.
"""
from __future__ import annotations

import json
import re

from streamlit.testing.v1 import AppTest  # at import: it makes its temporary folder once per process

from app.chrome import site
from app.state import warmup
from app.state.runs import OWN_RUN_KEY
from app.chrome.site import TRAIN

from . import ROOT
from .waiting import wait_until

SCRIPT_DEADLINE = 600  # seconds one script run may take before AppTest calls it hung: a guard, not a speed limit
# every page but Home, in the sidebar's order: one definition, the app's own
PAGES = [page.script for page in site.PAGES if page != site.HOME]


def session(lang: str | None = None, **params: str) -> AppTest:
    """A fresh browser session on Home, not run yet: the address it opens with is `?lang=` and `params`.
    The library has loaded (app.state.warmup), as on a server a few seconds after it started; Home drawn
    before that is tested in a fresh interpreter (test_home_page)."""
    warmup.wait()
    at = AppTest.from_file(str(ROOT / site.HOME.script), default_timeout=SCRIPT_DEADLINE)
    if lang is not None:
        at.query_params["lang"] = lang
    for name, value in params.items():
        at.query_params[name] = value
    return at


def home(lang: str | None = None, **params: str) -> AppTest:
    """Home in a fresh session; `lang` as a teacher's link gives it (?lang=zh), and any other
    query parameters of the address it opens with."""
    return session(lang, **params).run()


def page(at: AppTest, path: str) -> AppTest:
    return at.switch_page(path).run()


def tiny_settings(at: AppTest, max_steps: int = 20_000, eval_interval: int = 25) -> AppTest:
    """Train page widgets set to a model that steps in milliseconds."""
    at.select_slider(key="d_model").set_value(16)
    at.select_slider(key="num_heads").set_value(2)
    at.slider(key="num_layers").set_value(1)
    at.select_slider(key="d_ff").set_value(32)
    at.select_slider(key="max_len").set_value(32)
    at.slider(key="block_size").set_value(16)
    at.slider(key="batch_size").set_value(4)
    at.number_input(key="max_steps").set_value(max_steps)
    at.number_input(key="eval_interval").set_value(eval_interval)
    return at.run()


def start_tiny_run(lang: str | None = None, **settings) -> AppTest:
    at = tiny_settings(page(home(lang), TRAIN.script), **settings)
    at.button(key="start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def step_of(at: AppTest) -> int:
    return int(at.metric[1].value.split("/")[0].replace(",", ""))


def wait_for_step(at: AppTest, minimum: int) -> int:
    """Rerun the Train page until its step metric reaches `minimum`; that step."""
    return wait_until(lambda: step_of(at.run()) >= minimum and step_of(at), f"the run to reach step {minimum}")


def own_run(at: AppTest) -> tuple[str, str]:
    return at.session_state[OWN_RUN_KEY]


def wait_finished(at: AppTest):
    """This session's run once it has finished (its last event logged); its registry entry."""
    from app.state import runs

    entry = runs.registry().get(*own_run(at))
    # a run the line's dispatcher starts is "waiting", then "starting" for a moment: not ended either
    wait_until(lambda: entry.run.state not in ("idle", "running", "waiting", "starting"), "the run to end")
    assert entry.run.state == "finished", (entry.run.state, entry.run.snapshot().error)
    return entry


def unescaped(shown: str) -> str:
    """Markdown as it reads: the page escapes a message's specials (it may quote a file name)."""
    return re.sub(r"\\(.)", r"\1", shown)


def plotly_spec(at: AppTest, index: int = 0) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


# eight lines of classical poems: a corpus without a space, a comma or a Latin letter
POEM = ("床前明月光疑是地上霜举头望明月低头思故乡\n春眠不觉晓处处闻啼鸟夜来风雨声花落知多少\n"
        "白日依山尽黄河入海流欲穷千里目更上一层楼\n红豆生南国春来发几枝愿君多采撷此物最相思\n") * 2


def upload_and_train(text: str, **settings) -> AppTest:
    """Upload `text` as poem.txt on Home, set the Train page's `settings` (session keys), press Start."""
    from app.views import uploads

    at = home()
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("poem.txt", text.encode(), "text/plain")).run()
    at = page(at, TRAIN.script)
    for key, value in settings.items():
        at.session_state[key] = value
    at.run()
    at.button(key="start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def written_cookies(at) -> dict[str, str]:
    """The cookies the page's scripts write, read from the html elements that carry them."""
    jar = {}
    for element in at.get("html"):
        for name, value in re.findall(r'document\.cookie = "([^=";]+)=([^";]*);', element.proto.body):
            jar[name] = value
    return jar


def every_text(at) -> list[str]:
    """Every string any element of the page holds (labels, values, help, captions, code), besides the
    html elements' bodies (the scripts that write cookies)."""
    from google.protobuf.json_format import MessageToDict
    texts = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            walk(child)
        proto = getattr(node, "proto", None)
        if proto is not None and getattr(node, "type", "") != "html":
            texts.append(str(MessageToDict(proto)))
    walk(at._tree)
    return texts
