"""A server killed outright (SIGKILL, as an OOM kill or a pulled plug would) and started again on
the same data folder, in a real browser: what the database kept comes back.

- A class and the run a learner posted to it: the board, opened by its code, shows the post with
  its curve; the learner's own address shows the run, finished; the teacher's browser, with its
  cookie, has the teacher's controls again.
- A run killed while it trained: its owner's address shows it interrupted, with Resume, and
  Resume trains it on to its last step.

Each test starts its own servers (bench.live_server's LiveServer) on a data folder of its own,
the restarted one on a new port. Every wait is for a condition: on the page, or (for what only the
database says, before a kill) on the database file. Screenshots land in the module's folder.

    pytest tests/cross/test_browser_restart.py
"""
from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import sqlite3
import time

import pytest

from app.state import classroom
from app.state.serving import DATABASE_FILE
from app.state.train_settings import to_param
from helpers.browser import (CHART, FRESH, PROJECTOR, LiveServer, drawn, main_button, new_context, screenshot_whole,
                             start_class, wait_rendered)
from minigpt import GPTConfig, TrainConfig

pytestmark = [pytest.mark.browser, pytest.mark.slow]
TRAINING_MS = 180_000  # how long a run may take to train on a busy machine: a bound, never waited out
LAPTOP = {"width": 1280, "height": 900}
GONE = "no longer on this server"
SHORT = to_param(GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32),
                 TrainConfig(max_steps=40, eval_interval=20, batch_size=4, block_size=16))
# long enough to be caught training (about 20 s here, alone): a tiny model finishes 400 steps in a second
LONG_STEPS = 400
LONG = to_param(GPTConfig(d_model=64, num_heads=2, num_layers=2, d_ff=256, max_len=64),
                TrainConfig(max_steps=LONG_STEPS, eval_interval=20, batch_size=16, block_size=64))

# the Train page's "Step (of N)" metric, as the script drew it last, as a number (null until drawn)
STEP_SHOWN = f"""() => {{
  const metric = [...document.querySelectorAll('{FRESH} [data-testid=stMetric]')]
    .find(m => (m.querySelector('[data-testid=stMetricLabel]')?.textContent || '').startsWith('Step'));
  const value = metric?.querySelector('[data-testid=stMetricValue]')?.textContent;
  return value ? parseInt(value.replace(/[^0-9]/g, ''), 10) : null; }}"""


def start_server(data, shots, name: str) -> LiveServer:
    """A server on the data folder `data` (a restart shares it), its log in the module's folder."""
    return LiveServer({"OMP_NUM_THREADS": "1", "MINIGPT_DATA_DIR": str(data)}, log=shots / f"{name}.log").__enter__()


def kill(server: LiveServer) -> None:
    """SIGKILL the server, as the kernel's OOM killer would: nothing of it runs on. Its children (the
    fork server, a run's process) see their pipe close and end by themselves; the test waits for that,
    and ends any that has not within the bound (they are the test's own)."""
    children = server.descendants()
    server.proc.send_signal(signal.SIGKILL)
    assert server.proc.wait(30) == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while children and time.monotonic() < deadline:
        children = [pid for pid in children if os.path.exists(f"/proc/{pid}") and not _zombie(pid)]
        if children:
            time.sleep(0.1)  # a poll of a condition (the processes have gone), with a bound
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def stop_cleanly(server: LiveServer, shots, name: str) -> None:
    code, _seconds = server.stop()
    assert code == 0, f"the restarted server exited with {code}; see {shots / (name + '.log')}"


def stored_state(data, run_id: str) -> tuple[str, int] | None:
    """The run's state and step as the database has them (what a restart reads back)."""
    with contextlib.closing(sqlite3.connect(data / DATABASE_FILE, timeout=10)) as db:
        row = db.execute("SELECT state, step FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return (row[0], row[1]) if row else None


def wait_stored(data, run_id: str, state: str) -> None:
    """Until the database holds the run in `state`. The page shows what the server holds in memory;
    the server writes a run's news to the database behind it (every second, at once when its state
    changes, on the line's own thread), so a page that says "finished" can be a moment ahead of the
    file. A kill in that moment would rightly bring the run back interrupted: the test kills after."""
    deadline = time.monotonic() + TRAINING_MS / 1000
    found = None
    while time.monotonic() < deadline:
        found = stored_state(data, run_id)
        if found is not None and found[0] == state:
            return
        time.sleep(0.1)  # a poll of a condition (the row says so), with a bound
    raise AssertionError(f"run {run_id} is {found} in the database, never {state!r}")


def learner_page(browser, url: str):
    page = new_context(browser, viewport=LAPTOP, locale="en-US").new_page()
    page.goto(url, wait_until="domcontentloaded")
    wait_rendered(page, "Train")
    return page


def state_shown(page, state: str, timeout: int = TRAINING_MS) -> None:
    """The Train page's State metric says `state` (as the script drew it last)."""
    page.locator(f"{FRESH} [data-testid=stMetric]").filter(has_text="State") \
        .get_by_test_id("stMetricValue").filter(has_text=re.compile(rf"^{state}$")).wait_for(timeout=timeout)


def run_of(url: str) -> tuple[str, str]:
    found = dict(re.findall(r"[?&](run|key)=([^&]+)", url))
    assert "run" in found and "key" in found, f"no ?run=&key= in the learner's address: {url}"
    return found["run"], found["key"]


def moved(url: str, old: LiveServer, new: LiveServer) -> str:
    assert url.startswith(old.url), url
    return new.url + url[len(old.url):]


def test_a_class_and_its_posted_run_outlive_a_sigkill(browser, shots, tmp_path):
    data = tmp_path / "data"
    first = start_server(data, shots, "streamlit-class-1")
    try:
        teacher_context, teacher, code = start_class(browser, first)
        cookie = classroom.COOKIE_PREFIX + code
        teacher.wait_for_function("(name) => document.cookie.includes(name + '=')", arg=cookie)

        learner = learner_page(browser, f"{first.url}/Train?class={code}&train={SHORT}")
        main_button(learner, "Start").click()
        box = learner.get_by_role("textbox", name="Name on the class board")
        box.wait_for()
        drawn(learner)
        box.fill("grace")
        box.press("Enter")
        drawn(learner)
        main_button(learner, "Post to the class board").click()
        learner.get_by_text(f"Your run is on the board of class {code} as grace").wait_for()
        state_shown(learner, "finished")
        learner.wait_for_function("() => /[?&]run=/.test(location.href) && /[?&]key=/.test(location.href)")
        address = learner.url
        run_id, _key = run_of(address)
        wait_stored(data, run_id, "finished")
        kill(first)
    finally:
        first.__exit__(None, None, None)  # a server a failure left running: stopped
    learner.context.close()

    second = start_server(data, shots, "streamlit-class-2")
    try:
        assert second.url != first.url  # a new port: the teacher's cookie must reach it all the same
        # (a) the class's link: the board, the post under its name on the chart
        board = new_context(browser, viewport=PROJECTOR, locale="en-US").new_page()
        board.goto(f"{second.url}/Board?class={code}", wait_until="domcontentloaded")
        wait_rendered(board, "Class board")
        board.get_by_role("heading", name=f"Class {code}").wait_for()
        board.locator(f"{CHART} .legendtext").filter(has_text="grace").wait_for()
        drawn(board)
        assert board.get_by_text("Results are not being saved right now", exact=False).count() == 0
        assert board.get_by_role("tab", name="Teacher's controls").count() == 0  # a learner's view
        screenshot_whole(board, shots / "restart_board_after_sigkill.png", PROJECTOR)
        board.context.close()

        # (b) the learner's own address: their run, finished
        learner = learner_page(browser, moved(address, first, second))
        learner.get_by_test_id("stMainBlockContainer").get_by_text(f"Run {run_id}", exact=True).wait_for()
        state_shown(learner, "finished")
        learner.locator(CHART).wait_for()
        drawn(learner)
        assert learner.evaluate(STEP_SHOWN) == 40
        assert learner.get_by_text(GONE, exact=False).count() == 0
        assert learner.get_by_text("You are watching run", exact=False).count() == 0  # theirs, not watched
        screenshot_whole(learner, shots / "restart_finished_run.png", LAPTOP)
        learner.context.close()

        # (c) the teacher's browser: its cookie (cookies belong to a host, whatever the port) hands the
        # key back, and with it the controls
        if not any(c["name"] == cookie for c in teacher_context.cookies(second.url)):
            teacher_context.add_cookies([{"name": c["name"], "value": c["value"], "url": second.url}
                                         for c in teacher_context.cookies(first.url) if c["name"] == cookie])
        teacher = teacher_context.new_page()
        teacher.goto(f"{second.url}/Board?class={code}", wait_until="domcontentloaded")
        wait_rendered(teacher, "Class board")
        teacher.locator(f"{CHART} .legendtext").filter(has_text="grace").wait_for()  # the Board tab, first
        drawn(teacher)
        teacher.get_by_role("tab", name="Teacher's controls").click()
        main_button(teacher, "Close the class").wait_for()
        teacher_context.close()
    finally:
        stop_cleanly(second, shots, "streamlit-class-2")


def test_a_run_killed_mid_training_comes_back_interrupted_and_resumes(browser, shots, tmp_path):
    data = tmp_path / "data"
    # past the first evaluations (their checkpoints written), at a moment of chance: perhaps mid-save
    kill_at = 60 + random.randint(0, 40)
    print(f"killed once the page shows step {kill_at} or more")
    first = start_server(data, shots, "streamlit-run-1")
    try:
        learner = learner_page(browser, f"{first.url}/Train?train={LONG}")
        main_button(learner, "Start").click()
        learner.wait_for_function(f"(n) => ({STEP_SHOWN})() >= n", arg=kill_at, timeout=TRAINING_MS)
        address = learner.url
        run_id, _key = run_of(address)
        shown = learner.evaluate(STEP_SHOWN)
        kill(first)
    finally:
        first.__exit__(None, None, None)
    learner.context.close()
    found = stored_state(data, run_id)
    assert found is not None and found[0] == "running", f"the database has run {run_id} as {found}"

    second = start_server(data, shots, "streamlit-run-2")
    try:
        learner = learner_page(browser, moved(address, first, second))
        learner.get_by_test_id("stMainBlockContainer").get_by_text(f"Run {run_id}", exact=True).wait_for()
        warning = learner.get_by_test_id("stAlertContentWarning").filter(has_text="Interrupted at step")
        warning.wait_for()
        state_shown(learner, "interrupted")
        resume = main_button(learner, "Resume")
        assert resume.is_enabled()
        assert learner.get_by_text(GONE, exact=False).count() == 0
        drawn(learner)
        said = warning.inner_text()
        at, since = re.search(r"Interrupted at step ([\d,]+)", said), re.search(r"from step ([\d,]+)", said)
        assert since, f"the run had checkpoints (one at every evaluation), yet: {said!r}"
        stopped, checkpoint = int(at.group(1).replace(",", "")), int(since.group(1).replace(",", ""))
        print(f"page showed step {shown} at the kill; interrupted at {stopped}, resumes from {checkpoint}")
        # the checkpoints of the evaluations at steps 20 and 40 were written long before the page showed 60;
        # the step and the checkpoint the database has can each be ahead of what the page last drew
        assert checkpoint >= 20 and checkpoint % 20 == 0, said
        screenshot_whole(learner, shots / "restart_interrupted_run.png", LAPTOP)

        resume.click()
        state_shown(learner, "finished")
        drawn(learner)
        assert learner.evaluate(STEP_SHOWN) == LONG_STEPS
        # the train loss, logged every 10 steps: once each, in order, and every step trained after the
        # checkpoint. Steps just before it can be missing: the server writes a run's checkpoint as it gets
        # it, the steps logged up to it up to a second later, and a kill in between loses those.
        steps = learner.evaluate(f"() => [...document.querySelector('{CHART}').data[0].x]")
        print(f"train loss logged at {steps}; missing: {sorted(set(range(0, LONG_STEPS + 1, 10)) - set(steps))}")
        assert steps == sorted(set(steps)) and steps[0] == 0, f"the resumed history: {steps}"
        # it resumed from the checkpoint on disk: the one the page named, or (killed between writing the
        # next one's files and its row) the next evaluation's
        assert [x for x in steps if x > checkpoint + 20] == list(range(checkpoint + 30, LONG_STEPS + 1, 10)), steps
        assert learner.get_by_text("Interrupted at step", exact=False).count() == 0
        screenshot_whole(learner, shots / "restart_resumed_run.png", LAPTOP)
        learner.context.close()
    finally:
        stop_cleanly(second, shots, "streamlit-run-2")


def test_a_sigterm_while_a_run_waits_in_line_exits_in_order_and_leaves_the_run_in_line(browser, shots, tmp_path):
    # a server stopped in order (SIGTERM, as a host's restart sends) while one run trains and another waits:
    # the slot the stopped run frees is no one's, so the waiting run is not started into the exit, where it
    # trained or forked while the interpreter tore itself down and printed a traceback in the log
    data, log = tmp_path / "data", shots / "streamlit-sigterm.log"
    server = LiveServer({"OMP_NUM_THREADS": "1", "MINIGPT_DATA_DIR": str(data), "MINIGPT_MAX_RUNS": "1"},
                        log=log).__enter__()
    try:
        first = learner_page(browser, f"{server.url}/Train?train={LONG}")
        main_button(first, "Start").click()
        first.wait_for_function(f"(n) => ({STEP_SHOWN})() >= n", arg=1, timeout=TRAINING_MS)
        second = learner_page(browser, f"{server.url}/Train?train={LONG}")
        main_button(second, "Start").click()
        second.get_by_test_id("stMainBlockContainer").get_by_text("1st in line", exact=False).wait_for(
            timeout=TRAINING_MS)
        waiting, _key = run_of(second.url)
        wait_stored(data, waiting, "waiting")
    finally:
        code, _seconds = server.stop()
    said = log.read_text()
    assert code == 0, f"the server exited with {code}; see {log}"
    assert "Traceback" not in said and "terminate called" not in said, said[-4000:]
    assert stored_state(data, waiting) == ("waiting", 0)  # its place waits for the next server
    first.context.close()
    second.context.close()
