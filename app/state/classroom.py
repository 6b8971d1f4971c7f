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
a class writes it there, kept until the class ends (a term at most), so that a refresh, a second tab,
a server restart and next week's lesson are still the same learner (one answer per step, the same
limit on posts, their runs); with cookies off, it lasts the session. The token is also the learner's
personal code: shown to them alone (parts.course), it makes another browser the same learner
(claim_learner). The server keeps only its digest under the class's salt (ClassBoard.learner_tag);
the token is never in the address. A run a learner starts in the class has an owner key derived
from the token and a salt the server keeps (minigpt.serve.run_key), so their runs come back with
them, on any browser that is them.
"""
from __future__ import annotations

import json
import re
import secrets
import time

import streamlit as st

from minigpt.serve import CODE_ALPHABET, CODE_LENGTH, BoardError, BoardView, Classes, new_learner_token, run_key

from app.chrome import url
from app.chrome.i18n import error_text
from app.state import runs, serving

CLASS_KEY = "board_class"       # session_state: the code of the class this session joined
TEACHER_KEY = "board_teacher"   # session_state: (code, key) of the class this browser started
POSTS_KEY = "board_posts"       # session_state: {post id: its key} for the runs this session posted
LEARNER_KEY = "board_learner"   # session_state: {class code: this browser's learner token in it}
LEARNER_SENT_KEY = "board_learner_sent"  # session_state: {class code: the learner token its cookie holds now}
URL_READ_KEY = "board_url_read"
NOTICE_KEY = "board_notice"
COOKIE_PREFIX = "minigpt_teacher_"    # + the class code: the browser's cookie holding its teacher's key
LEARNER_PREFIX = "minigpt_learner_"   # + the class code: the browser's cookie holding its learner token there
FORGET_KEY = "board_forget"           # session_state: a class whose cookies (teacher's, learner's) the next run clears
LEARNER_BOX = "board_learner_cookie"   # the hidden container of the script that writes it
HIDE_BOX = f".st-key-{LEARNER_BOX} {{ display: none }}"
# a learner token: new_learner_token's (letters and digits), or secrets.token_urlsafe's, which cookies
# written before personal codes hold
TOKEN = re.compile(r"[A-Za-z0-9_-]{12,64}")


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
    sent when the session began, or one this session made or claimed (keep_learner writes it there)."""
    code = code or st.session_state.get(CLASS_KEY) or ""
    tokens = st.session_state.setdefault(LEARNER_KEY, {})
    if code not in tokens:
        sent = cookies().get(LEARNER_PREFIX + code, "")
        tokens[code] = sent if TOKEN.fullmatch(sent) else new_learner_token()
    return tokens[code]


def keep_learner(code: str) -> None:
    """For a learner in a class, once a session and again when the session's token changes (a claimed
    personal code): tell the class they are here (Classes.seen), and where the browser did not send
    that token, write it into the browser's cookie for the class. The script sits in a hidden container
    and is gone from the page at the next redraw; where cookies are off, nothing is kept and nothing
    need be said (the session stays one learner)."""
    if teacher_key(code) is not None or not is_code(code):
        return
    token = learner(code)
    held = st.session_state.setdefault(LEARNER_SENT_KEY, {})
    if held.get(code) == token:
        return
    browser = held.get(code, cookies().get(LEARNER_PREFIX + code))  # what the browser holds now
    held[code] = token
    seen(code, token)
    if browser == token:
        return
    # Strict: no other site's page sends it along; no Secure flag, which a school server on plain http would
    # refuse to keep (as the teacher's key, views.board)
    cookie = f"{LEARNER_PREFIX}{code}={token}; path=/; max-age={cookie_seconds(code)}; SameSite=Strict"
    with st.sidebar.container(key=LEARNER_BOX):
        # the CSS as markdown, drawn at once: st.html shows a placeholder until its code has loaded
        st.markdown(f"<style>{HIDE_BOX}</style>", unsafe_allow_html=True)
        st.html(f"<script>document.cookie = {json.dumps(cookie)};</script>", unsafe_allow_javascript=True)


def seen(code: str, token: str) -> None:
    try:
        classes().seen(code, token)
    except BoardError:  # a class that is not there: the board says so
        pass


def cookie_seconds(code: str) -> int:
    """How long a cookie of class `code` is kept (a learner's token, the teacher's key): until the
    class ends, a term after it opened (the server's class_days) unless its teacher closes it first."""
    try:
        return max(0, int(classes().ends_at(code) - time.time()))
    except BoardError:
        return 0



def claim_learner(code: str, typed: str) -> None:
    """This browser becomes the learner whose personal code was typed (from another device of theirs):
    their answers, runs and posts. BoardError, saying why, for a code the class does not know or too
    many wrong tries; this browser then stays who it was."""
    # the wrong tries are counted by this browser's own token, which a refresh keeps
    token = classes().claim(code, typed, asker=learner(code))
    st.session_state.setdefault(LEARNER_KEY, {})[code] = token  # the next page run writes the cookie


def erase_me(code: str) -> None:
    """The learner erases themselves from the class: every post, answer and run of theirs, from memory
    and from the store. This browser is a new learner in the class from now on."""
    token = learner(code)
    forgotten = classes().erase_learner(code, None, learner=token)
    runs.registry().forget(forgotten)
    own = st.session_state.get(runs.OWN_RUN_KEY)
    if own is not None and own[0] in forgotten:  # gone by their own choice: no notice that it went
        del st.session_state[runs.OWN_RUN_KEY]
    st.session_state[LEARNER_KEY][code] = new_learner_token()


def erase_poster(code: str, key: str, post_id: str) -> None:
    """The teacher erases the learner who posted `post_id`: every post, answer and run of theirs."""
    runs.registry().forget(classes().erase_learner(code, key, post_id=post_id))


def class_run_key() -> tuple[str, bytes] | None:
    """For a learner in a class, the owner key of a run they start now and the salt it is derived
    with (the class keeps the salt, never the key); None for the teacher, or outside a class."""
    code = st.session_state.get(CLASS_KEY)
    if not code or not is_code(code) or teacher_key(code) is not None:
        return None
    salt = secrets.token_bytes(16)
    return run_key(learner(code), salt), salt


def note_run(run_id: str, salt: bytes) -> None:
    """The class notes the run this learner started (class_run_key's salt), to list it next week."""
    code = st.session_state.get(CLASS_KEY)
    try:
        classes().note_run(code, learner(code), run_id, salt)
    except BoardError:  # the class has ended meanwhile: the run trains all the same
        pass


def own_runs(code: str) -> list[tuple[str, str]]:
    """The runs this learner started in the class, oldest first: (run id, owner key) each."""
    token = learner(code)
    return [(run_id, run_key(token, salt)) for run_id, salt in classes().learner_runs(code, token)]


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


def forget_browser(code: str) -> None:
    """On a shared computer: this browser forgets who it is in the class (the learner's token, or the
    teacher's key) and leaves it; the board's next run clears the cookies (FORGET_KEY). The learner
    comes back with their personal code, the teacher with their link."""
    ss = st.session_state
    if teacher_key(code) is not None:
        ss.pop(TEACHER_KEY, None)
    # a fresh token, not none: the cookies this session began with would otherwise hand the old one back
    ss.setdefault(LEARNER_KEY, {})[code] = new_learner_token()
    ss[FORGET_KEY] = code
    leave_class()


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
