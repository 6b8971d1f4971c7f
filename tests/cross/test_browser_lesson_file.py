"""A teacher's own lesson, in real browsers: the teacher on a projector loads a lesson file of two
steps and one question into the class on the board (a wrong file first, refused with its line, the
class keeping its lesson), leads it, and a learner on a laptop follows it without a click, answers,
and learns whether they were right once the teacher reveals the answer.

Every wait is for a condition on the page, never a pause.

    pytest tests/cross/test_browser_lesson_file.py
"""
from __future__ import annotations

import re

import pytest

from app.parts.class_lesson import LESSON_UPLOAD
from helpers.browser import PROJECTOR, drawn, main_button, new_context, screenshot_whole, start_class, wait_rendered
from helpers.lessons import POEMS

pytestmark = pytest.mark.browser
LAPTOP = {"width": 1280, "height": 900}


def upload(page, name: str, text: str) -> None:
    """Drop a file on the board's lesson uploader, as a teacher picks one from their disk."""
    page.locator(f".st-key-uploader_{LESSON_UPLOAD} input[type=file]").set_input_files(
        files=[{"name": name, "mimeType": "text/markdown", "buffer": text.encode("utf-8")}])


def heading(page, text: str) -> None:
    page.get_by_role("heading", name=text, level=2).wait_for()


def test_a_teacher_loads_a_two_step_lesson_file_and_a_learner_follows_answers_and_sees_the_reveal(browser, server,
                                                                                                   shots):
    teacher_context, teacher, code = start_class(browser, server)
    teacher.get_by_role("tab", name="Lead the lesson").click()
    teacher.get_by_text("The class follows the built-in lesson (15 steps)", exact=False).wait_for()

    upload(teacher, "broken.md", POEMS.replace("view: sampling", "view: sampler"))
    teacher.get_by_text("Line 12: “sampler” is not a view of the lesson", exact=False).wait_for()
    teacher.get_by_text("The class follows the built-in lesson (15 steps)", exact=False).wait_for()  # kept

    upload(teacher, "poems.md", POEMS)
    teacher.get_by_text("The class follows poems.md (2 steps), which you loaded.", exact=False).wait_for()
    main_button(teacher, "Lead the lesson from step 1").click()
    teacher.get_by_text("The class is on step 1 of 2:").wait_for()

    learner_context = new_context(browser, viewport=LAPTOP, locale="en-US")
    learner = learner_context.new_page()
    learner.goto(f"{server.url}/Lesson?class={code}", wait_until="domcontentloaded")
    wait_rendered(learner, "Lesson")
    heading(learner, "1. What comes next in a poem")
    learner.get_by_text(re.compile(r"Yours knows \d+ characters\.")).wait_for()  # its own model's number

    main_button(teacher, "Next →").click()
    teacher.get_by_text("The class is on step 2 of 2:").wait_for()
    heading(learner, "2. Sampling a poem")  # the follower's page went there by itself
    learner.locator(".st-key-lesson_answer-2").get_by_test_id("stRadioOption").nth(1).click()
    learner.get_by_text("Your answer counts for the class", exact=False).wait_for()

    teacher.get_by_text("1 learner has answered.").wait_for()  # the counts redraw by themselves
    main_button(teacher, "Reveal the answer").click()
    verdict = learner.get_by_test_id("stAlertContentSuccess")
    verdict.wait_for()  # the reveal reaches the learner by itself
    assert verdict.inner_text().startswith("Right. A larger T shrinks the gaps between the scores.")
    drawn(learner)
    screenshot_whole(teacher, shots / "teacher_lesson_file_projector.png", PROJECTOR)
    screenshot_whole(learner, shots / "learner_lesson_file_laptop.png", LAPTOP)
    for context in (teacher_context, learner_context):
        context.close()
