"""app/parts/class_lesson.py: the teacher leads a class through the Lesson, learners follow and leave
"follow", answer a step's question for the class, and learn whether they were right once the
teacher reveals it; the teacher sees counts and no names. The teacher loads a lesson file of their
own into the class, or a built-in one, and the class follows it; a wrong file is refused with its
line, and the class keeps its lesson. A learner is their browser's token for
the class: a refresh is the same learner, and the revealed counts no longer move. Each person is an
AppTest session, and a refresh a new session sent the cookies the page wrote; a follower's poll is a
rerun here (the browser tests watch the poll itself).

    pytest tests/app/test_class_lesson.py
"""
from __future__ import annotations

import re

import pytest

from app.chrome import i18n
from app.state import classroom
from app.views import board
from app.parts import class_lesson
from app.state.lesson_file import builtin_lesson
from app.chrome.site import BOARD, LESSON
from helpers.apptest import every_text, home, page, unescaped, written_cookies
from helpers.language import assert_chinese
from helpers.lessons import POEMS
from minigpt import DEFAULT_CORPUS, load_corpus

pytestmark = pytest.mark.slow
STEPS = builtin_lesson("en").steps


def teacher_leading():
    teacher = page(home("en"), BOARD.script)
    teacher.button(key="board_start").click().run()
    teacher.session_state[board.TAB_KEY] = "Lead the lesson"
    teacher.run()
    teacher.button(key="lead_start").click().run()
    assert not teacher.exception
    return teacher, teacher.session_state[classroom.CLASS_KEY]


def learner(code: str, lang: str = "en", step: int | None = None):
    params = {"class": code} | ({"lesson": str(step)} if step else {})
    at = page(home(lang, **params), LESSON.script)
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown_step(at) -> int:
    return int(at.header[0].value.split(".")[0])


def test_a_follower_goes_to_the_teachers_step_and_leaves_and_rejoins_follow():
    teacher, code = teacher_leading()
    ann = learner(code, step=4)  # an old link to step 4: the class is on step 1
    assert shown_step(ann) == 1 and ann.query_params["lesson"] in ("1", ["1"])
    teacher.button(key="lead_next").click().run()
    teacher.button(key="lead_next").click().run()
    assert classroom.classes().lesson(code).step == 3
    ann.run()  # the poll's rerun
    assert shown_step(ann) == 3
    ann.button(key="lesson_next:top").click().run()  # going on alone ends follow
    assert shown_step(ann) == 4 and ann.toggle(key=class_lesson.FOLLOW_KEY).value is False
    teacher.button(key="lead_back").click().run()
    ann.run()
    assert shown_step(ann) == 4  # not following: stays
    ann.toggle(key=class_lesson.FOLLOW_KEY).set_value(True).run()
    assert shown_step(ann) == 2
    teacher.button(key="lead_stop").click().run()
    ann.run()
    assert shown_step(ann) == 2 and not [t for t in ann.toggle if t.key == class_lesson.FOLLOW_KEY]


def test_the_class_answers_the_teacher_counts_without_names_and_reveals():
    teacher, code = teacher_leading()
    step = STEPS[0]
    right, wrong = step.answer, (step.answer + 1) % len(step.options)
    ann, bo, cy = learner(code), learner(code), learner(code)
    for at, option in ((ann, right), (bo, wrong), (cy, right)):
        radio = at.radio(key="lesson_answer:1")
        radio.set_value(radio.options[option]).run()
        assert not at.success and not at.error  # nothing said before the reveal
        assert any("counts for the class" in i.value for i in at.info)
    assert classroom.classes().counts(code, teacher.session_state[classroom.TEACHER_KEY][1], 1, 3) == \
        [int(i == right) * 2 + int(i == wrong) for i in range(3)]
    teacher.run()
    bars = [p.proto.text for p in teacher.get("progress")]
    assert [bar.rsplit("— ", 1)[1] for bar in bars] == [str(int(i == right) * 2 + int(i == wrong)) for i in range(3)]
    assert any("3 learners have answered" in c.value for c in teacher.caption)
    shown = " ".join([*bars, *(m.value for m in teacher.markdown), *(c.value for c in teacher.caption)])
    tokens = [at.session_state[classroom.LEARNER_KEY][code] for at in (ann, bo, cy)]
    assert not [token for token in tokens if token in shown]  # counts, never who

    teacher.button(key="lead_reveal:1").click().run()
    assert "✅" in [p.proto.text for p in teacher.get("progress")][right]
    ann.run(), bo.run()
    assert ann.success and ann.success[0].value.startswith("Right.")
    assert bo.error and "one for each character it knows" in bo.error[0].value  # the right answer, and why
    late = learner(code)  # one who had not answered sees the answer, with why
    assert any("revealed the answer" in i.value for i in late.info)


def test_the_question_quotes_the_learners_own_model():
    """Step 1's question names the learner's vocabulary: counted here from the shipped model's
    corpus, the characters it was trained on."""
    teacher, code = teacher_leading()
    vocab = len(set(load_corpus(DEFAULT_CORPUS)))
    ann = learner(code)
    radio = ann.radio(key="lesson_answer:1")
    assert f"knows {vocab} characters" in radio.label
    assert radio.options[STEPS[0].answer].startswith(f"{vocab} probabilities")
    assert f"from 0 to {vocab - 1}" in radio.options[2]


def test_following_in_chinese_on_a_phone_speaks_chinese():
    _teacher, code = teacher_leading()
    ann = learner(code, "zh")
    assert_chinese(ann, "the lesson, following the teacher", besides=[code])


# ------------------------------------------------------------------ one learner, one answer

def choose(at, n: int, option: int):
    radio = at.radio(key=f"lesson_answer:{n}")
    radio.set_value(radio.options[option]).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def chosen(at, n: int) -> int | None:
    radio = at.radio(key=f"lesson_answer:{n}")
    return radio.options.index(radio.value) if radio.value is not None else None


def counts(teacher, code: str, n: int = 1) -> list[int]:
    key = teacher.session_state[classroom.TEACHER_KEY][1]
    return classroom.classes().counts(code, key, n, len(STEPS[n - 1].options))


def test_a_refresh_or_a_second_tab_is_the_same_learner_with_its_answer_and_the_count_does_not_move(browser_cookies):
    teacher, code = teacher_leading()
    right, wrong = STEPS[0].answer, (STEPS[0].answer + 1) % len(STEPS[0].options)
    ann = home("en", **{"class": code})  # the session's first page writes the cookie
    written = written_cookies(ann)
    token = written.get(classroom.LEARNER_PREFIX + code)
    assert token and token == ann.session_state[classroom.LEARNER_KEY][code]
    script = next(e.proto.body for e in ann.get("html") if token in e.proto.body)
    kept = int(re.search(r"max-age=(\d+)", script)[1])  # until the class ends: written a moment before this
    assert "SameSite=Strict" in script and classroom.cookie_seconds(code) <= kept <= classroom.cookie_seconds(code) + 60
    assert token not in str(ann.query_params) and not [t for t in every_text(ann) if token in t]  # never drawn
    ann = choose(page(ann, LESSON.script), 1, wrong)
    assert token not in " ".join(e.proto.body for e in ann.get("html"))  # written once: gone at the next page
    assert token not in str(ann.query_params) and not [t for t in every_text(ann) if token in t]
    assert counts(teacher, code) == [int(i == wrong) for i in range(3)]

    browser_cookies.update(written)
    for address in ({}, {"lesson": "1"}):  # F5, and a second tab of the same browser
        arrived = home("en", **{"class": code}, **address)
        assert arrived.session_state[classroom.LEARNER_KEY][code] == token
        assert not written_cookies(arrived)  # the browser has it: nothing to write, nothing on the page
        again = page(arrived, LESSON.script)
        assert chosen(again, 1) == wrong  # the radio shows the counted choice
        assert any("counts for the class" in i.value for i in again.info)
    choose(again, 1, right)  # a change of mind replaces the answer: still one learner
    assert counts(teacher, code) == [int(i == right) for i in range(3)]
    assert chosen(learner(code), 1) == right

    browser_cookies.clear()  # cookies off (or another browser): a learner of its own, for the session
    bo = choose(learner(code), 1, wrong)
    bo.run()
    assert bo.session_state[classroom.LEARNER_KEY][code] != token and chosen(bo, 1) == wrong
    assert counts(teacher, code) == [int(i in (right, wrong)) for i in range(3)]
    assert not bo.warning and not bo.error  # nothing alarming said


def test_a_forged_learner_cookie_is_not_taken(browser_cookies):
    _teacher, code = teacher_leading()
    browser_cookies[classroom.LEARNER_PREFIX + code] = "x\"; max-age=0"  # not a token the app makes
    ann = home("en", **{"class": code})
    assert ann.session_state[classroom.LEARNER_KEY][code] != "x\"; max-age=0"
    assert classroom.TOKEN.fullmatch(written_cookies(ann)[classroom.LEARNER_PREFIX + code])


def test_the_revealed_counts_are_the_class_answer_a_later_try_is_not_counted_and_reopening_counts_again(
        browser_cookies):
    teacher, code = teacher_leading()
    right, wrong = STEPS[0].answer, (STEPS[0].answer + 1) % len(STEPS[0].options)
    ann = home("en", **{"class": code})
    browser_cookies.update(written_cookies(ann))
    ann = choose(page(ann, LESSON.script), 1, wrong)
    teacher.button(key="lead_reveal:1").click().run()
    assert any("not counted" in c.value for c in teacher.caption)  # the teacher's page says the counts froze
    frozen = [int(i == wrong) for i in range(3)]
    choose(ann.run(), 1, right)  # after the reveal: a try for themselves
    assert ann.success and ann.success[0].value.startswith("Right.")
    assert any("This try is not counted" in c.value for c in ann.caption)
    bo = choose(learner(code), 1, right)  # one who answers only now is not counted either
    assert any("This try is not counted" in c.value for c in bo.caption)
    assert counts(teacher, code) == frozen
    teacher.run()
    assert [p.proto.text.rsplit("— ", 1)[1] for p in teacher.get("progress")] == [str(c) for c in frozen]
    assert chosen(learner(code), 1) == wrong  # a refresh shows the counted answer, with its verdict
    choose(ann, 1, wrong)  # back to the counted answer: nothing to say
    assert not [c for c in ann.caption if "not counted" in c.value]

    reopen = teacher.button(key="lead_reveal:1")
    assert "reopen" in reopen.label
    reopen.click().run()
    choose(ann.run(), 1, right)  # the question is open again: a change counts
    assert counts(teacher, code) == [int(i == right) for i in range(3)]
    assert any("counts for the class" in i.value for i in ann.info) and not ann.success


def test_a_try_after_the_reveal_is_said_not_to_count_in_chinese():
    teacher, code = teacher_leading()
    teacher.button(key="lead_reveal:1").click().run()
    ann = choose(learner(code, "zh"), 1, STEPS[0].answer)
    assert any("不计入" in c.value for c in ann.caption)
    assert_chinese(ann, "a try after the reveal", besides=[code])


def test_a_learner_on_another_step_sees_no_verdict_until_that_step_is_revealed():
    """The teacher reveals the class's step (1): a learner who went ahead to step 2 learns nothing of
    step 2's answer until the teacher reveals step 2 itself."""
    teacher, code = teacher_leading()
    ann = learner(code)
    ann.button(key="lesson_next:top").click().run()  # ahead, alone
    assert shown_step(ann) == 2
    cy = learner(code)
    cy.button(key="lesson_next:top").click().run()  # ahead too, without answering
    step = STEPS[1]
    choose(ann, 2, step.answer)
    assert not ann.success and not ann.error and any("counts for the class" in i.value for i in ann.info)
    teacher.button(key="lead_reveal:1").click().run()
    for at in (ann.run(), cy.run()):
        assert shown_step(at) == 2
        assert not at.success and not at.error, "step 2's verdict before step 2 is revealed"
        assert not [i for i in at.info if "revealed the answer" in i.value]
    teacher.button(key="lead_next").click().run()
    teacher.button(key="lead_reveal:2").click().run()
    assert ann.run().success and ann.success[0].value.startswith("Right.")
    assert any("revealed the answer" in i.value for i in cy.run().info)


def test_the_board_shows_where_the_class_is_in_the_lesson_once_the_teacher_leads():
    teacher = page(home("en"), BOARD.script)
    teacher.button(key="board_start").click().run()
    code = teacher.session_state[classroom.CLASS_KEY]
    ann = page(home("en", **{"class": code}), BOARD.script)
    lines = lambda at: [l.proto.label for l in at.get("page_link") if "The class is on step" in l.proto.label]
    assert not lines(ann)
    teacher.session_state[board.TAB_KEY] = "Lead the lesson"
    teacher.run()
    teacher.button(key="lead_start").click().run()
    ann.run()  # the line's poll, here a rerun
    assert lines(ann) == [f"The class is on step 1 of the lesson: {STEPS[0].title}"]
    link = next(l.proto for l in ann.get("page_link") if "The class is on step" in l.proto.label)
    assert "lesson=1" in link.query_string and f"class={code}" in link.query_string


# ------------------------------------------------------------------ the teacher's own lesson

def lead_tab(lang: str = "en"):
    """A teacher's board on the "Lead the lesson" tab, not leading yet."""
    teacher = page(home(lang), BOARD.script)
    teacher.button(key="board_start").click().run()
    teacher.session_state[board.TAB_KEY] = i18n.catalog(lang).gettext("Lead the lesson")
    teacher.run()
    assert not teacher.exception, [e.value for e in teacher.exception]
    return teacher, teacher.session_state[classroom.CLASS_KEY]


def upload(teacher, name: str, data: bytes):
    uploads = teacher.session_state[class_lesson.UPLOADS_KEY] if class_lesson.UPLOADS_KEY in teacher.session_state \
        else 0
    teacher.file_uploader(key=f"{class_lesson.LESSON_UPLOAD}:{uploads}").set_value((name, data, "text/markdown")).run()
    assert not teacher.exception, [e.value for e in teacher.exception]
    return teacher


def test_the_class_follows_the_teachers_lesson_file_answers_its_question_and_sees_the_reveal():
    teacher, code = lead_tab()
    assert any("follows the built-in lesson (15 steps)" in c.value for c in teacher.caption)
    upload(teacher, "poems.md", POEMS.encode("utf-8"))
    assert classroom.classes().class_lesson(code).name == "poems.md" and not teacher.error
    assert any("follows **poems.md** (2 steps)" in unescaped(c.value) for c in teacher.caption)
    assert any("Lead the class through the lesson's 2 steps" in m.value for m in teacher.markdown)
    teacher.button(key="lead_start").click().run()
    ann = learner(code)
    assert ann.header[0].value == "1. What comes next in a poem"
    intro = [m.value for m in ann.markdown if "teacher's lesson" in m.value or "From what a language model" in m.value]
    assert intro == ["Your teacher's lesson: **Poems**"]  # its title, not our lesson's words
    assert not [r for r in ann.radio if r.key == "lesson_answer:1"]  # a step without a check asks nothing
    teacher.button(key="lead_next").click().run()
    assert teacher.button(key="lead_next").disabled  # the lesson's last step: 2, not the built-in 15
    ann.run()
    assert ann.header[0].value == "2. Sampling a poem" and ann.query_params["lesson"] in ("2", ["2"])
    choose(ann, 2, 0)
    assert any("counts for the class" in i.value for i in ann.info) and not ann.error
    teacher.run()
    assert [p.proto.text.rsplit("— ", 1)[1] for p in teacher.get("progress")] == ["1", "0", "0"]
    teacher.button(key="lead_reveal:2").click().run()
    ann.run()
    assert ann.error and "the right answer is “It flattens the distribution”" in ann.error[0].value
    assert "A larger T shrinks the gaps" in ann.error[0].value


def test_a_wrong_file_is_refused_with_its_line_and_the_class_keeps_its_lesson():
    teacher, code = lead_tab()
    upload(teacher, "poems.md", POEMS.encode("utf-8"))
    upload(teacher, "broken.md", POEMS.replace("view: sampling", "view: sampler").encode("utf-8"))
    shown = unescaped(teacher.error[0].value)
    assert shown.startswith("broken.md was not loaded, and the class keeps") and len(teacher.error) == 1
    assert "Line 12: “sampler” is not a view of the lesson" in shown
    assert classroom.classes().class_lesson(code).name == "poems.md"
    upload(teacher, "latin1.md", "## Café\n".encode("latin-1"))
    assert "Line 1: This is not UTF-8 text" in unescaped(teacher.error[0].value)
    assert classroom.classes().class_lesson(code).name == "poems.md"


def test_a_wrong_file_is_said_in_chinese_with_its_line():
    teacher, code = lead_tab("zh")
    upload(teacher, "broken.md", POEMS.replace("- [x] It flattens", "- [ ] It flattens").encode("utf-8"))
    assert teacher.error and "第 17 行：没有选项被标为正确" in unescaped(teacher.error[0].value), teacher.error[0].value
    assert classroom.classes().class_lesson(code) is None


def test_loading_a_lesson_while_leading_stops_leading_and_the_built_in_one_comes_back():
    teacher, code = lead_tab()
    teacher.button(key="lead_start").click().run()
    teacher.button(key="lead_next").click().run()
    assert any("stops leading this one" in c.value for c in teacher.caption)
    upload(teacher, "poems.md", POEMS.encode("utf-8"))
    assert classroom.classes().lesson(code).step is None  # the teacher starts the new lesson from its step 1
    assert teacher.button(key="lead_start")
    teacher.button(key="class_lesson_clear").click().run()
    assert classroom.classes().class_lesson(code) is None
    assert any("follows the built-in lesson (15 steps)" in c.value for c in teacher.caption)


def test_a_built_in_lesson_in_one_language_is_the_whole_classs():
    teacher, code = lead_tab()
    teacher.selectbox(key=class_lesson.BUILTIN_KEY).set_value("zh").run()
    teacher.button(key="class_lesson_builtin_load").click().run()
    assert classroom.classes().class_lesson(code).name == builtin_lesson("zh").title
    teacher.button(key="lead_start").click().run()
    ann = learner(code)  # an English page: the class's lesson is Chinese
    assert ann.header[0].value == f"1. {builtin_lesson('zh').steps[0].title}"


def test_a_tool_page_links_to_the_class_lessons_steps_on_it():
    teacher, code = lead_tab()
    upload(teacher, "poems.md", POEMS.encode("utf-8"))
    generate = page(home("en", **{"class": code}), "pages/Generate.py")
    links = [l.proto.label for l in generate.get("page_link") if "Lesson, step" in l.proto.label]
    assert links == ["Lesson, step 1: What comes next in a poem", "Lesson, step 2: Sampling a poem"]
