"""Where the lesson is: which lesson this session follows (its class's, or the built-in one in the
page's language), the step in the address (?lesson=N), Back, the step list and Next, and the tool
pages' links to their steps. Light on purpose: Home and every tool page import it, and the lesson's
views (app.views.lesson) bring in numpy, pandas and Plotly, which those pages need not wait for."""
from __future__ import annotations

import functools
import string
from collections.abc import Callable
from typing import Any

import streamlit as st

from minigpt.serve import BoardError

from app.chrome import site, url
from app.chrome.i18n import _, language, languages, number
from app.state import classroom
from app.state.lesson_file import Lesson, LessonFileError, builtin_lesson, parse_lesson

STEP_LIST_KEY = "lesson_list"           # session_state: the step list's choice
MOST_LINKS = 3                          # a tool page's links to a teacher's lesson, side by side


@functools.lru_cache(maxsize=32)  # the Lesson is frozen: one copy serves every session, none unpickled per call
def parsed(text: str) -> Lesson:
    """A class's lesson, read once per text: every page of every learner in the class shows it."""
    return parse_lesson(text)


def lesson(code: str | None = None) -> Lesson:
    """The lesson of class `code` (by default this session's class), if its teacher loaded one; else
    the built-in lesson in the page's language."""
    code = code or st.session_state.get(classroom.CLASS_KEY)
    if code:
        try:
            loaded = classroom.classes().class_lesson(code)
        except BoardError:  # no such class (any more): the board says so
            loaded = None
        if loaded is not None:
            try:
                return parsed(loaded.text)
            except LessonFileError:  # a file this version reads otherwise than the one that took it: ours
                pass
    return builtin_lesson(language())


class _Numbers(string.Formatter):
    """str.format writing each number as the page's language does (i18n.number), as `_` does."""

    def format_field(self, value: Any, spec: str) -> str:
        return number(value, spec)


def words(template: str, params: dict | None) -> str | None:
    """A lesson's words with the numbers they quote filled in, written the page's language's way;
    None where they quote numbers and there are none to fill in (no model to read them from)."""
    try:
        return _Numbers().vformat(template, (), params or {})
    except KeyError:
        return None


def step_number(steps: int) -> int:
    """The step in the address, from 1, of a lesson of `steps` steps; a step that does not exist says
    so and opens the nearest."""
    raw = st.query_params.get(url.LESSON, "1")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if not 1 <= n <= steps:
        shown = min(max(n, 1), steps)
        st.warning(_("The lesson has steps 1 to {last}: showing step {n}.", last=steps, n=shown))
        n = shown
        st.query_params[url.LESSON] = str(n)
    return n


def go(n: int, then: Callable[[], None] | None = None) -> None:
    st.query_params[url.LESSON] = str(n)
    if then is not None:
        then()


def link(*numbers: int) -> None:
    """On a tool page: the lesson's steps about it, side by side. The numbers are the built-in
    lesson's; in a class following a lesson of its own, its steps that go further on the same page."""
    builtin, followed = builtin_lesson(language()), lesson()
    if not any(followed == builtin_lesson(lang) for lang in languages()):
        pages = {builtin.steps[n - 1].page for n in numbers} - {None}
        numbers = tuple(i for i, step in enumerate(followed.steps, start=1) if step.page in pages)[:MOST_LINKS]
    for col, n in zip(st.columns(len(numbers)) if numbers else (), numbers):
        col.page_link(site.LESSON.script, label=_("Lesson, step {n}: {title}", n=n, title=followed.steps[n - 1].title),
                      icon="🎓", query_params={url.LESSON: str(n), url.LANG: language()})


def steps_bar(chosen: Lesson, n: int, where: str, on_move: Callable[[], None] | None = None) -> None:
    """Back, the step list and Next; drawn at the top and the bottom of the step. `on_move` is
    called when the learner moves by hand (the class's follow mode ends there)."""
    total = len(chosen.steps)
    back_col, list_col, next_col = st.columns([1, 4, 1], vertical_alignment="bottom")
    back_col.button(_("← Back"), key=f"lesson_back:{where}", disabled=n == 1, on_click=go, args=(n - 1, on_move),
                    width="stretch")
    next_col.button(_("Next →"), key=f"lesson_next:{where}", disabled=n == total, on_click=go, args=(n + 1, on_move),
                    type="primary", width="stretch")
    if where == "top":  # the options are the words themselves: a format_func's words would stay in the old language
        labels = [_("{n} of {total}: {title}", n=i + 1, total=total, title=step.title)
                  for i, step in enumerate(chosen.steps)]
        st.session_state[STEP_LIST_KEY] = labels[n - 1]
        list_col.selectbox(_("Step"), labels, key=STEP_LIST_KEY, label_visibility="collapsed",
                           on_change=lambda: go(labels.index(st.session_state[STEP_LIST_KEY]) + 1, on_move))
    else:
        list_col.progress(n / total, text=_("Step {n} of {total}", n=n, total=total))
