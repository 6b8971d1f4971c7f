"""The app in a real browser: Debian's chromium, driven by playwright, against `streamlit run`.

The server is bench.live_server's `LiveServer`, the one the benches use. What a test waits for
is a condition on the page, never a pause:
- `wait_rendered`: the script has run to its end *and* the browser has drawn all it sent.
  Streamlit marks the app `notRunning` as soon as the script ends, but it loads the code of most
  element types (page links, st.html, charts, metrics) on first use and shows a skeleton until
  then; on a busy machine a page is still half drawn when the state says done.
- after a widget changes, the change's own effect on the page (`wait_for_settings`: the Train
  form's link holds the new value): waiting for `notRunning` alone would return at once, before
  the rerun has begun, and a fast rerun can end before the browser ever draws it as running.
- `settled`: a check of the page's layout that holds once the layout has settled (Plotly lays
  out again after its first frame), polled until it holds; its last result is what failed.
"""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.live_server import CHROMIUM, CHROMIUM_ARGS, CONNECTED, IDLE, LiveServer  # noqa: F401 (re-exported)

WAIT_MS = 120_000  # how long a page may take to show what a test waits for on a busy machine: a bound, never waited out

# drawn: no element still waiting for its code (a skeleton), none left over from the run before
DRAWN = ("() => { const app = document.querySelector('[data-testid=stApp]');"
         " return app && app.getAttribute('data-test-script-state') === 'notRunning'"
         " && !document.querySelector('[data-testid=stSkeleton]')"
         " && !document.querySelector('[data-stale=true]'); }")


def require_chromium() -> None:
    """Skip a browser test, saying why, where chromium or playwright is missing; in CI (CI=true), fail:
    CI never skips the browser tests silently."""
    missing = None
    if not Path(CHROMIUM).exists():
        missing = f"chromium is missing ({CHROMIUM}): `apt-get install -y chromium`, as .ci/run does, or set CHROMIUM"
    else:
        try:
            import playwright  # noqa: F401
        except ImportError:
            missing = "the playwright package is missing: `pip install playwright` (never `playwright install`)"
    if missing is None:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(missing, pytrace=False)
    pytest.skip(missing)


def wait_rendered(page, heading: str) -> None:
    """The page has connected, run its script to the end and drawn everything, its title `heading`."""
    page.wait_for_selector(CONNECTED, timeout=WAIT_MS)
    page.get_by_role("heading", name=heading, level=1).wait_for(timeout=WAIT_MS)
    page.wait_for_function(DRAWN, timeout=WAIT_MS)


def drawn(page) -> None:
    """The script has run to its end and the browser has drawn all of it."""
    page.wait_for_function(DRAWN, timeout=WAIT_MS)


FRESH = '[data-testid="stElementContainer"]:not([data-stale="true"])'
# A Plotly chart as the script drew it in its current run. Streamlit names a chart after a hash of
# its figure, so a chart redrawn with new data in a full rerun is a new element: the old one stays
# on the page, stale, just below the new one, until the run ends (twice the same legend entry).
CHART = f"{FRESH} .js-plotly-plot"


def fresh(page):
    """The elements the script has drawn in its current run (or its last, finished one). While a
    run draws, Streamlit leaves the run before's elements on the page, marked stale, until it
    reaches their place: just after Start they still show the previous run's numbers."""
    return page.locator(FRESH)


def new_context(browser, **options):
    """A fresh browser context (its own cookies and session) whose waits all allow WAIT_MS."""
    context = browser.new_context(**options)
    context.set_default_timeout(WAIT_MS)
    return context


def form_settings(page) -> str:
    """The Train form's settings as the page itself says them: its ?train= link ("d_model:16,…"),
    which the server writes from the values it received, so it shows when a change has arrived."""
    return page.evaluate("() => [...document.querySelectorAll('[data-testid=stCode] code')]"
                         ".map(c => c.textContent).find(t => t.includes('?train=')) || ''")


def wait_for_settings(page, *parts: str) -> str:
    """Wait until the Train form's link holds every `part` ("d_model:16"): the server has the values."""
    page.wait_for_function("(parts) => { const link = [...document.querySelectorAll('[data-testid=stCode] code')]"
                           ".map(c => c.textContent).find(t => t.includes('?train=')) || '';"
                           " const settings = new Set(link.split('?train=')[1]?.split('&')[0].split(','));"
                           " return parts.every(p => settings.has(p)); }", arg=list(parts), timeout=WAIT_MS)
    return form_settings(page)


def settled(page, check: str):
    """Poll a layout check (a JS function returning a list of problems) until it finds none; what it
    returns then (an empty list), or its last findings once the wait runs out."""
    try:
        page.wait_for_function(f"() => ({check})().length === 0", timeout=WAIT_MS // 4)
    except Exception:  # playwright's TimeoutError: report what the check still finds
        pass
    return page.evaluate(check)


def next_frame(page) -> None:
    """Wait until the browser has painted two more frames (a resize or scroll has been laid out)."""
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def main_button(page, name: str, exact: bool = True):
    """A button of the page itself: Streamlit's header shows a "Stop" of its own while a script runs."""
    return page.get_by_test_id("stMainBlockContainer").get_by_role("button", name=name, exact=exact)


def screenshot_whole(page, path, viewport: dict) -> None:
    """Streamlit scrolls inside its main section: grow the window to the content's height, then shoot."""
    height = page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")
    page.set_viewport_size({"width": viewport["width"], "height": min(max(height, viewport["height"]), 6000)})
    next_frame(page)
    page.screenshot(path=path, full_page=True)
    page.set_viewport_size(viewport)


# The words the page shows to a reader, for the language checks (see tests/cross/test_browser.py)
VISIBLE_TEXT = """() => {
  const walker = document.createTreeWalker(document.querySelector('[data-testid=stMain]'), NodeFilter.SHOW_TEXT);
  const shown = [];
  while (walker.nextNode()) {
    const el = walker.currentNode.parentElement;
    if (!el || el.closest('[data-testid=stIconMaterial], .katex, [data-testid=stCode], [data-testid=stDataFrame]')) continue;
    const style = getComputedStyle(el);
    if (style.fontSize === '0px' || style.display === 'none' || style.visibility === 'hidden') continue;
    shown.push(walker.currentNode.textContent);
  }
  return shown.join('\\n');
}"""


PROJECTOR = {"width": 1920, "height": 1080}  # a classroom projector
CLASS_WORDS = {"en": ("Class board", "Start a class", "Class"), "zh": ("班级看板", "开始一个班级", "班级")}


def start_class(browser, server, lang: str = "en", **options):
    """A teacher on a projector starts a class on the Class board (in `lang`, via ?lang= and the
    browser's locale): their context, page and the class's code, once the board has drawn it."""
    title, button, heading_word = CLASS_WORDS[lang]
    context = new_context(browser, viewport=PROJECTOR, locale="zh-CN" if lang == "zh" else "en-US", **options)
    page = context.new_page()
    page.goto(f"{server.url}/Board?lang={lang}", wait_until="domcontentloaded")
    wait_rendered(page, title)
    main_button(page, button).click()
    heading = page.get_by_role("heading", name=re.compile(rf"^{heading_word} [A-Z2-9]{{4}}$"))
    heading.wait_for()
    drawn(page)
    return context, page, heading.inner_text().split()[-1]


@contextmanager
def plotly_page(browser, width: int, height: int):
    """A blank page of that size with the plotly.js that plotly ships, loaded once; a test draws a
    figure on its #figure afresh."""
    from plotly.offline import get_plotlyjs

    context = new_context(browser, viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_content('<div id="figure"></div>')
    page.add_script_tag(content=get_plotlyjs())
    yield page
    context.close()


def post_as(page, name: str) -> None:
    """On Train, with the session's run started in a class: name it, and press Post."""
    box = page.get_by_role("textbox", name="Name on the class board")
    box.wait_for()
    drawn(page)
    box.fill(name)
    box.press("Enter")
    drawn(page)
    main_button(page, "Post to the class board").click()
