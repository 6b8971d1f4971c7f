"""pages/Board.py and app/views/board.py: a teacher and three learners, each in a session of their own,
through the whole class board: starting a class, joining from its link, posting from Train,
withdrawing, hiding and pinning, the challenge's ranking and refusals, a closed class and an unknown
code, in English and in Chinese. And a class that lasts the term (app/parts/course.py): cookies that
last until the class ends, the personal code that moves a learner to another browser, the learner's
runs to open again, the Course tab, rounds, and erasing one learner.

    pytest tests/app/test_board_page.py
"""
from __future__ import annotations

import re

import pytest

from helpers.apptest import (every_text, home, page, plotly_spec, tiny_settings, unescaped, wait_finished,
                             written_cookies)
from helpers.language import assert_chinese
from app.state import classroom
from app.views import board
from app.parts import course
from app.chrome.site import BOARD, EXPERIMENTS, TRAIN
from minigpt import PRESETS
from minigpt.serve import PERSONAL_CODE_TRIES

pytestmark = [pytest.mark.trains, pytest.mark.slow]


def teacher_class(lang: str | None = None):
    at = page(home(lang), BOARD.script)
    at.button(key="board_start").click().run()
    assert not at.exception
    return at, at.session_state[classroom.CLASS_KEY]


def learner_posts(code: str, name: str, max_steps: int = 30, lang: str | None = None, seed: int | None = None):
    """A learner opens the class's link, trains a tiny run to its end on Train and posts it (with
    `seed`: that seed, instead of the learner's own that the class gives)."""
    at = home(lang, **{"class": code})
    assert at.session_state[classroom.CLASS_KEY] == code  # the link alone joins
    at = tiny_settings(page(at, TRAIN.script), max_steps=max_steps)
    if seed is not None:
        at.number_input(key="train_seed").set_value(seed).run()
    at.button(key="start").click().run()
    wait_finished(at)
    at.run()
    at.text_input(key="board_post_name").set_value(name).run()
    at.button(key="board_post").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    said = [unescaped(c.value) for c in at.caption if code in c.value]
    assert len(said) == 1 and name in said[0], said  # under the button, for as long as it is on the board
    return at


def on_board(at):
    at = page(at, BOARD.script)
    assert not at.exception
    return at


def tab(at, label: str):
    """The teacher opens one of the board's tabs (only the open one runs)."""
    at.session_state[board.TAB_KEY] = label
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def legend(at) -> list[str]:
    """The chart's legend in the order plotly draws it: by legendrank (1000 unless set), then trace order."""
    shown = [t for t in plotly_spec(at, 0)["data"] if t.get("showlegend") is not False]
    return [t["name"] for t in sorted(shown, key=lambda t: t.get("legendrank", 1000))]


def test_a_teacher_and_three_learners_post_withdraw_hide_rank_and_close():
    teacher, code = teacher_class()
    link = teacher.code[0].value
    assert f"class={code}" in link and "teacher=" not in link  # the class's link never carries the key
    assert "teacher" not in teacher.query_params and teacher.query_params["class"] in (code, [code])
    ada = learner_posts(code, "ada")
    bob = learner_posts(code, "bob <b>")
    cy = learner_posts(code, "cy", max_steps=40)

    teacher = on_board(teacher)
    assert legend(teacher) == ["ada", "bob &lt;b&gt;", "cy"]  # one entry per run, markup shown as typed
    table = teacher.dataframe[0].value
    assert list(table["run"]) == ["ada", "bob <b>", "cy"] and list(table["steps"]) == [30, 30, 40]
    assert list(table["Steps"]) == ["30", "30", "40"]  # max_steps is the one setting that differs

    # bob withdraws his run, after a refresh (a new session from his address: the run's id and key);
    # nobody else can: ada's session holds no key to it
    bob_post = next(iter(bob.session_state[classroom.POSTS_KEY]))
    assert not [b for b in on_board(ada).button if b.key == f"board_withdraw_{bob_post}"]
    run_id, run_key = bob.session_state["own_run"]
    refreshed = on_board(home(**{"class": code, "run": run_id, "key": run_key}))
    refreshed.button(key=f"board_withdraw_{bob_post}").click().run()
    assert not refreshed.exception and not refreshed.error
    teacher = on_board(teacher)
    assert legend(teacher) == ["ada", "cy"]

    # learners hold no teacher's key: no controls, even with a guessed key in the address
    intruder = on_board(home(**{"class": code, "teacher": "guess"}))
    assert classroom.TEACHER_KEY not in intruder.session_state
    assert not {"board_hide", "board_pin", "board_close"} & {b.key for b in intruder.button}
    assert not {"board_hide", "board_close"} & {b.key for b in on_board(ada).button}

    # the teacher sets a challenge: at most 30 steps; cy's run was set to 40, so it is refused
    tab(teacher, "Teacher's controls")
    teacher.number_input(key="challenge_steps").set_value(30)
    teacher.number_input(key="challenge_params").set_value(0)
    teacher.button(key="FormSubmitter:board_challenge-Set the challenge").click().run()
    shown = "\n".join(m.value for m in tab(teacher, "Board").markdown)
    assert "**1.** ada:" in shown and "cy: set to train 40 steps, more than 30" in shown

    # hide cy's run: gone from every viewer's chart, still listed (as hidden) for the teacher
    cy_post = next(iter(cy.session_state[classroom.POSTS_KEY]))
    tab(teacher, "Teacher's controls").selectbox(key="board_pick").set_value(cy_post).run()
    teacher.button(key="board_hide").click().run()
    assert teacher.button(key="board_hide").label == "Show again"
    assert legend(on_board(ada)) == ["ada"] and legend(tab(teacher, "Board")) == ["ada"]

    # a page change keeps the class in the address; the teacher's controls survive it
    teacher = tab(on_board(page(teacher, EXPERIMENTS.script)), "Teacher's controls")
    assert teacher.query_params["class"] in (code, [code]) and teacher.button(key="board_close")

    teacher.button(key="board_close").click().run()
    after = on_board(ada)
    assert any(f"The class {code} has closed" in w.value for w in after.warning)
    assert after.button(key="board_start")  # and it offers to start one


def test_an_unknown_code_says_so_and_offers_to_start_a_class():
    at = on_board(home(**{"class": "ZZZZ"}))
    assert any("There is no class ZZZZ" in w.value for w in at.warning)
    assert at.button(key="board_start") and not at.get("plotly_chart")


def test_only_the_runs_owner_sees_the_post_button():
    _teacher, code = teacher_class()
    owner = learner_posts(code, "mine")
    run_id = owner.session_state["own_run"][0]
    watcher = page(home(**{"class": code, "run": run_id}), TRAIN.script)  # a read-only link to the run
    assert not watcher.exception and not [b for b in watcher.button if b.key == "board_post"]


def test_the_board_in_chinese():
    teacher, code = teacher_class("zh")
    learner_posts(code, "小明", lang="zh")
    teacher = on_board(teacher)
    assert legend(teacher) == ["小明"]
    assert_chinese(teacher, "the class board", besides=[code, "小明"])


def test_the_teachers_page_draws_no_key_and_a_refresh_in_the_same_browser_keeps_the_controls(browser_cookies):
    teacher, code = teacher_class()
    key = teacher.session_state[classroom.TEACHER_KEY][1]
    assert not [t for t in every_text(teacher) if key in t]  # drawn nowhere: no link, no code block, no caption
    written = written_cookies(teacher)
    assert written == {classroom.COOKIE_PREFIX + code: key}
    scripts = [e.proto.body for e in teacher.get("html") if key in e.proto.body]
    assert len(scripts) == 1 and scripts[0].startswith("<script>document.cookie")  # only into the browser's cookie
    assert "SameSite=Strict" in scripts[0] and TERM - 600 <= max_age(scripts[0]) <= TERM  # until the class ends
    teacher.run()
    assert not [e for e in teacher.get("html") if key in e.proto.body]  # written once: gone at the next redraw
    for label in ("Board", "Lead the lesson", "Course", "Teacher's controls"):
        assert not [t for t in every_text(tab(teacher, label)) if key in t], label
        assert not [e for e in teacher.get("html") if key in e.proto.body], label
    assert any(e.proto.body.lstrip().startswith('<div class="teacher-link">') for e in teacher.get("html"))

    browser_cookies.update(written)
    refreshed = on_board(home(**{"class": code}))  # F5 at the projector: a new session, the same browser
    assert refreshed.session_state[classroom.TEACHER_KEY] == (code, key)
    assert tab(refreshed, "Teacher's controls").button(key="board_close")
    browser_cookies.clear()  # another browser, no cookie: the learners' view, said so
    elsewhere = on_board(home(**{"class": code}))
    assert classroom.TEACHER_KEY not in elsewhere.session_state and "board_close" not in {b.key for b in elsewhere.button}
    assert any("This is the learners' view" in c.value for c in elsewhere.caption)
    browser_cookies[classroom.COOKIE_PREFIX + code] = "guess"  # a forged cookie gives nothing
    assert classroom.TEACHER_KEY not in on_board(home(**{"class": code})).session_state


def test_a_teachers_link_hands_the_controls_over_and_leaves_the_address_bar():
    teacher, code = teacher_class()
    key = teacher.session_state[classroom.TEACHER_KEY][1]  # what the copy button puts on the clipboard
    refreshed = on_board(home(**{"class": code, "teacher": key}))
    assert refreshed.session_state[classroom.TEACHER_KEY] == (code, key)
    assert tab(refreshed, "Teacher's controls").button(key="board_close")  # the controls are there
    assert "teacher" not in refreshed.query_params  # and the key is gone from the address a projector shows
    assert refreshed.query_params["class"] in (code, [code])


def test_the_learners_link_carries_no_language_and_a_learner_can_go_and_train():
    teacher, code = teacher_class("en")
    link = teacher.code[0].value
    assert link.endswith(f"?class={code}") and "lang" not in link
    learner = on_board(home("zh", **{"class": code}))
    assert learner.code[0].value.endswith(f"?class={code}")
    train = [l.proto for l in learner.get("page_link") if l.proto.page.endswith(TRAIN.script.split("/")[-1])
             or "Train" in l.proto.page]
    assert train and f"class={code}" in train[0].query_string and train[0].label == "为这个班级训练一个运行"


@pytest.mark.parametrize("bad", ["<script>", "ab", "K7Q2'--"])
def test_a_malformed_class_code_says_so_and_leaves_the_address(bad):
    at = on_board(home(**{"class": bad}))
    assert any("class code" in w.value or "no class" in w.value for w in at.warning)
    assert "class" not in at.query_params and classroom.CLASS_KEY not in at.session_state


def test_the_chinese_challenge_lists_its_parts_with_chinese_commas():
    teacher, code = teacher_class("zh")
    tab(teacher, "教师控制").selectbox(key="challenge_corpus").set_value("course-zh")
    teacher.button(key="FormSubmitter:board_challenge-设置挑战").click().run()
    learner_posts(code, "小明", lang="zh")  # the challenge line shows above the ranking, once a run is there
    teacher = tab(on_board(teacher), "看板")
    lines = [m.value for m in teacher.markdown if "course-zh" in m.value]
    assert lines and "，" in lines[0] and ", " not in lines[0], lines


def test_two_runs_that_coincide_are_said_to_coincide():
    teacher, code = teacher_class()
    learner_posts(code, "ann", max_steps=20, seed=7)
    learner_posts(code, "bo", max_steps=20, seed=7)  # the same settings and seed: the same curve
    teacher = on_board(teacher)
    said = [c.value for c in teacher.caption if "trained exactly alike" in c.value]
    assert said and "ann" in said[0] and "bo" in said[0] and "one line for 2 runs" in said[0]


# -- a class's way into Train: a seed of one's own, the challenge, names as typed (issue 58) ---------------

def set_challenge(teacher, steps: int = 0, params: int = 0, corpus: str | None = None):
    tab(teacher, "Teacher's controls")
    teacher.selectbox(key="challenge_corpus").set_value(corpus)
    teacher.number_input(key="challenge_steps").set_value(steps)
    teacher.number_input(key="challenge_params").set_value(params)
    teacher.button(key="FormSubmitter:board_challenge-Set the challenge").click().run()
    assert not teacher.exception
    return teacher


def train_from_the_board(code: str, lang: str | None = None):
    """A learner opens the class's link, then the board's own "Train a run for this class" (its page and
    address, as a click on it opens them)."""
    from urllib.parse import parse_qsl
    learner = on_board(home(lang, **{"class": code}))
    links = [l.proto for l in learner.get("page_link") if l.proto.label == "Train a run for this class"]
    assert len(links) == 1, [l.proto.query_string for l in learner.get("page_link")]
    learner.query_params.update(dict(parse_qsl(links[0].query_string)))
    train = page(learner, TRAIN.script)
    assert not train.exception, [e.value for e in train.exception]
    return train


def test_two_learners_through_the_boards_train_link_get_seeds_of_their_own():
    _teacher, code = teacher_class()
    seeds = [train_from_the_board(code).session_state["train_seed"] for _learner in range(2)]
    assert seeds[0] != seeds[1], seeds


def test_a_preset_pressed_in_a_class_keeps_the_learners_own_seed():
    _teacher, code = teacher_class()
    train = train_from_the_board(code)
    own = train.session_state["train_seed"]
    train.button(key="preset:tiny").click().run()
    assert train.session_state["train_seed"] == own != PRESETS["tiny"].train.seed
    assert any("Tiny" in c.value and "preset's settings" in c.value for c in train.caption)  # still that preset


def test_the_challenge_is_on_a_learners_board_before_any_post():
    teacher, code = teacher_class()
    learner = on_board(home(**{"class": code}))
    assert not [m for m in learner.markdown if "Challenge" in m.value]  # none set yet
    set_challenge(teacher, steps=300, params=150_000, corpus="pydoc-en")
    learner.run()
    shown = [m.value for m in learner.markdown if "Challenge: the lowest validation loss" in m.value]
    assert shown and "on pydoc-en" in shown[0] and "within 300 steps" in shown[0], shown
    assert any("No run meets the challenge yet." in c.value for c in learner.caption)


def test_train_opened_from_the_class_is_filled_to_fit_its_challenge():
    from app.state import runs
    teacher, code = teacher_class()
    set_challenge(teacher, steps=300, params=150_000, corpus="pydoc-en")  # the teacher's defaults, on a corpus
    train = train_from_the_board(code)
    assert train.session_state["corpus"] == "pydoc-en"
    assert train.session_state["max_steps"] <= 300  # the default preset trains 600
    said = [i.value for i in train.info if f"class {code}" in i.value]
    assert said and "pydoc-en" in said[0] and "300 steps" in said[0], said
    assert any("meets the class's challenge" in c.value for c in train.caption), [c.value for c in train.caption]
    train.button(key="start").click().run()
    entry = runs.registry().get(*train.session_state["own_run"])
    assert entry.run.trainer.cfg.max_steps <= 300 and entry.run.trainer.model_params <= 150_000


def test_train_says_what_misses_a_challenge_no_preset_can_meet():
    teacher, code = teacher_class()
    set_challenge(teacher, params=1_000)
    train = train_from_the_board(code)
    said = [unescaped(w.value) for w in train.warning if "would not meet the class's challenge" in w.value]
    assert said and "more than 1,000" in said[0], [w.value for w in train.warning]


def test_equal_results_share_a_place_in_the_ranking():
    from types import SimpleNamespace
    rows = [SimpleNamespace(best_val=v) for v in (3.9946, 3.9946, 3.99461, 4.2, 4.5, 4.5)]
    assert board.places(rows) == [1, 1, 1, 4, 5, 5]


@pytest.mark.parametrize("lang, said", [("en", "was cut to its first 40"), ("zh", "40")])
def test_a_pasted_long_name_is_cut_at_the_limit_and_the_page_says_so(lang, said):
    from minigpt.serve.classes.posts import MAX_NAME
    _teacher, code = teacher_class(lang)
    at = tiny_settings(page(home(lang, **{"class": code}), TRAIN.script), max_steps=20)
    at.button(key="start").click().run()
    wait_finished(at)
    at.run()
    pasted = "long name " * 50
    at.text_input(key="board_post_name").set_value(pasted).run()
    assert at.text_input(key="board_post_name").value == pasted[:MAX_NAME]  # the box holds what the board will show
    notes = [c.value for c in at.caption if str(MAX_NAME) in c.value and said in c.value]
    assert notes, [c.value for c in at.caption]
    if lang == "zh":
        from helpers.language import GLOSSED, english_words
        assert not english_words(notes[0], GLOSSED), notes[0]
    at.button(key="board_post").click().run()
    rows = classroom.classes().view(code, lambda run_id: None).rows
    assert [row.label for row in rows] == [pasted[:MAX_NAME].strip()]


def test_a_run_of_an_erased_class_is_said_to_have_been_erased():
    teacher, code = teacher_class()
    poster = learner_posts(code, "erased soon", max_steps=20)
    run_id = poster.session_state["own_run"][0]
    watcher = page(home(**{"run": run_id}), TRAIN.script)  # someone watching the run's read-only link
    assert not [w for w in watcher.warning if run_id in w.value], [w.value for w in watcher.warning]
    tab(teacher, "Teacher's controls").checkbox(key="board_erase_sure").check().run()
    teacher.button(key="board_erase").click().run()
    for at in (watcher.run(), home(**{"run": run_id})):  # watching it, and its link opened now (the first page says)
        said = [w.value for w in at.warning if run_id in w.value]
        assert said and "erased" in said[0] and "no longer on this server" not in said[0], said


# -- a class that lasts the term (issue 60) -------------------------------------------------------------

TERM = 140 * 24 * 3600  # a class's days by default (MINIGPT_CLASS_DAYS, docs/deploying.md), in seconds
GROUPED = re.compile(r"[A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{4}")  # a personal code as the page shows it
CLAIM = "FormSubmitter:course_claim-Use this code"


def max_age(script: str) -> int:
    return int(re.search(r"max-age=(\d+);", script).group(1))


def token_of(at, code: str) -> str:
    return at.session_state[classroom.LEARNER_KEY][code]


def grouped(token: str) -> str:
    return f"{token[:4]}-{token[4:8]}-{token[8:]}"


def codes_shown(at) -> list[str]:
    return [t for t in every_text(at) if GROUPED.search(t)]


def claim(at, typed: str):
    at.text_input(key=course.CLAIM_KEY).set_value(typed)
    at.button(key=CLAIM).click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_class_set_to_last_ten_days_gives_cookies_that_last_ten_days(monkeypatch):
    monkeypatch.setenv("MINIGPT_CLASS_DAYS", "10")
    teacher, code = teacher_class()
    key = teacher.session_state[classroom.TEACHER_KEY][1]
    learner = home(**{"class": code})  # the first page writes the cookie
    for at, secret in ((teacher, key), (learner, token_of(learner, code))):
        script = next(e.proto.body for e in at.get("html") if secret in e.proto.body)
        assert 10 * 86400 - 600 <= max_age(script) <= 10 * 86400, script


def test_a_learner_sees_their_personal_code_and_the_teachers_page_never_shows_one():
    teacher, code = teacher_class()
    ann = on_board(home(**{"class": code}))
    token = token_of(ann, code)
    assert [c.value for c in ann.code if GROUPED.fullmatch(c.value)] == [grouped(token)]
    assert [e.label for e in ann.expander][:2] == ["Use this class on another device", "Erase your data in this class"]
    for label in ("Board", "Lead the lesson", "Course", "Teacher's controls"):
        shown = tab(teacher, label)
        assert not codes_shown(shown), label
        assert "Use this class on another device" not in [e.label for e in shown.expander], label


def test_a_personal_code_makes_another_browser_the_same_learner_with_their_runs(browser_cookies):
    from app.state import runs
    _teacher, code = teacher_class()
    ann = learner_posts(code, "ann")
    token, (run_id, _key) = token_of(ann, code), ann.session_state["own_run"]
    phone = on_board(home(**{"class": code}))  # another device: no cookie of the class
    assert token_of(phone, code) != token and not [b for b in phone.button if b.key.startswith("course_open_")]
    typed = " ".join(grouped(token).lower().split("-"))  # as a phone's keyboard may give it
    phone = claim(phone, typed)
    assert token_of(phone, code) == token
    assert any(f"This browser is you in class {code} now" in s.value for s in phone.success)
    assert written_cookies(phone) == {classroom.LEARNER_PREFIX + code: token}  # the browser keeps who it is now
    phone.button(key=f"course_open_{run_id}").click().run()  # their run, opened on Train as its owner
    assert not phone.exception, [e.value for e in phone.exception]
    own = phone.session_state["own_run"]
    assert own[0] == run_id and runs.registry().get(*own).is_owner(own[1])
    assert [b for b in phone.button if b.key == "board_post"]  # the owner's own button: posting it again

    browser_cookies[classroom.LEARNER_PREFIX + code] = token  # the phone next week: its cookie
    later = on_board(home(**{"class": code}))
    assert token_of(later, code) == token and later.button(key=f"course_open_{run_id}")


def test_a_wrong_personal_code_is_said_loses_nothing_and_guessing_is_refused():
    _teacher, code = teacher_class()
    ann = on_board(home(**{"class": code}))
    phone = on_board(home(**{"class": code}))
    mine = token_of(phone, code)
    for n in range(PERSONAL_CODE_TRIES):
        phone = claim(phone, f"ZZZZ-ZZZZ-ZZZ{n}")
        said = [unescaped(e.value) for e in phone.error]
        assert said == [f"No learner of class {code} has that personal code. Check it and type it again."], said
        assert phone.text_input(key=course.CLAIM_KEY).value == f"ZZZZ-ZZZZ-ZZZ{n}"  # kept, to be corrected
        assert any(f"This browser has typed {n + 1} wrong code" in c.value for c in phone.caption)
        assert token_of(phone, code) == mine
    phone = claim(phone, grouped(token_of(ann, code)))  # even the right one, now: guessing is bounded
    said = [unescaped(e.value) for e in phone.error]
    assert len(said) == 1 and said[0].startswith("Too many wrong codes: try again in") and "minutes" in said[0], said
    assert token_of(phone, code) == mine


def lead_and_answer(code: str, key: str, answers: dict[int, list[int]]) -> None:
    """The teacher leads each step in turn; each listed learner answers it (their option, in order)."""
    classes = classroom.classes()
    for step, options in answers.items():
        classes.lead(code, key, step)
        for n, option in enumerate(options):
            classes.answer(code, f"learner-token-{n:04d}", step, option)


POEMS = """# Poems of our own

## Line lengths

view: next
page: Generate

Each line of a poem is one sample.

### Check

? Which line is the longest?

- [ ] The first
- [x] The second
- [ ] The third

because: It has the most characters.

## Rhymes

view: loss
page: Train

The end of a line.
"""  # a teacher's lesson of two steps, one with a quick check (its right answer: B)


def test_the_course_tab_shows_each_lesson_session_its_steps_and_their_counts():
    import pandas as pd
    from minigpt.serve import ClassLesson
    teacher, code = teacher_class()
    key = teacher.session_state[classroom.TEACHER_KEY][1]
    lead_and_answer(code, key, {1: [1, 1, 0], 2: [0, 2]})
    classroom.classes().set_lesson(code, key, ClassLesson("poems.md", POEMS))  # the next lead: a new session
    lead_and_answer(code, key, {1: [2, 1, 1, 0], 2: []})
    teacher = tab(teacher, "Course")
    table = teacher.dataframe[0].value  # the tab's one table
    assert list(table["session"]) == [1, 1, 2, 2] and list(table["step"]) == [1, 2, 1, 2]
    assert list(table["lesson"]) == ["the built-in lesson"] * 2 + ["poems.md"] * 2
    assert list(table["title"]) == ["What the model predicts", "From characters to vectors", "Line lengths",
                                    "Rhymes"]
    assert [[None if pd.isna(n) else n for n in table[c]] for c in "ABC"] == \
        [[1, 1, 1, None], [2, 0, 2, None], [0, 1, 1, None]]  # a step without a check has no counts
    assert list(table["answered"]) == [3, 2, 4, 0]
    # the right answers: the built-in lesson's step 1 is B, its step 2 A; the teacher's step 1 is B
    assert list(table["right answer"]) == ["B", "A", "B", ""]
    assert [None if pd.isna(n) else n for n in table["chose it"]] == [2, 1, 2, None]
    assert all(re.search(r"20\d\d", date) for date in table["date"]), list(table["date"])
    assert [b.proto.label for b in teacher.get("download_button")] == ["Download the course (.csv)"]


def test_a_new_round_empties_the_board_and_keeps_the_earlier_posts_under_earlier_rounds():
    teacher, code = teacher_class()
    learner_posts(code, "ann")
    teacher = tab(on_board(teacher), "Course")
    teacher.text_input(key=course.ROUND_NAME_KEY).set_value("week <b>3</b>").run()
    teacher.button(key="course_new_round").click().run()
    assert not teacher.exception
    assert any("Round 2: week <b>3</b> has started" in unescaped(w.value) for w in teacher.warning), \
        [w.value for w in teacher.warning]  # markup in a name stays text
    teacher = tab(teacher, "Board")
    assert not teacher.get("plotly_chart")  # the new round's board: empty
    assert any(unescaped(c.value).startswith("Round 2: week <b>3</b>, since") for c in teacher.caption)
    ada = on_board(home(**{"class": code}))
    for at in (teacher, ada):
        assert "Earlier round (1)" in [e.label for e in at.expander]
        assert [list(d.value["run"]) for d in at.dataframe] == [["ann"]]  # the earlier round, read-only
    assert [b for b in teacher.get("download_button") if b.proto.label == "Download this round's table (.csv)"]
    assert not [b for b in ada.get("download_button")]  # the exports are the teacher's
    learner_posts(code, "bo")  # the new round's own posts, and its own limits
    assert list(classroom.classes().view(code, lambda run_id: None).table()["run"]) == ["bo"]


def test_the_teacher_erases_one_learner_and_a_learner_erases_themselves():
    from app.state import runs
    teacher, code = teacher_class()
    key = teacher.session_state[classroom.TEACHER_KEY][1]
    ann, bo = learner_posts(code, "ann"), learner_posts(code, "bo")
    classes = classroom.classes()
    classes.lead(code, key, 1)
    for at, option in ((ann, 0), (bo, 2)):
        classes.answer(code, token_of(at, code), 1, option)
    ann_run, bo_run = ann.session_state["own_run"][0], bo.session_state["own_run"][0]
    ann_post = next(iter(ann.session_state[classroom.POSTS_KEY]))

    teacher = tab(on_board(teacher), "Teacher's controls")
    teacher.selectbox(key="board_pick").set_value(ann_post).run()
    assert teacher.button(key="board_erase_learner").disabled  # confirmed first
    teacher.checkbox(key="board_erase_learner_sure").check().run()
    teacher.button(key="board_erase_learner").click().run()
    assert not teacher.exception
    assert [row.label for row in classes.view(code, lambda run_id: None).rows] == ["bo"]
    assert runs.registry().get(ann_run) is None and runs.registry().get(bo_run) is not None
    assert classes.learner_runs(code, token_of(ann, code)) == []
    assert classes.counts(code, key, 1, 3) == [0, 0, 1]  # bo's answer alone

    bo = on_board(bo)
    bo.checkbox(key="course_erase_sure").check().run()
    bo.button(key="course_erase").click().run()
    assert not bo.exception
    assert any(f"Your data in class {code} is erased" in w.value for w in bo.warning)
    assert classes.view(code, lambda run_id: None).rows == () and runs.registry().get(bo_run) is None
    assert classes.counts(code, key, 1, 3) == [0, 0, 0]
    assert classes.learner_runs(code, token_of(bo, code)) == []


def test_the_course_and_the_learners_parts_in_chinese():
    teacher, code = teacher_class("zh")
    key = teacher.session_state[classroom.TEACHER_KEY][1]
    lead_and_answer(code, key, {1: [1, 0]})
    assert_chinese(tab(teacher, "课程总览"), "the Course tab", besides=[code])
    learner = on_board(home("zh", **{"class": code}))
    assert_chinese(learner, "a learner's board", besides=[code, grouped(token_of(learner, code))])


def test_on_a_shared_computer_a_learner_and_the_teacher_make_the_browser_forget_them(browser_cookies):
    teacher, code = teacher_class()
    ann = on_board(home(**{"class": code}))
    token = token_of(ann, code)
    ann.button(key="course_forget_me").click().run()
    assert classroom.CLASS_KEY not in ann.session_state and token_of(ann, code) != token  # a new learner if back
    cleared = [e.proto.body for e in ann.get("html") if "max-age=0" in e.proto.body]
    assert len(cleared) == 1  # both of the class's cookies, emptied at once
    for prefix in (classroom.LEARNER_PREFIX, classroom.COOKIE_PREFIX):
        assert f"{prefix}{code}=; path=/; max-age=0" in cleared[0]
    controls = tab(teacher, "Teacher's controls")
    controls.button(key="board_forget_me").click().run()
    assert classroom.TEACHER_KEY not in controls.session_state and classroom.CLASS_KEY not in controls.session_state
    assert [e for e in controls.get("html") if f"{classroom.COOKIE_PREFIX}{code}=; path=/; max-age=0" in e.proto.body]


# -- a lecture hall: 300 runs on one board (issue 61) ---------------------------------------------------

HALL = 300


def posted_run(i: int, best: float):
    """A finished run as the board reads one (its snapshot, its trainer's settings), trained by no one:
    validation loss 4.0 at step 0, `best` at step 20, a training loss that follows it (two runs of one
    `best` coincide), and a sample naming it."""
    from types import SimpleNamespace

    from minigpt import GPTConfig, TrainConfig
    from minigpt.serve.runs.run import EvalRecord, RunSnapshot
    from minigpt.train import TrainEvent
    history = [TrainEvent(step, 20, train, 1e-3, 1000.0, 1.0, val)
               for step, train, val in ((0, 4.0, 4.0), (10, best + 0.3, None), (20, best + 0.1, best))]
    snapshot = RunSnapshot.of(f"hall-{i}", "finished", step=20, max_steps=20, history=history,
                              evals=[EvalRecord(20, 3.8, best, f"样本{i:03d}")])
    trainer = SimpleNamespace(model_config=GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32),
                              cfg=TrainConfig(max_steps=20, eval_interval=20))
    return SimpleNamespace(run_id=f"hall-{i}", corpus="course-zh", is_owner=lambda key: key == "owner",
                           run=SimpleNamespace(snapshot=lambda: snapshot, trainer=trainer))


def lecture_hall(monkeypatch, lang: str | None = None):
    """A class of 300 posted runs, named 学员000 … 学员299: 学员i's best validation loss is 3.500 + i/1000,
    but for 学员001, 学员000's twin (3.500), and for 学员290 … 学员299, the ten best: 学员299 2.00, 学员298
    2.01, … 学员290 2.09. 学员150's posted by a learner whose board this is too (on top of the teacher's)."""
    teacher, code = teacher_class(lang)
    # the server's own limit holds a hall (it once refused every post after 40)
    learner = on_board(home(lang, **{"class": code}))
    for i in range(HALL):
        best = 2.0 + (299 - i) / 100 if i >= 290 else 3.5 + (i if i > 1 else 0) / 1000
        who = token_of(learner, code) if i == 150 else f"learner-{i:04d}"
        classroom.classes().post(code, posted_run(i, best), "owner", f"学员{i:03d}", learner=who, corpus="course-zh")
    return on_board(teacher), learner.run(), code


THE_BEST = [f"学员{i:03d}" for i in range(299, 289, -1)]  # 2.00, 2.01, … 2.09


def test_a_board_of_300_draws_the_ten_best_and_the_viewers_own_and_sums_up_the_class(monkeypatch):
    teacher, learner, code = lecture_hall(monkeypatch)
    assert classroom.classes().view(code, lambda run_id: None).coinciding() == [("学员000", "学员001")]
    band = ["the class's middle 80% (10th–90th percentile)", "the class's median"]
    assert legend(teacher) == [*THE_BEST, *band]
    assert legend(learner) == [*THE_BEST, "学员150 (yours)", *band]
    said = "The 10 runs with the lowest validation loss, of 300, are drawn in colour. All 300 are in grey: the dashed " \
           "line is their median validation loss at each step, the band runs from their 10th to their 90th percentile."
    assert said in [c.value for c in teacher.caption]
    assert said + " Your run is drawn thicker, marked “(yours)”." in [c.value for c in learner.caption]
    for at, drawn in ((teacher, THE_BEST), (learner, [*THE_BEST, "学员150"])):
        runs, samples = (frame.value for frame in at.dataframe)
        assert len(runs) == HALL and list(runs["run"][:10]) == THE_BEST  # every run, the best first
        assert list(runs["best val loss"][10:13]) == [3.5, 3.5, 3.502]
        # the twins 学员000 and 学员001 are in the grey band alone: no line of theirs to say coincides
        assert not [c for c in at.caption if "trained exactly alike" in c.value]
        assert list(samples["run"]) == drawn and list(samples["latest sample"])[-1] == f"样本{drawn[-1][2:]}"
        assert any(f"({len(drawn)} of 300)" in m.value for m in at.markdown)


def test_a_board_of_300_ranks_the_runs_drawn_and_counts_the_rest(monkeypatch):
    from minigpt.serve import Challenge
    teacher, learner, code = lecture_hall(monkeypatch)
    key = teacher.session_state[classroom.TEACHER_KEY][1]
    classroom.classes().set_challenge(code, key, Challenge(max_steps=30))  # every run meets it
    for at, places in ((teacher.run(), 10), (learner.run(), 11)):
        ranked = next(m.value for m in at.markdown if m.value.startswith("**1.** "))
        lines = ranked.split("  \n")
        assert lines[:2] == ["**1.** 学员299: 2.000", "**2.** 学员298: 2.010"] and len(lines) == places
        more = [c.value for c in at.caption if "more runs meet the challenge" in c.value]
        assert more == [f"{300 - places} more runs meet the challenge: the table lists every run."]
        assert any("The runs that meet the challenge come first." in c.value for c in at.caption)
    # 学员150, 3.650: after the ten best and 学员000 … 学员149 (3.500 … 3.649)
    assert lines[-1] == "**161.** 学员150: 3.650"  # the learner's own place, below the ten


def test_the_board_of_300_in_chinese(monkeypatch):
    teacher, learner, code = lecture_hall(monkeypatch, "zh")
    said = "在 300 个运行中，验证损失最低的 10 个以彩色画出。全部 300 个都在灰色中：虚线是它们每一步验证损失的中位数，" \
           "灰带从第 10 百分位延伸到第 90 百分位。"
    assert said in [c.value for c in teacher.caption]
    assert said + "你的运行画得更粗，标着“（你的）”。" in [c.value for c in learner.caption]
    assert "学员150（你的）" in legend(learner)
    names = [f"学员{i:03d}" for i in range(HALL)] + [f"样本{i:03d}" for i in range(HALL)]
    assert_chinese(teacher, "the board of 300 runs", besides=[code, *names])
    assert_chinese(learner, "a learner's board of 300 runs", besides=[code, *names])


@pytest.mark.parametrize("runs, training, seconds", [(1, True, 5.0), (100, True, 5.0), (101, True, 10.0),
                                                     (300, True, 15.0), (300, False, 45.0), (0, False, 15.0)])
def test_a_board_redraws_less_often_for_every_hundred_runs_on_it(runs, training, seconds):
    """A lecture hall's board has about as many viewers as runs: 301 redraws every 5 s were more than the
    server's core answered (bench/class_board.py), so each hundred runs slows the board by one pace more."""
    from types import SimpleNamespace
    rows = [SimpleNamespace(state="running" if training and i == 0 else "finished") for i in range(runs)]
    assert board.serving.REFRESH_SECONDS == 5.0 and board.PACE_RUNS == 100
    assert board.redraw_seconds(SimpleNamespace(rows=rows)) == seconds
