"""The class this session is in, as every page holds it: the server's classes, the class code in
the address (?class=K7Q2, so that a refresh or a page change keeps it), the teacher's key and who
posts. The board page draws it (views.board); Train and Experiments post to it (parts.post); the
lesson follows it (parts.class_lesson).

The teacher's key never travels in the address and is never drawn: a projector shows the address bar
and the page to the whole room. A teacher's link opened in a browser hands the key over and leaves the
address at once; the teacher's browser then keeps it in a cookie of this site that a refresh sends
back (views.board writes it). The server keeps only a salted digest of it (minigpt.serve.classes.board).

A learner is who their browser is in the class, with no account and no name: a random token that
this session makes, or takes from the browser's cookie for the class. The first page of a session in
a class writes it there once, so that a refresh, a second tab and a server restart are still the same
learner (one answer per step, the same limit on posts); with cookies off, it lasts the session. The
server keeps only its digest under the class's salt (ClassBoard.learner_tag); the token is never
drawn and never in the address.
"""
from __future__ import annotations

import json
import re
import secrets

import streamlit as st

from minigpt.serve import CLASS_IDLE_SECONDS, CODE_ALPHABET, CODE_LENGTH, BoardError, BoardView, Classes

from app.chrome import url
from app.chrome.i18n import error_text
from app.state import runs, serving

CLASS_KEY = "board_class"       # session_state: the code of the class this session joined
TEACHER_KEY = "board_teacher"   # session_state: (code, key) of the class this browser started
POSTS_KEY = "board_posts"       # session_state: {post id: its key} for the runs this session posted
LEARNER_KEY = "board_learner"   # session_state: {class code: this browser's learner token in it}
LEARNER_SENT_KEY = "board_learner_sent"  # session_state: the classes whose learner cookie this session wrote
URL_READ_KEY = "board_url_read"
NOTICE_KEY = "board_notice"
COOKIE_PREFIX = "minigpt_teacher_"    # + the class code: the browser's cookie holding its teacher's key
COOKIE_SECONDS = CLASS_IDLE_SECONDS     # as long as an idle class lasts
LEARNER_PREFIX = "minigpt_learner_"   # + the class code: the browser's cookie holding its learner token there
# a class has no set end (it lasts while anyone in it is active): a learner's token is kept a week,
# longer than any lesson; it links nothing outside its class
LEARNER_COOKIE_SECONDS = 7 * 24 * 3600
LEARNER_BOX = "board_learner_cookie"   # the hidden container of the script that writes it
HIDE_BOX = f".st-key-{LEARNER_BOX} {{ display: none }}"
TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")  # a learner token as secrets.token_urlsafe makes it


def classes() -> Classes:
    """Every class on this server (the server's: state.serving), with those the store kept."""
    return serving.server().classes


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
    if code:
        keep_learner(code)


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


def learner(code: str | None = None) -> str:
    """Who this browser is in class `code` (the session's class by default): the token its cookie
    sent when the session began, or one this session made (keep_learner writes it there)."""
    code = code or st.session_state.get(CLASS_KEY) or ""
    tokens = st.session_state.setdefault(LEARNER_KEY, {})
    if code not in tokens:
        sent = cookies().get(LEARNER_PREFIX + code, "")
        tokens[code] = sent if TOKEN.fullmatch(sent) else secrets.token_urlsafe(16)
    return tokens[code]


def keep_learner(code: str) -> None:
    """Once a session, for a learner in a class whose browser has no token for it yet: write the
    session's token into the browser's cookie for the class. The script sits in a hidden container
    and is gone from the page at the next redraw; where cookies are off, nothing is kept and nothing
    need be said (the session stays one learner)."""
    written = st.session_state.setdefault(LEARNER_SENT_KEY, [])
    if code in written or teacher_key(code) is not None or not is_code(code):
        return
    written.append(code)
    token = learner(code)
    if cookies().get(LEARNER_PREFIX + code) == token:
        return
    # Strict: no other site's page sends it along; no Secure flag, which a school server on plain http would
    # refuse to keep (as the teacher's key, views.board)
    cookie = f"{LEARNER_PREFIX}{code}={token}; path=/; max-age={LEARNER_COOKIE_SECONDS}; SameSite=Strict"
    with st.sidebar.container(key=LEARNER_BOX):
        # the CSS as markdown, drawn at once: st.html shows a placeholder until its code has loaded
        st.markdown(f"<style>{HIDE_BOX}</style>", unsafe_allow_html=True)
        st.html(f"<script>document.cookie = {json.dumps(cookie)};</script>", unsafe_allow_javascript=True)


def is_code(code: str) -> bool:
    """A code as the server makes them: nothing else goes into a cookie's name."""
    return len(code) == CODE_LENGTH and all(c in CODE_ALPHABET for c in code)


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
