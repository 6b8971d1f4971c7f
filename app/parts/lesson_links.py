"""Where the lesson is: the step in the address (?lesson=N), Back, the step list and Next, and the
tool pages' links to their steps. Light on purpose: Home and every tool page import it, and the
lesson's views (app.views.lesson) bring in numpy, pandas and Plotly, which those pages need not wait for."""
from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from app.chrome import site, url
from app.chrome.i18n import _, language
from app.state.lesson_text import STEPS

STEP_LIST_KEY = "lesson_list"           # session_state: the step list's choice


def step_number() -> int:
    """The step in the address, from 1; a step that does not exist says so and opens the nearest."""
    raw = st.query_params.get(url.LESSON, "1")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if not 1 <= n <= len(STEPS):
        shown = min(max(n, 1), len(STEPS))
        st.warning(_("The lesson has steps 1 to {last}: showing step {n}.", last=len(STEPS), n=shown))
        n = shown
        st.query_params[url.LESSON] = str(n)
    return n


def go(n: int, then: Callable[[], None] | None = None) -> None:
    st.query_params[url.LESSON] = str(n)
    if then is not None:
        then()


def link(*numbers: int) -> None:
    """On a tool page: the lesson's steps about it, side by side."""
    for col, n in zip(st.columns(len(numbers)), numbers):
        col.page_link(site.LESSON.script, label=_("Lesson, step {n}: {title}", n=n, title=_(STEPS[n - 1].title)), icon="🎓",
                     query_params={url.LESSON: str(n), url.LANG: language()})


def steps_bar(n: int, where: str, on_move: Callable[[], None] | None = None) -> None:
    """Back, the step list and Next; drawn at the top and the bottom of the step. `on_move` is
    called when the learner moves by hand (the class's follow mode ends there)."""
    back_col, list_col, next_col = st.columns([1, 4, 1], vertical_alignment="bottom")
    back_col.button(_("← Back"), key=f"lesson_back:{where}", disabled=n == 1, on_click=go, args=(n - 1, on_move),
                    width="stretch")
    next_col.button(_("Next →"), key=f"lesson_next:{where}", disabled=n == len(STEPS), on_click=go, args=(n + 1, on_move),
                    type="primary", width="stretch")
    if where == "top":  # the options are the words themselves: a format_func's words would stay in the old language
        labels = [_("{n} of {total}: {title}", n=i + 1, total=len(STEPS), title=_(step.title))
                  for i, step in enumerate(STEPS)]
        st.session_state[STEP_LIST_KEY] = labels[n - 1]
        list_col.selectbox(_("Step"), labels, key=STEP_LIST_KEY, label_visibility="collapsed",
                           on_change=lambda: go(labels.index(st.session_state[STEP_LIST_KEY]) + 1, on_move))
    else:
        list_col.progress(n / len(STEPS), text=_("Step {n} of {total}", n=n, total=len(STEPS)))
