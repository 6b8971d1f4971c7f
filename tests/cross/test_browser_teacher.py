"""The lesson from the teacher's desk, in a real browser: a teacher on a 1920×1080 projector, a
learner on a 390 px phone in Chinese and one on a laptop in English.

- The teacher's key is drawn nowhere on the teacher's page; the copy button puts the teacher's
  link on the clipboard, and where copying is blocked the link shows only while it is held; a
  refresh (F5 at the projector) keeps the controls; the chart starts on the projector's screen.
- The teacher leads three steps of the Lesson and both learners follow without a click; they
  answer a question, the teacher sees the counts, reveals, and each learner learns whether they
  were right. The Chinese learner's pages show no English.

Every wait is for a condition on the page, never a pause. Screenshots land in the module's folder.

    pytest tests/cross/test_browser_teacher.py
"""
from __future__ import annotations

import re

import pytest

from app.state import classroom
from app.state.lesson_file import builtin_lesson
from app.state.train_settings import to_param
from helpers.browser import (CHART, PROJECTOR, VISIBLE_TEXT, drawn, main_button, new_context, post_as,
                             screenshot_whole, start_class, wait_rendered)
from helpers.language import GLOSSED, english_words
from minigpt import GPTConfig, TrainConfig

pytestmark = pytest.mark.browser
STEPS = builtin_lesson("en").steps  # the built-in lesson, as the app reads it
PHONE = {"width": 390, "height": 844}
TRAINING_MS = 180_000
ALL_TEXT = """() => { const texts = [document.body.innerText];
  for (const el of document.querySelectorAll('input, textarea')) texts.push(el.value || '');
  for (const el of document.querySelectorAll('[title], [aria-label]')) texts.push(el.title + ' ' + el.getAttribute('aria-label'));
  return texts.join('\\n'); }"""  # everything the page draws or could show on hover


def cookie_key(context, code: str) -> str:
    """The teacher's key as the browser keeps it (its cookie for the class)."""
    wanted = classroom.COOKIE_PREFIX + code
    found = [c["value"] for c in context.cookies() if c["name"] == wanted]
    assert found, f"no {wanted} cookie: {[c['name'] for c in context.cookies()]}"
    return found[0]


def no_key_drawn(page, key: str) -> None:
    shown = page.evaluate(ALL_TEXT)
    assert key not in shown, "the teacher's key is drawn on the page"
    assert key not in page.url


def tab(page, name: str):
    page.get_by_role("tab", name=name).click()


def test_the_projected_board_draws_no_key_keeps_the_controls_on_refresh_and_copies_the_link(browser, server, shots):
    context, page, code = start_class(browser, server)
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.wait_for_function("(name) => document.cookie.includes(name + '=')", arg=classroom.COOKIE_PREFIX + code)
    key = cookie_key(context, code)
    no_key_drawn(page, key)
    tab(page, "Teacher's controls")
    page.get_by_role("button", name="Copy the teacher's link").click()
    page.get_by_text("Copied: paste it where only you will see it.").wait_for()
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert copied.endswith(f"/Board?class={code}&teacher={key}"), copied
    no_key_drawn(page, key)
    screenshot_whole(page, shots / "teacher_controls_projector.png", PROJECTOR)

    page.reload(wait_until="domcontentloaded")  # F5 at the projector
    wait_rendered(page, "Class board")
    page.get_by_role("tab", name="Teacher's controls").wait_for()
    tab(page, "Teacher's controls")
    main_button(page, "Close the class").wait_for()
    no_key_drawn(page, key)

    # a second browser with the copied link gets the controls, and the key leaves its address at once
    laptop = new_context(browser, viewport={"width": 1280, "height": 800}).new_page()
    laptop.goto(copied, wait_until="domcontentloaded")
    wait_rendered(laptop, "Class board")
    laptop.get_by_role("tab", name="Teacher's controls").wait_for()
    laptop.wait_for_function("(key) => !location.href.includes(key)", arg=key)
    laptop.context.close()

    # a browser with no clipboard (plain http): the link shows only while the button is held
    context.add_init_script("Object.defineProperty(window, 'isSecureContext', {get: () => false});"
                            "document.execCommand = () => false;")
    page.reload(wait_until="domcontentloaded")
    wait_rendered(page, "Class board")
    tab(page, "Teacher's controls")
    button = page.get_by_role("button", name="Copy the teacher's link")
    button.click()
    held = page.get_by_role("button", name="Hold to show the teacher's link")
    held.wait_for()
    no_key_drawn(page, key)
    held.hover()
    page.mouse.down()
    page.wait_for_function("(key) => document.body.innerText.includes(key)", arg=key)
    page.mouse.up()
    page.wait_for_function("(key) => !document.body.innerText.includes(key)", arg=key)
    context.close()


def train_and_post(browser, server, code: str, name: str):
    """A learner on a laptop trains a short run from the class's link and posts it."""
    settings = to_param(GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32),
                        TrainConfig(max_steps=40, eval_interval=20, batch_size=4, block_size=16))
    context = new_context(browser, viewport={"width": 1280, "height": 900}, locale="en-US")
    page = context.new_page()
    page.goto(f"{server.url}/Train?class={code}&train={settings}", wait_until="domcontentloaded")
    wait_rendered(page, "Train")
    main_button(page, "Start").click()
    post_as(page, name)
    page.get_by_text(f"Your run is on the board of class {code} as {name}").wait_for()
    page.get_by_test_id("stMetricValue").filter(has_text="finished").wait_for(timeout=TRAINING_MS)
    return context, page


def header_step(page, n: int) -> None:
    """Wait until the Lesson page shows step n (its header), drawn by the page itself."""
    page.get_by_role("heading", name=re.compile(rf"^{n}\. ")).wait_for()


def test_the_class_follows_the_teacher_through_three_steps_answers_and_sees_the_reveal(browser, server, shots):
    teacher_context, teacher, code = start_class(browser, server)
    laptop_context, laptop = train_and_post(browser, server, code, "ada")
    teacher.locator(f"{CHART} .legendtext").filter(has_text="ada").wait_for(timeout=TRAINING_MS)
    top = teacher.evaluate(f"() => document.querySelector('{CHART}').getBoundingClientRect().top")
    assert top < PROJECTOR["height"] / 2, f"the board's chart starts {top:.0f} px down the projector's screen"
    screenshot_whole(teacher, shots / "teacher_board_projector.png", PROJECTOR)

    tab(teacher, "Lead the lesson")
    main_button(teacher, "Lead the lesson from step 1").click()
    teacher.get_by_text("The class is on step 1 of 15:").wait_for()

    phone_context = new_context(browser, viewport=PHONE, locale="zh-CN", is_mobile=True, has_touch=True)
    phone = phone_context.new_page()
    phone.goto(f"{server.url}/Board?class={code}", wait_until="domcontentloaded")  # the class's link
    wait_rendered(phone, "班级看板")
    link = phone.get_by_role("link", name=re.compile("全班正在课程的第 1 步"))
    link.wait_for()
    words = english_words(phone.evaluate(VISIBLE_TEXT).replace(code, "").replace("ada", ""), GLOSSED)
    assert not words, f"the Chinese learner's board shows English: {words}"  # but ada's name, as she typed it
    link.click()
    wait_rendered(phone, "课程")
    header_step(phone, 1)
    laptop.goto(f"{server.url}/Lesson?class={code}&lesson=9", wait_until="domcontentloaded")
    wait_rendered(laptop, "Lesson")
    header_step(laptop, 1)  # the class is on step 1: a follower goes there

    for n in (2, 3, 4):  # the teacher leads; the learners' pages follow by themselves
        main_button(teacher, "Next →").click()
        teacher.get_by_text(f"The class is on step {n} of 15:").wait_for()
        for page in (phone, laptop):
            header_step(page, n)
            drawn(page)

    step = STEPS[3]
    right, wrong = step.answer, (step.answer + 1) % len(step.options)
    for page, option in ((phone, right), (laptop, wrong)):
        question = page.locator('.st-key-lesson_answer-4')  # not the sidebar's language switch
        question.get_by_test_id("stRadioOption").nth(option).click()
        drawn(page)
    phone.get_by_text("你的答案已计入全班统计", exact=False).wait_for()
    laptop.get_by_text("Your answer counts for the class", exact=False).wait_for()
    teacher.get_by_text("2 learners have answered.").wait_for()  # the counts redraw by themselves
    main_button(teacher, "Reveal the answer").click()
    phone.get_by_test_id("stAlertContentSuccess").wait_for()  # the reveal reaches the learners by itself
    laptop.get_by_test_id("stAlertContentError").filter(has_text="Not quite: the right answer is").wait_for()
    drawn(phone)
    words = english_words(phone.evaluate(VISIBLE_TEXT).replace(code, ""), GLOSSED)
    assert not words, f"the Chinese learner's lesson shows English: {words}"
    screenshot_whole(phone, shots / "zh_lesson_following_phone.png", PHONE)
    screenshot_whole(teacher, shots / "teacher_lead_projector.png", PROJECTOR)
    for context in (teacher_context, laptop_context, phone_context):
        context.close()
