"""The dashboard where the learner waits: widget changes, the lesson's Next through every step,
page navigation and the first load, in a real browser, timed inside the page until the last
redraw (bench.inside_latency's clock: from the key press or click to the last DOM write of React
and Plotly, once the script is idle and nothing has changed for 250 ms). Beside them, a bare
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
from bench.inside_latency import (ARM, BARE_SCRIPT, BUDGET_S, DONE, TIMEOUT_MS, VIEWPORT, Action, bare_rerun,
                                  floor_row, latency_row, measure_page, pick, radio_flip, settle, slider_step, timed)
from bench.live_server import APP_DIR, CHROMIUM, CHROMIUM_ARGS, CONNECTED, Box, LiveServer
from app.state.lesson_text import STEPS  # noqa: E402

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
        page.evaluate("() => { window.__lat.start = 0; window.__lat.last = performance.now(); }")
        page.wait_for_function(DONE, timeout=TIMEOUT_MS, polling=20)  # quiet for 250 ms: nothing left to draw
        quiet = page.evaluate("() => (performance.now() - window.__lat.last) / 1000")  # since the last redraw
        finished = time.monotonic() - quiet
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
        bare_script = Path(tempfile.mkdtemp(prefix="minigpt-bare-")) / "bare.py"
        bare_script.write_text(BARE_SCRIPT)
        loads, bare_loads, before_loads = [], [], []  # (after the health check, after connecting) each
        for _ in range(args.loads):  # in turn: the app's first load, the bare script's (Streamlit's own part), before
            loads.append(first_home_load(browser, box, lang))
            bare_loads.append(first_home_load(browser, box, lang, script=str(bare_script)))
            if args.before is not None:
                before_loads.append(first_home_load(browser, box, lang, app_dir=args.before.resolve()))
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
    floor = statistics.median(bare)
    rows = [floor_row(bare)]
    rows += [latency_row(name, values, floor, lambda m: m < BUDGET_S and m <= FLOOR_RATIO * floor)
             for name, values in widgets.items()]
    rows += [latency_row(f"navigation {name}", values, floor, lambda m: m < NAVIGATION_S)
             for name, values in navigation.items()]
    rows.append(latency_row("first Home load after the health check", [t for t, _ in loads], floor,
                            lambda m: m < FIRST_LOAD_S))
    rows.append(latency_row("  of which after connecting", [c for _, c in loads], floor, bool)[:-1] + [EMPTY])
    rows.append(latency_row("  the bare script's first load, the same way", [t for t, _ in bare_loads], floor,
                            bool)[:-1] + [EMPTY])
    rows.append(latency_row("    of which after connecting", [c for _, c in bare_loads], floor, bool)[:-1] + [EMPTY])
    if before_loads:
        rows.append(latency_row(f"  the first Home load of {args.before}", [t for t, _ in before_loads], floor,
                                lambda m: m < FIRST_LOAD_S))
        rows.append(latency_row("    of which after connecting", [c for _, c in before_loads], floor,
                                bool)[:-1] + [EMPTY])
    print(f"server cores: {args.cpus or 'all'}; a run training beside the learner: "
          f"{'yes (' + state + ' at the end)' if args.training else 'no'}; budgets: widget < {BUDGET_S} s and "
          f"<= {FLOOR_RATIO:g}x bare, navigation < {NAVIGATION_S:g} s, first load < {FIRST_LOAD_S:g} s")
    print_table(["interaction", "median s", "min-max s", "× bare", "in budget"], rows)
    return 0


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
        widgets |= measure_page(page, url("Attention"), {
            "Attention: edit the text": type_text(page, "Text", ("深度学习是人工智能", "注意力机制")),
            "Attention: without 1/√d_k (checkbox)": checkbox_flip(page, "Without 1/√d_k scaling"),
            "Attention: switch the view": radio_flip(page, 0),
        }, repeats | 1)
        widgets |= measure_page(page, url("Scaling"), {
            "√d_k: seq_len slider one step": slider_step(page, 0, ("ArrowRight", "ArrowLeft")),
        }, repeats)
        widgets |= measure_page(page, url("Inside"), {
            "Inside attention: query slider one step": slider_step(page, 0, ("ArrowRight", "ArrowLeft")),
            "Inside attention: pick a head": pick(page, 1),
        }, repeats)
        widgets |= measure_page(page, url("Experiments"), {
            "Experiments: remove the positions (knock-out)": checkbox_flip(page, "Remove the positional encoding"),
            "Experiments: attention window one step": slider_step(page, 0, ("ArrowRight", "ArrowLeft")),  # at its end
        }, repeats | 1)
        widgets |= lesson_walk(page, url("Lesson"), repeats)
        page.goto(url(""), wait_until="domcontentloaded")
        page.wait_for_selector(CONNECTED, timeout=TIMEOUT_MS)
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
