"""The dashboard where the learner waits: widget changes, the lesson's Next through every step,
page navigation and the first load, in a real browser, timed inside the page until the last
redraw (from the key press or click to the last DOM write of React and Plotly, once the script is
idle and nothing has changed for 250 ms). Beside them, a bare
two-line script's rerun served the same way, the floor of a round trip on this machine. Budgets:
a widget (and the lesson's Next) < 0.5 s and within 3x the floor, a navigation < 1 s, the first
Home load < 3 s after the server answers its health check (beside it, a bare script's first load:
the part of it that is Streamlit's and the browser's).
It prints medians and ratios and asserts nothing.

`--training` starts a run of the default preset, made long enough (20,000 steps, no early stop)
to outlast the bench, from another browser session first, so that every figure is taken with a run training
beside the learner (the table's header says the run's state at the end); `--cpus 0` (root, Linux cgroups)
serves the app on one core, as on Community Cloud's small box.

    python -m bench.dashboard_latency
    python -m bench.dashboard_latency --training --repeats 5
    git worktree add ../minigpt-before <commit>   # before and after a change, side by side
    python -m bench.dashboard_latency --before ../minigpt-before --rounds 3      # every wait, A B A B
    python -m bench.dashboard_latency --first-load-only --loads 6 --before ../minigpt-before
    sudo python -m bench.dashboard_latency --cpus 0 --training
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common import EMPTY, Stats, print_header, print_table
from bench.live_server import APP_DIR, CHROMIUM, CHROMIUM_ARGS, CONNECTED, IDLE, Box, LiveServer
from app.state.lesson_file import builtin_lesson  # noqa: E402

TIMEOUT_MS = 60_000
STEPS = builtin_lesson("en").steps  # the built-in lesson, as the app reads it
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
    (folder / "bare.py").write_text(BARE_SCRIPT)  # outside the checkout: nothing of the app loads
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


NAVIGATION_S, FIRST_LOAD_S, FLOOR_RATIO = 1.0, 3.0, 3.0


def first_home_load(browser, box: Box, lang: str, script: str = "streamlit_app.py",
                    app_dir: Path = APP_DIR) -> tuple[float, float]:
    """A fresh server (of the checkout `app_dir`): from its health check answering until Home (or
    `script`) has drawn everything; and the part of it after the page's websocket connected (the
    script's run and the drawing; before it, the browser loads Streamlit's frontend, as for any
    script, and its spread on a busy machine hides the app's own part)."""
    with LiveServer(box=box, script=script, app_dir=app_dir) as server:
        healthy = time.monotonic()
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(f"{server.url}/?lang={lang}", wait_until="domcontentloaded")
        page.wait_for_selector(CONNECTED, timeout=TIMEOUT_MS)
        connected = time.monotonic()
        settle(page)
        page.evaluate(ARM)
        # the clock from the page's start
        page.evaluate("() => { window.__lat.start = 0; window.__lat.last = performance.now(); }")
        page.wait_for_function(DONE, timeout=TIMEOUT_MS, polling=20)  # quiet for 250 ms: nothing left to draw
        quiet = page.evaluate("() => (performance.now() - window.__lat.last) / 1000")  # since the last redraw
        finished = time.monotonic() - quiet  # the last redraw, not the moment the quiet was noticed
        page.close()
        server.wait_idle()  # torch's load and the fork server: a server stopped amid them slowed the next one's start
        return finished - healthy, finished - connected


def navigate(page, label: str) -> Action:
    """Click the sidebar's link to a page: a navigation inside the app, as a learner makes it."""
    name = re.compile(rf"(^|\s){re.escape(label)}$")  # the link's words, after its icon
    return Action(lambda: page.get_by_test_id("stSidebar").get_by_role("link", name=name).first.click())


def type_text(page, label: str, texts: tuple[str, str]) -> Action:
    """Replace a text box's content and press Enter, alternating two texts."""
    turn = [0]

    def type_and_enter() -> None:
        turn[0] ^= 1
        box = page.get_by_label(label, exact=True)
        box.fill(texts[turn[0]])
        box.press("Enter")
    return Action(type_and_enter)


def checkbox_flip(page, label: str) -> Action:
    box = page.get_by_test_id("stMainBlockContainer").locator('[data-testid="stCheckbox"]', has_text=label)
    return Action(lambda: box.locator("label").first.click())


LESSON_NEXT = "Lesson: Next step"


def lesson_walk(page, url: str, repeats: int, steps: int = len(STEPS)) -> dict[str, list[float]]:
    """The lesson from its first step to its last by the top bar's Next, `repeats` times (the
    address brings it back to step 1, not timed): every press is one "Next step", and is kept
    under its step too ("  Next to step N"), since each step draws a view of its own."""
    times = {LESSON_NEXT: []} | {f"  Next to step {n}": [] for n in range(2, steps + 1)}
    button = page.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Next →").first
    for _ in range(repeats):
        page.goto(url + "&lesson=1", wait_until="domcontentloaded")
        page.wait_for_selector(CONNECTED, timeout=TIMEOUT_MS)
        for n in range(2, steps + 1):
            seconds = timed(page, Action(button.click))
            times[LESSON_NEXT].append(seconds)
            times[f"  Next to step {n}"].append(seconds)
    return times


def start_training(browser, url: str, steps: int = 20_000):
    """Another session sets the default preset's step count high enough to outlast the bench,
    presses Start on Train and leaves its tab open."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(url + "/Train?lang=en", wait_until="domcontentloaded")
    page.wait_for_selector(CONNECTED, timeout=TIMEOUT_MS)
    settle(page)
    box = page.get_by_label("Steps", exact=True)
    box.fill(str(steps))
    box.press("Enter")
    page.wait_for_timeout(500)  # the rerun that takes the value starts
    settle(page)
    early = page.get_by_test_id("stMainBlockContainer").locator('[data-testid="stCheckbox"]', has_text="Stop early")
    if early.get_by_role("checkbox").is_checked():  # the preset stops when val loss stalls: keep it training
        early.locator("label").first.click()
        page.wait_for_timeout(500)
        settle(page)
    page.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Start", exact=True).click()
    page.locator('[data-testid="stMetricValue"]').first.filter(has_text="running").wait_for(timeout=TIMEOUT_MS)
    return page


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--loads", type=int, default=3, help="fresh servers for the first Home load")
    parser.add_argument("--training", action="store_true", help="a run of the default preset trains throughout")
    parser.add_argument("--cpus", default=None, help="cores the server may use, e.g. 0 (needs root)")
    parser.add_argument("--before", type=Path, default=None,
                        help="another checkout of the app (a git worktree of an older commit): every wait is timed "
                             "on it too, in turn with this one's, and the table gives both and their ratio")
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --before: rounds of (this checkout, the other) for the widgets and navigation")
    parser.add_argument("--first-load-only", action="store_true", help="time the first loads only")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    print_header("The dashboard: wait per interaction, real browser")
    lang = "en"  # the labels below are the English ones; the work per rerun is the same in Chinese
    with Box(cpus=args.cpus) as box, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        bare = bare_rerun(browser, args.repeats, box)
        loads, bare_loads, before_loads = first_loads(browser, box, lang, args)
        widgets, navigation, state = {}, {}, None
        before_widgets, before_navigation = {}, {}
        for _ in range(0 if args.first_load_only else args.rounds if args.before else 1):  # A B A B
            for app_dir, into in ((APP_DIR, (widgets, navigation)),
                                  *(((args.before.resolve(), (before_widgets, before_navigation)),)
                                    if args.before else ())):
                found, hops, state = interactions(browser, box, lang, args.repeats, args.training, app_dir)
                for table, new in zip(into, (found, hops)):
                    for name, values in new.items():
                        table.setdefault(name, []).extend(values)
        browser.close()
    if args.before is not None:
        print_side_by_side(args.before, widgets | {f"navigation {k}": v for k, v in navigation.items()},
                           before_widgets | {f"navigation {k}": v for k, v in before_navigation.items()},
                           loads, before_loads)
    print(f"server cores: {args.cpus or 'all'}; a run training beside the learner: "
          f"{'yes (' + state + ' at the end)' if args.training else 'no'}; budgets: widget < {BUDGET_S} s and "
          f"<= {FLOOR_RATIO:g}x bare, navigation < {NAVIGATION_S:g} s, first load < {FIRST_LOAD_S:g} s")
    print_table(["interaction", "median s", "min-max s", "× bare", "in budget"],
                latency_rows(bare, widgets, navigation, (loads, bare_loads, before_loads), args.before))
    return 0


def first_loads(browser, box: Box, lang: str, args) -> tuple[list, list, list]:
    """--loads fresh servers each, in turn: the app's first Home load, a bare script's (Streamlit's own
    part of it) and, with --before, the other checkout's; (after the health check, after connecting) each."""
    bare_script = Path(tempfile.mkdtemp(prefix="minigpt-bare-")) / "bare.py"
    bare_script.write_text(BARE_SCRIPT)
    loads, bare_loads, before_loads = [], [], []
    for _ in range(args.loads):
        loads.append(first_home_load(browser, box, lang))
        bare_loads.append(first_home_load(browser, box, lang, script=str(bare_script)))
        if args.before is not None:
            before_loads.append(first_home_load(browser, box, lang, app_dir=args.before.resolve()))
    return loads, bare_loads, before_loads


def latency_rows(bare: list[float], widgets: dict, navigation: dict, first: tuple[list, list, list],
                 before: Path | None) -> list[list[str]]:
    """The table: the floor, every widget and navigation against its budget, then the first loads."""
    loads, bare_loads, before_loads = first
    floor = statistics.median(bare)
    rows = [floor_row(bare)]
    rows += [latency_row(name, values, floor, lambda m: m < BUDGET_S and m <= FLOOR_RATIO * floor)
             for name, values in widgets.items()]
    rows += [latency_row(f"navigation {name}", values, floor, lambda m: m < NAVIGATION_S)
             for name, values in navigation.items()]
    rows.append(latency_row("first Home load after the health check", [t for t, _ in loads], floor,
                            lambda m: m < FIRST_LOAD_S))
    # the parts of a load have no budget of their own: their last cell is EMPTY
    rows.append(latency_row("  of which after connecting", [c for _, c in loads], floor, bool)[:-1] + [EMPTY])
    rows.append(latency_row("  the bare script's first load, the same way", [t for t, _ in bare_loads], floor,
                            bool)[:-1] + [EMPTY])
    rows.append(latency_row("    of which after connecting", [c for _, c in bare_loads], floor, bool)[:-1] + [EMPTY])
    if before_loads:
        rows.append(latency_row(f"  the first Home load of {before}", [t for t, _ in before_loads], floor,
                                lambda m: m < FIRST_LOAD_S))
        rows.append(latency_row("    of which after connecting", [c for _, c in before_loads], floor,
                                bool)[:-1] + [EMPTY])
    return rows

def print_side_by_side(before: Path, after: dict, earlier: dict, loads: list, before_loads: list) -> None:
    """This checkout's waits beside the other checkout's, measured in turn in this run."""
    after = after | {"first Home load after the health check": [t for t, _ in loads],
                     "  of which after connecting": [c for _, c in loads]}
    earlier = earlier | {"first Home load after the health check": [t for t, _ in before_loads],
                         "  of which after connecting": [c for _, c in before_loads]}
    rows = []
    for name, values in after.items():
        then = earlier.get(name) or [float("nan")]
        rows.append([name, Stats(values).fmt(3), Stats(then).fmt(3),
                     f"{statistics.median(values) / statistics.median(then):.2f}"])
    print(f"side by side, median (min-max) seconds: this checkout against {before}")
    print_table(["interaction", "this checkout", "before", "this / before"], rows)


def pick_generated(page, repeats: int) -> dict[str, list[float]]:
    """Generate's text written (not timed), then the position picker under it moved a step: the
    view of one generated character's probabilities."""
    page.get_by_test_id("stFormSubmitButton").get_by_role("button").click()
    page.wait_for_selector('[data-testid="stDataFrame"]', timeout=TIMEOUT_MS)
    settle(page)
    sliders = page.locator('[data-testid="stSlider"]').count()  # the position picker is the last
    return measure_page(page, "", {
        "Generate: pick a generated character": slider_step(page, sliders - 1, ("ArrowLeft", "ArrowRight")),
    }, repeats)


def interactions(browser, box: Box, lang: str, repeats: int, training: bool, app_dir: Path = APP_DIR):
    """Every widget and every navigation, on one server of the checkout `app_dir`; with training,
    beside another session's run. Returns the widgets' times, the navigations' times and the
    run's state at the end (or None)."""
    with LiveServer(box=box, app_dir=app_dir) as server:
        trainer = start_training(browser, server.url) if training else None
        page = browser.new_page(viewport=VIEWPORT)
        url = lambda path: f"{server.url}/{path}?lang={lang}"  # noqa: E731
        widgets = measure_page(page, url("Generate"), {
            "Generate: temperature one step": slider_step(page, 0, ("ArrowLeft", "ArrowRight")),
            "Generate: top-p one step": slider_step(page, 1, ("ArrowRight", "ArrowLeft")),
        }, repeats)
        widgets |= pick_generated(page, repeats)
        widgets |= measure_page(page, url("Attention"), {
            "Attention: edit the text": type_text(page, "Text", ("深度学习是人工智能", "注意力机制")),
            "Attention: without 1/√d_k (checkbox)": checkbox_flip(page, "Without 1/√d_k scaling"),
            "Attention: switch the view": radio_flip(page, 0),
        }, repeats | 1)  # an odd number of flips ends on the second view, one layer's heads
        widgets |= measure_page(page, "", {
            "Attention: pick a layer (one layer's heads)": pick(page, 0, first=0),  # it opens on the last
        }, repeats)
        widgets |= measure_page(page, url("Scaling"), {
            "√d_k: seq_len slider one step": slider_step(page, 0, ("ArrowRight", "ArrowLeft")),
        }, repeats)
        widgets |= measure_page(page, url("Inside"), {
            "Inside attention: query slider one step": slider_step(page, 0, ("ArrowRight", "ArrowLeft")),
            "Inside attention: pick a head": pick(page, 1),
            "Inside attention: pick a layer": pick(page, 0),
        }, repeats)
        widgets |= measure_page(page, url("Experiments"), {
            "Experiments: remove the positions (knock-out)": checkbox_flip(page, "Remove the positional encoding"),
            "Experiments: attention window one step": slider_step(page, 0, ("ArrowRight", "ArrowLeft")),  # at its end
        }, repeats | 1)
        widgets |= lesson_walk(page, url("Lesson"), repeats)
        page.goto(url(""), wait_until="domcontentloaded")
        page.wait_for_selector(CONNECTED, timeout=TIMEOUT_MS)
        # a round trip
        hops = ["Train", "Generate", "Attention", "√d_k scaling", "Inside attention", "Inside the model", "Experiments",
                "Home"]
        navigation: dict[str, list[float]] = {f"to {hop}": [] for hop in hops}
        for _ in range(repeats):
            for hop in hops:
                navigation[f"to {hop}"].append(timed(page, navigate(page, hop)))
        state = trainer.locator('[data-testid="stMetricValue"]').first.inner_text() if trainer else None
        page.close()
    return widgets, navigation, state


if __name__ == "__main__":
    sys.exit(main())
