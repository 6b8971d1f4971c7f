"""app/parts/class_lesson.py: the teacher leads a class through the Lesson, learners follow and leave
"follow", answer a step's question for the class, and learn whether they were right once the
teacher reveals it; the teacher sees counts and no names. Each person is an AppTest session; a
follower's poll is a rerun here (the browser test watches the poll itself).

    pytest tests/app/test_class_lesson.py
"""
from __future__ import annotations


import pytest

from app.state import classroom
from app.views import board
from app.parts import class_lesson
from app.state.lesson_text import STEPS
from app.chrome.site import BOARD, LESSON
from helpers.apptest import home, page
from helpers.language import assert_chinese
from minigpt import DEFAULT_CORPUS, load_corpus

pytestmark = pytest.mark.slow


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
    assert not [at for at in (ann, bo, cy) if at.session_state[classroom.LEARNER_KEY] in shown]  # counts, never who

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
