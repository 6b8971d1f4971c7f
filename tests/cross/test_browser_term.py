"""A class that lasts the term, in a real browser: a learner comes back to the class, and carries
themselves to another device with their personal code.

- After a server killed outright and started again on the same data folder, the learner's browser
  opens the class's link and is the same learner: their run is listed under "Your runs in this
  class" and opens on Train as theirs, with its post; their answer is on the Lesson.
- The personal code the board shows the learner (in an expander, never on the teacher's screen)
  moves them to a second browser: a wrong code is said and changes nothing, the right one brings
  their runs and answer, and the browser keeps who it is now. A third browser that guesses is
  refused once it has typed PERSONAL_CODE_TRIES wrong codes.

The ten days a class outlives are tested on the library's clock (tests/minigpt/serve). Every wait
is for a condition on the page (or, before a kill, on the database file), never a pause.
Screenshots land in the module's folder.

    pytest tests/cross/test_browser_term.py
"""
from __future__ import annotations

import contextlib
import re
import sqlite3

import pytest

from app.state.serving import DATABASE_FILE
from cross.test_browser_class_identity import (ALL_TEXT, LAPTOP, RIGHT, SHORT, WRONG, checked, choose, lead, on_lesson,
                                               post, token)
from cross.test_browser_restart import kill, run_of, start_server, state_shown, stop_cleanly, wait_stored
from helpers.browser import CHART, main_button, new_context, screenshot_whole, start_class, wait_rendered
from helpers.waiting import wait_until
from minigpt.serve import PERSONAL_CODE_TRIES

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PHONE = {"width": 390, "height": 844}
GROUPED = re.compile(r"[A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{4}")  # a personal code as the page shows it
EXPANDER = "Use this class on another device"


def learner_in(browser, viewport=LAPTOP):
    context = new_context(browser, viewport=viewport, locale="en-US")
    return context, context.new_page()


def on_board(page, url: str) -> None:
    page.goto(url, wait_until="domcontentloaded")
    wait_rendered(page, "Class board")


def train_and_post(context, server, code: str, name: str) -> str:
    """On a new tab of the learner's browser: train a short run in the class, post it; its id."""
    train = context.new_page()
    train.goto(f"{server.url}/Train?class={code}&train={SHORT}", wait_until="domcontentloaded")
    wait_rendered(train, "Train")
    post(train, name)
    state_shown(train, "finished")
    train.wait_for_function("() => /[?&]run=/.test(location.href) && /[?&]key=/.test(location.href)")
    run_id, _key = run_of(train.url)
    train.close()
    return run_id


def stored(data, sql: str, *args) -> int:
    with contextlib.closing(sqlite3.connect(data / DATABASE_FILE, timeout=10)) as db:
        return db.execute(sql, args).fetchone()[0]


def shown_code(page) -> str:
    """The personal code the learner's board shows, once its expander is open."""
    page.get_by_text(EXPANDER).click()
    block = page.get_by_test_id("stCode").filter(has_text=GROUPED)
    block.wait_for()
    return block.inner_text().strip()


def type_code(page, typed: str, said: str):
    """Type a personal code into the board's box, press "Use this code": what the page says, once said."""
    box = page.get_by_role("textbox", name="A personal code from your other device")
    box.fill(typed)
    main_button(page, "Use this code").click()
    answer = page.get_by_test_id("stMainBlockContainer").get_by_text(said, exact=False)
    answer.wait_for()
    return answer


def test_after_a_restart_the_same_browser_is_the_same_learner_with_their_run_post_and_answer(browser, shots, tmp_path):
    data = tmp_path / "data"
    first = start_server(data, shots, "term_before_kill")
    try:
        teacher_context, teacher, code = start_class(browser, first)
        lead(teacher)
        context, page = learner_in(browser)
        on_lesson(page, f"{first.url}/Lesson?class={code}")
        choose(page, WRONG)
        mine = token(context, code)
        run_id = train_and_post(context, first, code, "ada")
        wait_stored(data, run_id, "finished")  # the page can be a moment ahead of the file: kill after
        wait_until(lambda: (stored(data, "SELECT COUNT(*) FROM learner_runs WHERE run_id = ?", run_id),
                            stored(data, "SELECT COUNT(*) FROM posts WHERE run_id = ?", run_id),
                            stored(data, "SELECT COUNT(*) FROM lesson_answers WHERE code = ?", code)) == (1, 1, 1),
                   "the database to hold the learner's run, post and answer")
    finally:
        kill(first)

    second = start_server(data, shots, "term_after_kill")
    try:
        if not any(c["name"].endswith(code) for c in context.cookies(second.url)):  # a host's cookies, any port
            context.add_cookies([{"name": c["name"], "value": c["value"], "url": second.url}
                                 for c in context.cookies(first.url)])
        board = context.new_page()
        on_board(board, f"{second.url}/Board?class={code}")
        board.get_by_text("Your runs in this class:").wait_for()
        board.locator(f"{CHART} .legendtext").filter(has_text="ada").wait_for()  # the post, on the board
        assert token(context, code) == mine  # the cookie was kept, not written anew
        assert shown_code(board).replace("-", "") == mine
        screenshot_whole(board, shots / "term_board_after_kill.png", LAPTOP)
        main_button(board, "Open on Train").click()  # their run, opened as its owner
        wait_rendered(board, "Train")
        board.get_by_test_id("stMainBlockContainer").get_by_text(f"Run {run_id}", exact=True).wait_for()
        state_shown(board, "finished")
        board.get_by_text(f"Your run is on the board of class {code} as ada.").wait_for()
        assert re.search(rf"[?&]run={run_id}(&|$)", board.url) and "key=" in board.url
        on_lesson(page, f"{second.url}/Lesson?class={code}")
        assert checked(page) == WRONG  # their answer
        for closing in (context, teacher_context):
            closing.close()
    finally:
        stop_cleanly(second, shots, "term_after_kill")


def test_a_personal_code_moves_a_learner_to_a_second_browser_and_guessing_is_refused(browser, server, shots):
    teacher_context, teacher, code = start_class(browser, server)
    lead(teacher)
    laptop_context, laptop = learner_in(browser)
    on_lesson(laptop, f"{server.url}/Lesson?class={code}")
    choose(laptop, RIGHT)
    run_id = train_and_post(laptop_context, server, code, "grace")
    mine = token(laptop_context, code)
    on_board(laptop, f"{server.url}/Board?class={code}")
    shown = shown_code(laptop)
    assert shown.replace("-", "") == mine
    assert not GROUPED.search(teacher.evaluate(ALL_TEXT)), "a personal code on the teacher's screen"

    phone_context, phone = learner_in(browser, PHONE)
    on_board(phone, f"{server.url}/Board?class={code}")
    assert phone.get_by_text("Your runs in this class:").count() == 0  # nobody yet: a new learner
    shown_code(phone)  # its own code, in the expander that holds the box
    wrong = type_code(phone, "ZZZZ-ZZZZ-ZZZZ", f"No learner of class {code} has that personal code.")
    assert "Check it and type it again" in wrong.inner_text()
    assert token(phone_context, code) != mine  # still who it was
    type_code(phone, " ".join(shown.lower().split("-")), f"This browser is you in class {code} now")
    phone.get_by_text("Your runs in this class:").wait_for()
    phone.get_by_text(run_id).first.wait_for()
    phone.wait_for_function("([name, value]) => document.cookie.split('; ').includes(name + '=' + value)",
                            arg=[f"minigpt_learner_{code}", mine])  # the browser keeps who it is now
    screenshot_whole(phone, shots / "term_phone_after_code.png", PHONE)
    on_lesson(phone, f"{server.url}/Lesson?class={code}")
    assert checked(phone) == RIGHT  # their answer came with them

    guesser_context, guesser = learner_in(browser, PHONE)
    on_board(guesser, f"{server.url}/Board?class={code}")
    shown_code(guesser)
    for n in range(1, PERSONAL_CODE_TRIES + 1):  # each try's own sentence: the count of wrong codes
        type_code(guesser, f"ZZZZ-ZZZZ-ZZZ{n}", f"This browser has typed {n} wrong code")
        assert guesser.get_by_text(f"No learner of class {code} has that personal code.").count() == 1
    type_code(guesser, shown, "Too many wrong codes: try again in")  # even the right code, now
    screenshot_whole(guesser, shots / "term_guessing_refused.png", PHONE)
    assert token(guesser_context, code) != mine
    for context in (teacher_context, laptop_context, phone_context, guesser_context):
        context.close()
