"""How long the learner waits on the look-inside views: in a real browser, from the key press or
click until the last change its rerun made to the page (React's and Plotly's DOM writes, timed
inside the page), on the shipped default model. Beside them, the same wait for a bare two-line
script served the same way: the floor of a round trip on this machine. The budget is 0.5 s per
interaction; this prints medians and their ratio to the floor, it asserts nothing.

    python -m bench.inside_latency                 # 7 rounds of each interaction
    python -m bench.inside_latency --repeats 15 --lang en
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from bench.common import EMPTY, print_header, print_table
from bench.live_server import CHROMIUM, CHROMIUM_ARGS, CONNECTED, IDLE, LiveServer

TIMEOUT_MS = 60_000
BUDGET_S = 0.5
VIEWPORT = {"width": 1280, "height": 900}  # every page the latency benches open


def settle(page) -> None:
    page.wait_for_selector(IDLE, timeout=TIMEOUT_MS)
    page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].every(p => p._fullLayout)",
                           timeout=TIMEOUT_MS)


# Timed inside the page: from the learner's key press or click (a capturing listener) until the
# last change the rerun made to the main area (React's and Plotly's DOM writes), once the app's
# script is idle again and nothing has changed for QUIET_MS.
QUIET_MS = 250
ARM = """() => {
  const lat = window.__lat = {start: null, last: null};
  if (!window.__latListeners) {
    window.__latListeners = true;
    const mark = () => { if (window.__lat.start === null) window.__lat.start = performance.now(); };
    for (const kind of ['keydown', 'pointerdown']) document.addEventListener(kind, mark, true);
  }
  if (window.__latObserver) window.__latObserver.disconnect();
  window.__latObserver = new MutationObserver(() => { if (lat.start !== null) lat.last = performance.now(); });
  window.__latObserver.observe(document.querySelector('[data-testid=stMain]'),
                               {subtree: true, childList: true, attributes: true, characterData: true});
}"""
DONE = f"""() => window.__lat.last !== null && performance.now() - window.__lat.last > {QUIET_MS}
  && document.querySelector('[data-testid=stApp]').getAttribute('data-test-script-state') === 'notRunning'"""


class Action:
    """What the learner does: `prepare` (not timed: opening a dropdown), then `act` (timed)."""

    def __init__(self, act, prepare=None):
        self.act, self.prepare = act, prepare


def timed(page, action: "Action") -> float:
    settle(page)
    if action.prepare is not None:
        action.prepare()
    page.evaluate(ARM)
    action.act()
    page.wait_for_function(DONE, timeout=TIMEOUT_MS, polling=20)
    return page.evaluate("() => (window.__lat.last - window.__lat.start) / 1000")


def slider_step(page, index: int, keys: tuple[str, str]) -> Action:
    """Move the slider one step, keys[1] first then keys[0], back and forth, so that every press
    changes its value (a press at the end of the range would not rerun)."""
    turn = [0]

    def press() -> None:
        turn[0] ^= 1
        page.get_by_test_id("stMainBlockContainer").locator('[data-testid="stSlider"]').nth(index) \
            .get_by_role("slider").press(keys[turn[0]])
    return Action(press)


def pick(page, index: int, first: int = 1) -> Action:
    """Choose the selectbox's option `first`, then the other of the first two, in turn (choosing
    the option already chosen would not rerun); opening the list is not timed, choosing is."""
    turn = [first ^ 1]

    def open_list() -> None:
        turn[0] ^= 1
        page.get_by_test_id("stMainBlockContainer").locator('[data-testid="stSelectbox"]').nth(index).click()
        page.get_by_role("option").nth(turn[0]).wait_for()

    def choose() -> None:
        page.get_by_role("option").nth(turn[0]).click()
    return Action(choose, open_list)


def measure_page(page, url: str, cases: dict, repeats: int) -> dict[str, list[float]]:
    """Each case `repeats` times, in turn; url "" stays on the page as it is."""
    if url:
        page.goto(url, wait_until="domcontentloaded")
        page.wait_for_selector(CONNECTED, timeout=TIMEOUT_MS)
    settle(page)
    times = {name: [] for name in cases}
    for _ in range(repeats):
        for name, action in cases.items():
            times[name].append(timed(page, action))
    return times


BARE_SCRIPT = """import streamlit as st
value = st.slider("x", 0, 100, 50)
st.write(value)
"""


def bare_rerun(browser, repeats: int, box=None) -> list[float]:
    """The floor of a round trip on this machine: a two-line script's slider, served the same way
    (in the same bench.live_server.Box as the app, if any)."""
    folder = Path(tempfile.mkdtemp(prefix="minigpt-bare-"))
    (folder / "bare.py").write_text(BARE_SCRIPT)
    with LiveServer(script=str(folder / "bare.py"), box=box) as server:
        page = browser.new_page(viewport=VIEWPORT)
        times = measure_page(page, server.url, {"bare": slider_step(page, 0, ("ArrowLeft", "ArrowRight"))}, repeats)
        page.close()
    return times["bare"]


def radio_flip(page, index: int) -> Action:
    """Choose the radio group's first and second option in turn."""
    turn = [0]

    def flip() -> None:
        turn[0] ^= 1
        page.get_by_test_id("stMainBlockContainer").locator('[data-testid="stRadio"]').nth(index) \
            .get_by_role("radio").nth(turn[0]).check(force=True)
    return Action(flip)


def floor_row(bare: list[float]) -> list[str]:
    median = statistics.median(bare)
    return ["bare two-line script: slider one step", f"{median:.3f}", f"{min(bare):.3f}-{max(bare):.3f}", "1.0", EMPTY]


def latency_row(name: str, values: list[float], floor: float, in_budget) -> list[str]:
    """One table row: the median, the range, the ratio to the bare rerun, and in_budget(median)."""
    median = statistics.median(values)
    return [name, f"{median:.3f}", f"{min(values):.3f}-{max(values):.3f}", f"{median / floor:.1f}",
            "yes" if in_budget(median) else "no"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--lang", default="zh")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    print_header("Look-inside views: wait per interaction, real browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        bare = bare_rerun(browser, args.repeats)
        with LiveServer() as server:
            page = browser.new_page(viewport=VIEWPORT)
            lang = f"?lang={args.lang}"
            times = measure_page(page, f"{server.url}/Inside{lang}", {
                "Inside: query slider one step": slider_step(page, 0, ("ArrowRight", "ArrowLeft")),  # starts at the end
                "Inside: pick a head": pick(page, 1),
                "Inside: pick a layer": pick(page, 0),
            }, args.repeats)
            times |= measure_page(page, f"{server.url}/Generate{lang}", {
                "Generate: temperature one step (bars redrawn)": slider_step(page, 0, ("ArrowLeft", "ArrowRight")),
                "Generate: top-p one step": slider_step(page, 1, ("ArrowRight", "ArrowLeft")),  # starts at 1.0
            }, args.repeats)
            page.get_by_test_id("stFormSubmitButton").get_by_role("button").click()
            page.wait_for_selector('[data-testid="stDataFrame"]', timeout=TIMEOUT_MS)
            settle(page)
            sliders = page.locator('[data-testid="stSlider"]').count()  # the position picker is the last
            times |= measure_page(page, "", {
                "Generate: pick a generated character": slider_step(page, sliders - 1, ("ArrowLeft", "ArrowRight")),
            }, args.repeats)
            times |= measure_page(page, f"{server.url}/Attention{lang}", {
                "Attention: switch the view": radio_flip(page, 0),
            }, args.repeats | 1)  # an odd number of flips ends on the second view, one layer's heads
            times |= measure_page(page, "", {
                "Attention: pick a layer (one layer's heads)": pick(page, 0, first=0),  # it opens on the last
            }, args.repeats)
            page.close()
        browser.close()
    floor = statistics.median(bare)
    rows = [floor_row(bare)] + [latency_row(name, values, floor, lambda m: m < BUDGET_S) for name, values in times.items()]
    print_table(["interaction", "median s", "min-max s", "× bare", f"< {BUDGET_S} s"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
