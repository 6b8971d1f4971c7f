"""The class this session is in, as every page holds it: the server's classes, the class code in
the address (?class=K7Q2, so that a refresh or a page change keeps it), the teacher's key and who
posts. The board page draws it (views.board); Train and Experiments post to it (parts.post); the
lesson follows it (parts.class_lesson).

The teacher's key never travels in the address and is never drawn: a projector shows the address bar
and the page to the whole room. A teacher's link opened in a browser hands the key over and leaves the
address at once; the teacher's browser then keeps it in a cookie of this site that a refresh sends
back (views.board writes it). The server keeps only a salted digest of it (minigpt.serve.board).
"""
from __future__ import annotations

import secrets

import streamlit as st

from minigpt.serve.board import CLASS_IDLE_SECONDS, BoardError, BoardView, Classes

from app.chrome import url
from app.chrome.i18n import error_text
from app.state import database, runs

CLASS_KEY = "board_class"       # session_state: the code of the class this session joined
TEACHER_KEY = "board_teacher"   # session_state: (code, key) of the class this browser started
POSTS_KEY = "board_posts"       # session_state: {post id: its key} for the runs this session posted
LEARNER_KEY = "board_learner"   # session_state: who posts, for the limit per learner (no account, no name)
URL_READ_KEY = "board_url_read"
NOTICE_KEY = "board_notice"
COOKIE_PREFIX = "minigpt_teacher_"    # + the class code: the browser's cookie holding its teacher's key
COOKIE_SECONDS = CLASS_IDLE_SECONDS     # as long as an idle class lasts
REFRESH_SECONDS = 5.0          # a board's redraws while a run on it trains (three times as far apart when none does)


@st.cache_resource(show_spinner=False)
def classes() -> Classes:
    """Every class on this server, one per process, with those the store kept (state.database); a
    view is checked for moved runs at most every two seconds (viewers redraw every REFRESH_SECONDS)."""
    return Classes(refresh_seconds=REFRESH_SECONDS / 2.5, store=database.store())


def read_and_sync_url() -> None:
    """Every page: on a session's first page run, join the class in ?class= (and take a teacher's
    &teacher= key out of the address, into the session); then keep the class in the address."""
    ss = st.session_state
    if URL_READ_KEY not in ss:
        ss[URL_READ_KEY] = True
        code = st.query_params.get(url.CLASS, "").strip().upper()[:16]
        if code:
            ss[CLASS_KEY] = code
            become_teacher(code, st.query_params.get(url.TEACHER))
    code = ss.get(CLASS_KEY)
    if code and teacher_key(code) is None:  # a refresh: this browser's cookie hands the key back
        become_teacher(code, cookies().get(COOKIE_PREFIX + code))
    if url.TEACHER in st.query_params:
        del st.query_params[url.TEACHER]
    code = ss.get(CLASS_KEY)
    if code and st.query_params.get(url.CLASS) != code:
        st.query_params[url.CLASS] = code
    elif not code and url.CLASS in st.query_params:
        del st.query_params[url.CLASS]


def cookies() -> dict[str, str]:
    """The cookies this browser sent when the session began (none in a test without a browser)."""
    try:
        return dict(st.context.cookies or {})
    except Exception:  # noqa: BLE001 - no request behind the session
        return {}


def become_teacher(code: str, key: str | None) -> None:
    """Hold the class's teacher key in this session, if `key` is it."""
    if not key:
        return
    try:
        board = classes().find(code, key)
    except BoardError:
        return
    if board.is_teacher(key):
        st.session_state[TEACHER_KEY] = (board.code, key)


def teacher_key(code: str) -> str | None:
    held = st.session_state.get(TEACHER_KEY)
    return held[1] if held and held[0] == code else None


def learner() -> str:
    return st.session_state.setdefault(LEARNER_KEY, secrets.token_urlsafe(9))


def start_class() -> None:
    try:
        opened = classes().open()
    except BoardError as err:
        st.session_state[NOTICE_KEY] = error_text(err)
        return
    st.session_state[CLASS_KEY] = opened.code
    st.session_state[TEACHER_KEY] = (opened.code, opened.teacher_key)


def join_class() -> None:
    code = st.session_state.get("board_join_code", "").strip().upper()
    if code:
        st.session_state[CLASS_KEY] = code


def leave_class() -> None:
    st.session_state.pop(CLASS_KEY, None)
    if url.CLASS in st.query_params:  # a code that is not there leaves the address too
        del st.query_params[url.CLASS]


def erase_class(code: str, key: str) -> None:
    """The teacher erases the class's data: the class, its posts and answers, and the runs posted to it,
    from memory and from the store."""
    posted = classes().close(code, key, erase=True)
    runs.registry().forget(posted)
    leave_class()


def board_view(code: str) -> BoardView:
    """The class's board now: its runs as the registry has them, a waiting run with its place in line."""
    registry = runs.registry()
    return classes().view(code, registry.get, registry.place)
