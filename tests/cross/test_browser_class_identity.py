"""One learner is one learner, in a real browser: their browser's cookie for the class is who they
are, across F5, a second tab and a server killed outright; the counts the teacher reveals are the
class's answer; an open board learns that the lesson has started.

- F5 and a second tab: the radio shows the counted answer, a change replaces it (the teacher still
  reads one learner), and after F5 the limit on posts still refuses a fourth run. The token is
  never drawn and never in the address.
- SIGKILL: a new server on the same data folder has the same learners with the same answers and
  counts, and a revealed step's counts still do not move.
- After the reveal, a learner's change is a try for themselves, said so, and the teacher's counts
  stay; "Hide the answer and reopen the question" lets it count again.
- An open board shows "the class is on step N" once the teacher leads, without a reload, and a
  learner who follows is taken to the step.

Every wait is for a condition on the page (or, before a kill, on the database file), never a
pause. Screenshots land in the module's folder.

    pytest tests/cross/test_browser_class_identity.py
"""
from __future__ import annotations

import contextlib
import re
import sqlite3

import pytest

from app.state import classroom
from app.state.serving import DATABASE_FILE
from app.state.lesson_file import builtin_lesson
from app.state.train_settings import to_param
from cross.test_browser_restart import kill, start_server, stop_cleanly
from helpers.browser import (PROJECTOR, drawn, main_button, new_context, post_as, screenshot_whole, start_class,
                             wait_rendered)
from helpers.waiting import wait_until
from minigpt import GPTConfig, TrainConfig

pytestmark = [pytest.mark.browser, pytest.mark.slow]
LAPTOP = {"width": 1280, "height": 900}
SHORT = to_param(GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32),
                 TrainConfig(max_steps=40, eval_interval=20, batch_size=4, block_size=16))
STEPS = builtin_lesson("en").steps
STEP = STEPS[0]
RIGHT, WRONG = STEP.answer, (STEP.answer + 1) % len(STEP.options)
ALL_TEXT = """() => { const texts = [document.body.innerText];
  for (const el of document.querySelectorAll('input, textarea')) texts.push(el.value || '');
  for (const el of document.querySelectorAll('[title], [aria-label], a[href]'))
    texts.push(el.title + ' ' + el.getAttribute('aria-label') + ' ' + (el.getAttribute('href') || ''));
  return texts.join('\\n'); }"""  # everything the page draws, links to, or could show on hover
# the teacher's bars for the step's options, as numbers: "A. … — 2"
BARS = """() => [...document.querySelectorAll('[data-testid=stProgress]')]
  .map(bar => parseInt(bar.innerText.trim().split('— ').pop(), 10))"""


def lead(teacher) -> None:
    teacher.get_by_role("tab", name="Lead the lesson").click()
    main_button(teacher, "Lead the lesson from step 1").click()
    teacher.get_by_text(f"The class is on step 1 of {len(STEPS)}:").wait_for()


def on_lesson(page, url: str, n: int = 1) -> None:
    """Open (or reopen) the Lesson at `url` and wait until it shows step n, drawn."""
    page.goto(url, wait_until="domcontentloaded")
    wait_rendered(page, "Lesson")
    page.get_by_role("heading", name=re.compile(rf"^{n}\. ")).wait_for()
    drawn(page)


def learner(browser, server, code: str):
    """A learner on a laptop of their own, on the class's Lesson: their context and page."""
    context = new_context(browser, viewport=LAPTOP, locale="en-US")
    page = context.new_page()
    on_lesson(page, f"{server.url}/Lesson?class={code}")
    return context, page


def choose(page, option: int, said: str = "Your answer counts for the class") -> None:
    page.locator(".st-key-lesson_answer-1").get_by_test_id("stRadioOption").nth(option).click()
    page.get_by_text(said, exact=False).wait_for()
    drawn(page)


def checked(page) -> int | None:
    """The option the step's radio shows chosen, once the page has drawn it."""
    marks = page.evaluate("() => [...document.querySelectorAll('.st-key-lesson_answer-1 input[type=radio]')]"
                          ".map(input => input.checked)")
    return marks.index(True) if True in marks else None


def token(context, code: str) -> str:
    """The learner's token for the class, as their browser keeps it."""
    name = classroom.LEARNER_PREFIX + code
    found = [c for c in context.cookies() if c["name"] == name]
    assert found, f"no {name} cookie: {[c['name'] for c in context.cookies()]}"
    assert found[0]["sameSite"] == "Strict"
    return found[0]["value"]


def wait_counts(teacher, counts: list[int], learners: int) -> None:
    """The teacher's bars and caption say these counts (they redraw by themselves)."""
    teacher.wait_for_function(f"(counts) => JSON.stringify(({BARS})()) === JSON.stringify(counts)", arg=counts)
    teacher.get_by_text(f"{learners} learner{'s' if learners != 1 else ''} {'have' if learners != 1 else 'has'} "
                        "answered.").wait_for()


def counts(*chosen: int) -> list[int]:
    return [chosen.count(option) for option in range(len(STEP.options))]


def test_f5_and_a_second_tab_are_the_same_learner_and_the_post_limit_holds(browser, server, shots):
    teacher_context, teacher, code = start_class(browser, server)
    lead(teacher)
    context, page = learner(browser, server, code)
    choose(page, WRONG)
    mine = token(context, code)
    wait_counts(teacher, counts(WRONG), 1)

    page.reload(wait_until="domcontentloaded")  # F5
    wait_rendered(page, "Lesson")
    drawn(page)
    assert checked(page) == WRONG  # the radio remembers the counted choice
    page.get_by_text("Your answer counts for the class", exact=False).wait_for()
    tab = context.new_page()  # a second tab of the same browser
    on_lesson(tab, f"{server.url}/Lesson?class={code}")
    assert checked(tab) == WRONG
    choose(tab, RIGHT)  # a change of mind, from the second tab: it replaces the answer
    wait_counts(teacher, counts(RIGHT), 1)  # one learner, however often they reload
    assert token(context, code) == mine
    for shown in (page, tab):
        assert mine not in shown.evaluate(ALL_TEXT) and mine not in shown.url, "the learner's token is drawn"

    # the limit on posts (3 a learner) outlives F5: posts keyed by the same browser
    train = context.new_page()
    train.goto(f"{server.url}/Train?class={code}&train={SHORT}", wait_until="domcontentloaded")
    wait_rendered(train, "Train")
    for n in range(1, 4):
        post(train, f"run {n}")
    train.reload(wait_until="domcontentloaded")
    wait_rendered(train, "Train")
    refused = post(train, "run 4", refused=True)
    assert "You have posted 3 runs to this board" in refused
    screenshot_whole(train, shots / "post_limit_after_f5.png", LAPTOP)
    for ctx in (context, teacher_context):
        ctx.close()


def post(page, name: str, refused: bool = False) -> str:
    """Start a new run on Train and post it under `name`: what the page said."""
    page.get_by_test_id("stMainBlockContainer").get_by_role("button", name=re.compile("^Start")).click()
    post_as(page, name)
    said = (page.get_by_test_id("stAlertContentError").filter(has_text="You have posted") if refused
            else page.get_by_text(f"as {name}.", exact=False))
    said.first.wait_for()
    return said.first.inner_text()


def answers_stored(data, code: str) -> int:
    with contextlib.closing(sqlite3.connect(data / DATABASE_FILE, timeout=10)) as db:
        return db.execute("SELECT COUNT(*) FROM lesson_answers WHERE code = ?", (code,)).fetchone()[0]


def revealed_stored(data, code: str) -> list:
    with contextlib.closing(sqlite3.connect(data / DATABASE_FILE, timeout=10)) as db:
        row = db.execute("SELECT revealed FROM classes WHERE code = ?", (code,)).fetchone()
    return row[0] if row else None


def wait_stored(what, expected) -> None:
    """Until the database file holds what the page already shows (the store writes behind)."""
    wait_until(lambda: what() == expected, f"the database to hold {expected!r}")


def test_a_sigkill_restart_keeps_the_learners_their_answers_and_the_revealed_counts(browser, shots, tmp_path):
    data = tmp_path / "data"
    first = start_server(data, shots, "identity_before_kill")
    try:
        teacher_context, teacher, code = start_class(browser, first)
        lead(teacher)
        (ann_context, ann), (bo_context, bo) = learner(browser, first, code), learner(browser, first, code)
        choose(ann, WRONG)
        choose(bo, RIGHT)
        wait_counts(teacher, counts(WRONG, RIGHT), 2)
        main_button(teacher, "Reveal the answer").click()
        ann.get_by_test_id("stAlertContentError").filter(has_text="Not quite: the right answer is").wait_for()
        choose(ann, RIGHT, said="This try is not counted")  # after the reveal: for herself
        wait_stored(lambda: (answers_stored(data, code), revealed_stored(data, code)), (2, "[1]"))
    finally:
        kill(first)

    second = start_server(data, shots, "identity_after_kill")
    try:
        teacher.goto(f"{second.url}/Board?class={code}", wait_until="domcontentloaded")  # its cookie: the key
        wait_rendered(teacher, "Class board")
        teacher.get_by_role("tab", name="Lead the lesson").click()
        wait_counts(teacher, counts(WRONG, RIGHT), 2)  # the same two learners, the same counts
        for page, counted in ((ann, WRONG), (bo, RIGHT)):
            on_lesson(page, f"{second.url}/Lesson?class={code}")
            assert checked(page) == counted  # each the same learner, with their counted answer
        choose(bo, WRONG, said="This try is not counted")  # still revealed, still frozen
        teacher.reload(wait_until="domcontentloaded")  # drawn after bo's try
        wait_rendered(teacher, "Class board")
        teacher.get_by_role("tab", name="Lead the lesson").click()
        wait_counts(teacher, counts(WRONG, RIGHT), 2)
        screenshot_whole(teacher, shots / "identity_counts_after_kill.png", PROJECTOR)
        for context in (teacher_context, ann_context, bo_context):
            context.close()
    finally:
        stop_cleanly(second, shots, "identity_after_kill")


def test_a_change_after_the_reveal_is_a_try_and_reopening_counts_it(browser, server, shots):
    teacher_context, teacher, code = start_class(browser, server)
    lead(teacher)
    (ann_context, ann), (bo_context, bo) = learner(browser, server, code), learner(browser, server, code)
    choose(ann, WRONG)
    choose(bo, RIGHT)
    wait_counts(teacher, counts(WRONG, RIGHT), 2)
    main_button(teacher, "Reveal the answer").click()
    teacher.get_by_text("a learner who changes theirs now is not counted", exact=False).wait_for()
    ann.get_by_test_id("stAlertContentError").filter(has_text="Not quite: the right answer is").wait_for()
    choose(ann, RIGHT, said="This try is not counted")
    ann.get_by_test_id("stAlertContentSuccess").wait_for()  # right, for herself
    screenshot_whole(ann, shots / "try_after_reveal.png", LAPTOP)
    teacher.reload(wait_until="domcontentloaded")  # drawn after ann's try reached the server
    wait_rendered(teacher, "Class board")
    teacher.get_by_role("tab", name="Lead the lesson").click()
    wait_counts(teacher, counts(WRONG, RIGHT), 2)  # the revealed tally has not moved

    main_button(teacher, "Hide the answer and reopen the question").click()
    main_button(teacher, "Reveal the answer").wait_for()
    ann.get_by_text("Your answer counts for the class", exact=False).wait_for()  # reopened, by itself
    assert checked(ann) == WRONG  # the radio shows what counts again
    choose(ann, RIGHT)
    wait_counts(teacher, counts(RIGHT, RIGHT), 2)
    for context in (teacher_context, ann_context, bo_context):
        context.close()


def test_an_open_board_shows_the_lesson_once_the_teacher_leads_and_a_follower_goes_there(browser, server, shots):
    teacher_context, teacher, code = start_class(browser, server)
    boards = []
    for _n in range(2):
        context = new_context(browser, viewport=LAPTOP, locale="en-US")
        page = context.new_page()
        page.goto(f"{server.url}/Board?class={code}", wait_until="domcontentloaded")
        wait_rendered(page, "Class board")
        boards.append((context, page))
    (follower_context, follower), (alone_context, alone) = boards
    lead(teacher)
    # a learner who follows: taken from the open board to the Lesson, at the class's step
    follower.get_by_role("heading", name=re.compile(r"^1\. ")).wait_for()
    assert "/Lesson" in follower.url and "lesson=1" in follower.url
    # one who stops following stays on the board; the open board's line says where the class is
    alone.get_by_role("heading", name=re.compile(r"^1\. ")).wait_for()
    drawn(alone)
    alone.get_by_text("Follow the teacher").click()
    alone.get_by_text("switch on “Follow the teacher” to go there", exact=False).wait_for()
    alone.get_by_test_id("stSidebar").get_by_role("link", name="Class board").click()  # the same session
    wait_rendered(alone, "Class board")
    alone.get_by_role("link", name=re.compile("The class is on step 1 of the lesson")).wait_for()
    main_button(teacher, "Next →").click()
    teacher.get_by_text(f"The class is on step 2 of {len(STEPS)}:").wait_for()
    alone.get_by_role("link", name=re.compile("The class is on step 2 of the lesson")).wait_for()  # no reload
    follower.get_by_role("heading", name=re.compile(r"^2\. ")).wait_for()
    assert "/Board" in alone.url
    screenshot_whole(alone, shots / "board_lesson_line.png", LAPTOP)
    for context in (teacher_context, follower_context, alone_context):
        context.close()
