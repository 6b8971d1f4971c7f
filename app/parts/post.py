"""Posting a run to the class board, on Train and Experiments: under a name the learner chooses,
and under the button, for as long as the run is on the board, the name it is there under."""
from __future__ import annotations

import streamlit as st

from minigpt.serve.board import MAX_NAME, BoardError

from app.chrome.i18n import _, error_text
from app.chrome.text import md
from app.state import runs
from app.state.classroom import CLASS_KEY, POSTS_KEY, board_view, classes, learner


def post_button(entry, owner: bool) -> None:
    """On Train and Experiments, for a session in a class that owns a run: post it under a name."""
    code = st.session_state.get(CLASS_KEY)
    if not code or entry is None or not owner:
        return
    name_col, button_col = st.columns([3, 1], vertical_alignment="bottom")
    name = name_col.text_input(_("Name on the class board"), key="board_post_name", max_chars=MAX_NAME,
                               help=_("Only this name, the run's settings, curves and samples are shown."))
    if button_col.button(_("Post to the class board"), key="board_post",
                         help=_("Class {code}: your run joins everyone's chart. Withdraw it there at any time.",
                                code=code)):
        own = st.session_state.get(runs.OWN_RUN_KEY)
        facts = entry.facts
        try:
            post_id, post_key = classes().post(code, entry, own[1] if own else None, name, learner=learner(),
                                               corpus=facts.corpus if facts is not None else "")
        except BoardError as err:
            st.error(md(error_text(err)))
            return
        mine = st.session_state.setdefault(POSTS_KEY, {})
        mine[post_id] = post_key or mine.get(post_id)  # a renamed post's key was given out when it was posted
        st.toast(_("Posted to the board of class {code}.", code=code))
    posted(code, entry)


def posted(code: str, entry) -> None:
    """Under the post button, for as long as the run is on the board: under which name. A toast alone
    goes after a few seconds, or sooner when the page draws itself again (the run has just finished)."""
    try:
        rows = board_view(code).rows
    except BoardError:  # the class has ended: the board page says so
        return
    # only its owner posts a run: any post of it is this session's, from this visit or an earlier one
    names = [row.label for row in rows if row.run_id == entry.run_id]
    if names:
        st.caption(_("Your run is on the board of class {code} as {name}.", code=code, name=md(names[0])))
