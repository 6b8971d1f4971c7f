"""Eight browser sessions at once: each gets its own, correct answers, and how long they wait.

One `streamlit run` on a free loopback port; 8 headless chromium contexts (separate sessions)
work at the same time. Each one
1. opens Generate, types its own prompt and seed, sets temperature 0 (greedy, so the answer
   is known) and 40 new characters, presses Generate, and reads the text: it must equal the
   library's `generate()` for that prompt on the shipped default model, character for character;
2. opens Attention (timed from `goto` to the first drawn heatmap), types its own text, and
   reads the heatmap's axis labels: they must be `position_labels()` of that very text.
Every session's prompt and text differ, so an answer meant for another session would show.
Latencies: Generate from the click to the finished text (the page streams with a 15 ms
typewriter delay per character, 0.6 s for 40); Attention from `goto`, and from typing the text,
to the heatmap drawn. Printed as median / p90 / max over all sessions and rounds.

    python -m bench.concurrent_sessions [--sessions 8] [--rounds 3] [--new-tokens 40]

Community Cloud's smallest box: `--training-runs 2` first starts two runs of the default preset
from two more sessions (they train through every round), and `--memory-mb 690 --cpus 0` serves
the app in a control group with a hard 690 MB memory limit on one core (bench/live_server.Box;
needs root). The report adds the server's peak RSS, the group's peak memory and OOM kills.

    sudo python -m bench.concurrent_sessions --training-runs 2 --memory-mb 690 --cpus 0
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field

from bench.common import percentile, print_table
from bench.live_server import CHROMIUM, CHROMIUM_ARGS, CONNECTED, IDLE, Box, LiveServer
from minigpt import DEFAULT_CORPUS, Sampling, generate, load_corpus, load_pretrained
from minigpt.viz import position_labels

TIMEOUT_MS = 120_000
VIEWPORT = {"width": 1400, "height": 1800}  # every session's page
HEATMAP_LABELS = "() => { const p = document.querySelector('.js-plotly-plot'); " \
                 "return p && p.data && p.data.length && document.querySelector('.js-plotly-plot .hm image') " \
                 "? JSON.stringify(p.data[0].x) : null }"


@dataclass
class Task:
    prompt: str
    seed: int
    text: str               # for the attention view
    expected: str           # what generate() gives for the prompt
    labels: list[str]       # position_labels(text)


@dataclass
class Result:
    ok: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    generate_s: list[float] = field(default_factory=list)
    attention_goto_s: list[float] = field(default_factory=list)
    attention_typed_s: list[float] = field(default_factory=list)


def tasks(count: int, round_: int, new_tokens: int) -> list[Task]:
    """Distinct prompts and texts cut from the corpus the shipped model learned (all in its vocabulary)."""
    checkpoint = load_pretrained(DEFAULT_CORPUS)  # the model a new session has loaded
    corpus = load_corpus(DEFAULT_CORPUS).replace("\n", "")
    out = []
    for i in range(count):
        start = (round_ * count + i) * 11 % (len(corpus) - 40)  # spread over the corpus: every session its own text
        prompt, text = corpus[start:start + 2 + i % 3], corpus[start + 5:start + 17 + i % 7]
        expected = generate(checkpoint.model, checkpoint.tokenizer, prompt, max_new_tokens=new_tokens,
                            # greedy: the one right answer
                            sampling=Sampling(temperature=0.0, top_p=1.0), seed=100 * round_ + i,
                            block_size=checkpoint.block_size)
        out.append(Task(prompt, 100 * round_ + i, text, expected, position_labels(text)))
    assert len({t.expected for t in out}) == count and len({t.text for t in out}) == count, "answers must differ"
    return out


async def rendered(page, heading: str) -> None:
    await page.wait_for_selector(CONNECTED, timeout=TIMEOUT_MS)
    await page.get_by_role("heading", name=heading, level=1).wait_for(timeout=TIMEOUT_MS)
    await page.wait_for_selector(IDLE, timeout=TIMEOUT_MS)


async def enter(page, label: str, value: str) -> None:
    box = page.get_by_label(label, exact=True)
    await box.fill(value)
    await box.press("Enter")
    await page.wait_for_timeout(300)
    await page.wait_for_selector(IDLE, timeout=TIMEOUT_MS)


async def one_session(browser, url: str, task: Task, new_tokens: int, result: Result, name: str) -> None:
    context = await browser.new_context(viewport=VIEWPORT)
    try:
        page = await context.new_page()
        await page.goto(url + "/Generate", wait_until="domcontentloaded", timeout=TIMEOUT_MS)
        await rendered(page, "Generate")
        # The settings sit in a form, where Enter would generate at once with whatever is set so far:
        # fill each box without Enter (it takes its value when it loses focus), then click Generate.
        for label, value in (("Prompt", task.prompt), ("Max new tokens", str(new_tokens)), ("Seed", str(task.seed))):
            await page.get_by_label(label, exact=True).fill(value)
        slider = page.locator('[data-testid="stSlider"]', has_text="Temperature").get_by_role("slider")
        await slider.press("Home")  # the slider's minimum: 0, greedy
        await page.wait_for_timeout(300)
        await page.wait_for_selector(IDLE, timeout=TIMEOUT_MS)
        clicked = time.monotonic()  # the learner's wait starts at the click
        await page.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Generate", exact=True).click()
        code = page.locator('[data-testid="stCode"] code').first
        await code.wait_for(timeout=TIMEOUT_MS)
        result.generate_s.append(time.monotonic() - clicked)
        shown = await code.text_content()
        good = shown == task.expected.removesuffix("\n")  # a code block does not show a final line break
        (result.ok if good else result.wrong).append(
            f"{name} generate" + ("" if good else f": got {shown!r}, expected {task.expected!r}"))

        opened = time.monotonic()
        await page.goto(url + "/Attention", wait_until="domcontentloaded", timeout=TIMEOUT_MS)
        await page.wait_for_function(HEATMAP_LABELS, timeout=TIMEOUT_MS)  # a heatmap drawn, not just the page
        result.attention_goto_s.append(time.monotonic() - opened)
        await rendered(page, "Attention")
        box = page.get_by_label("Text", exact=True)
        await box.fill(task.text)
        typed = time.monotonic()
        await box.press("Enter")
        # this session's own text on the axis: no answer crossed over
        want = json.dumps(task.labels, ensure_ascii=False)
        handle = await page.wait_for_function(
            f"() => {{ const x = ({HEATMAP_LABELS})(); return x && JSON.stringify(JSON.parse(x)) === "
            f"JSON.stringify({want}) ? x : null }}", timeout=TIMEOUT_MS)
        result.attention_typed_s.append(time.monotonic() - typed)
        labels = json.loads(await handle.json_value())
        traces = await page.evaluate("() => document.querySelector('.js-plotly-plot').data.length")
        good = labels == task.labels and traces >= 1
        (result.ok if good else result.wrong).append(f"{name} attention" + ("" if good else f": {labels}"))
    except Exception as error:  # a timeout or a wrong page: counted, reported, the others go on
        result.wrong.append(f"{name}: {type(error).__name__}: {str(error).splitlines()[0]}")
    finally:
        await context.close()


async def start_training(browser, url: str, steps: int = 20_000) -> tuple[object, object]:
    """A session that starts a run of the default preset, long enough to outlast the bench (20,000
    steps, no early stop), and stays open while it trains."""
    context = await browser.new_context(viewport=VIEWPORT)
    page = await context.new_page()
    await page.goto(url + "/Train?lang=en", wait_until="domcontentloaded", timeout=TIMEOUT_MS)
    await rendered(page, "Train")
    main = page.get_by_test_id("stMainBlockContainer")
    box = page.get_by_label("Steps", exact=True)
    await box.fill(str(steps))
    await box.press("Enter")
    await page.wait_for_timeout(1000)  # the rerun that takes the value
    await page.wait_for_selector(IDLE, timeout=TIMEOUT_MS)
    early = main.locator('[data-testid="stCheckbox"]', has_text="Stop early")
    if await early.get_by_role("checkbox").is_checked():
        await early.locator("label").first.click()
        await page.wait_for_timeout(1000)
        await page.wait_for_selector(IDLE, timeout=TIMEOUT_MS)
    await page.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Start", exact=True).click()
    await page.locator('[data-testid="stMetricValue"]').first.filter(has_text="running").wait_for(timeout=TIMEOUT_MS)
    return context, page


async def training_state(page) -> str:
    return (await page.locator('[data-testid="stMetricValue"]').first.inner_text()).strip()


async def run(sessions: int, rounds: int, new_tokens: int, training_runs: int, box: Box) -> None:
    from playwright.async_api import async_playwright

    results = {1: Result(), sessions: Result()}
    with box, LiveServer({"OMP_NUM_THREADS": "1"}, box=box) as server:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            warm = await browser.new_page()
            await warm.goto(server.url + "/Generate", wait_until="domcontentloaded")
            await rendered(warm, "Generate")  # imports torch and loads the shipped model once
            await warm.close()
            trainers = [await start_training(browser, server.url) for _ in range(training_runs)]
            rss_before, cpu_before, started = server.rss_mb(), server.cpu_seconds(), time.monotonic()
            for round_ in range(rounds):
                for count, result in results.items():  # one session alone, then all at once, interleaved
                    work = tasks(count, round_, new_tokens)
                    await asyncio.gather(*(one_session(browser, server.url, task, new_tokens, result,
                                                       f"round {round_ + 1} session {i + 1}/{count}")
                                           for i, task in enumerate(work)))
                print(f"round {round_ + 1} done after {time.monotonic() - started:.0f} s", flush=True)
            wall, cpu = time.monotonic() - started, server.cpu_seconds() - cpu_before
            rss_after, rss_peak = server.rss_mb(), server.peak_rss_mb()
            states = []
            for context, page in trainers:
                try:
                    await page.reload(wait_until="domcontentloaded")
                    await rendered(page, "Train")
                    states.append(await training_state(page))
                except Exception as error:  # a server that died (an OOM kill) answers nothing
                    states.append(f"unreadable ({type(error).__name__})")
                await context.close()
            await browser.close()
        code, seconds = server.stop()
        box_peak, oom_kills = box.peak_mb(), box.oom_kills()
    print(f"\n{sessions} concurrent browser sessions (and 1 alone, for comparison) x {rounds} rounds against one "
          f"server on 127.0.0.1; the shipped {DEFAULT_CORPUS} model, greedy, {new_tokens} new characters")
    print(f"server: {cpu:.0f} CPU seconds over {wall:.0f} s of wall time on {os.cpu_count()} cores shared with "
          f"chromium; RSS {rss_before:.0f} MB before, {rss_after:.0f} MB after, peak {rss_peak:.0f} MB; SIGTERM: "
          f"exit code {code} in {seconds:.1f} s")
    if training_runs:
        print(f"training beside them: {training_runs} runs of the default preset; at the end: {', '.join(states)}")
    if box.paths:
        peak = "n/a" if box_peak is None else f"{box_peak:.0f} MB (page cache included)"
        print(f"server boxed: memory limit {box.memory_mb or 'none'} MB, cores {box.cpus or 'all'}; the group's peak "
              f"memory {peak}; OOM kills: {oom_kills}")
    wrong = [f"training run {i + 1}: {state}" for i, state in enumerate(states) if state not in ("running", "finished")]
    wrong += ["the server was OOM-killed"] * bool(oom_kills)
    for line in wrong:
        print("  WRONG " + line)
    for count, result in results.items():
        report(result, count, rounds)
        wrong += result.wrong
    if wrong:
        sys.exit(1)


def report(result: Result, sessions: int, rounds: int) -> None:
    print(f"\n{sessions} session{'s' if sessions > 1 else ''} at once: correct answers {len(result.ok)} of "
          f"{2 * sessions * rounds} (generated text and attention labels, each session its own)")
    for line in result.wrong:
        print("  WRONG " + line)
    rows = [[label, len(values), f"{statistics.median(values):.2f}", f"{percentile(values, 90):.2f}", f"{max(values):.2f}"]
            for label, values in (("generate: click -> text complete", result.generate_s),
                                  ("attention: goto -> heatmap drawn", result.attention_goto_s),
                                  ("attention: text typed -> its heatmap drawn", result.attention_typed_s))
            if values]
    print_table(["latency (s)", "n", "median", "p90", "max"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=40)
    parser.add_argument("--training-runs", type=int, default=0, help="runs of the default preset training throughout")
    parser.add_argument("--memory-mb", type=int, default=None, help="hard memory limit of the server (MB, 10^6 bytes)")
    parser.add_argument("--cpus", default=None, help="cores the server may use, e.g. 0 (cpuset syntax)")
    args = parser.parse_args()
    asyncio.run(run(args.sessions, args.rounds, args.new_tokens, args.training_runs, Box(args.memory_mb, args.cpus)))


if __name__ == "__main__":
    main()
