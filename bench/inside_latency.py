"""How long the learner waits on the look-inside views: in a real browser, from the action until
the page has finished its rerun (the script idle again, Plotly drawn), on the shipped default
model. The budget is 0.5 s per interaction; this prints medians, it asserts nothing.

    python -m bench.inside_latency                 # 7 rounds of each interaction
    python -m bench.inside_latency --repeats 15 --lang en
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import print_header, print_table  # noqa: E402
from bench.live_server import CHROMIUM, CHROMIUM_ARGS, CONNECTED, IDLE, LiveServer  # noqa: E402

TIMEOUT_MS = 60_000
BUDGET_S = 0.5


def settle(page) -> None:
    page.wait_for_selector(IDLE, timeout=TIMEOUT_MS)
    page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].every(p => p._fullLayout)",
                           timeout=TIMEOUT_MS)


def timed(page, action) -> float:
    started = time.perf_counter()
    action()
    page.wait_for_timeout(50)  # let the rerun start before waiting for the idle state
    settle(page)
    return time.perf_counter() - started - 0.05


def slider_step(page, index: int, keys: tuple[str, str]):
    """Move the slider one step, back and forth, so that every press changes its value."""
    turn = [0]

    def press() -> None:
        turn[0] ^= 1
        page.locator('[data-testid="stSlider"]').nth(index).get_by_role("slider").press(keys[turn[0]])
    return press


def pick(page, index: int):
    """Choose the selectbox's other option each time (choosing the same one would not rerun)."""
    turn = [0]

    def choose() -> None:
        turn[0] ^= 1
        page.locator('[data-testid="stSelectbox"]').nth(index).click()
        page.get_by_role("option").nth(turn[0]).click()
    return choose


def measure_page(page, url: str, cases: dict, repeats: int) -> dict[str, list[float]]:
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector(CONNECTED, timeout=TIMEOUT_MS)
    settle(page)
    times = {name: [] for name in cases}
    for _ in range(repeats):
        for name, action in cases.items():
            times[name].append(timed(page, action))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--lang", default="zh")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    print_header("Look-inside views: wait per interaction, real browser")
    rows = []
    with LiveServer() as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        inside = measure_page(page, f"{server.url}/Inside?lang={args.lang}", {
            "Inside: query slider one step": slider_step(page, 0, ("ArrowLeft", "ArrowRight")),
            "Inside: pick a head": pick(page, 1),
            "Inside: pick a layer": pick(page, 0),
        }, args.repeats)
        generate = measure_page(page, f"{server.url}/Generate?lang={args.lang}", {
            "Generate: temperature one step (bars redrawn)": slider_step(page, 0, ("ArrowLeft", "ArrowRight")),
            "Generate: top-p one step": slider_step(page, 1, ("ArrowLeft", "ArrowRight")),
        }, args.repeats)
        browser.close()
    for name, values in {**inside, **generate}.items():
        rows.append([name, f"{statistics.median(values):.3f}", f"{min(values):.3f}-{max(values):.3f}",
                     "yes" if statistics.median(values) < BUDGET_S else "no"])
    print_table(["interaction", "median s", "min-max s", f"< {BUDGET_S} s"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
