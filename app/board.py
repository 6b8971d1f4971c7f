"""The class board in the app: starting a class, joining it from its link, posting and
withdrawing a run, the teacher's controls, and the board itself (one live chart of every posted
run, the settings that differ, each run's latest sample, the challenge's ranking, and the HTML and
CSV to take away).

The class code travels in the address (?class=K7Q2), so a refresh or a page change keeps the
class. The teacher's key does not: a projected address bar would show it to the whole room. The
teacher's browser session holds it, and a teacher's link (shown to the teacher alone, folded)
gives it back after a refresh; the key leaves the address bar as soon as it is read.
"""
from __future__ import annotations

import secrets

import streamlit as st

from minigpt import BUILTIN_CORPORA, N_
from minigpt.lab.run_records import csv_text
from minigpt.serve.board import MAX_NAME, BoardError, BoardView, Challenge, Classes

from . import runs, url
from .charts import config as chart_config
from .charts import html_button, swipe_hint
from .i18n import _, error_text, language, n_
from .navigation import on_every_page
from .text import md, ordinal

CLASS_KEY = "board_class"       # session_state: the code of the class this session joined
TEACHER_KEY = "board_teacher"   # session_state: (code, key) of the class this browser started
POSTS_KEY = "board_posts"       # session_state: {post id: its key} for the runs this session posted
LEARNER_KEY = "board_learner"   # session_state: who posts, for the limit per learner (no account, no name)
URL_READ_KEY = "board_url_read"
NOTICE_KEY = "board_notice"
MOVING = ("running", "waiting", "starting")  # states that change without anyone pressing anything
REFRESH_SECONDS = 5.0          # a board's redraws while a run on it trains (three times as far apart when none does)
COLUMNS = {  # the table's own columns (the settings that differ are named as on Experiments)
    "run": N_("run"), "best_val": N_("best val loss"), "steps": N_("steps"), "tokens": N_("characters seen"),
    "params": N_("parameters"), "seconds": N_("time (s)"),
}
STATES = {"waiting": N_("waiting"), "starting": N_("starting"),
          "running": N_("training"), "paused": N_("paused"), "finished": N_("finished"), "stopped": N_("stopped"),
          "error": N_("stopped by an error"), "released": N_("ended (its owner left)"), "idle": N_("starting"),
          "closed": N_("ended (its owner left)")}


@st.cache_resource(show_spinner=False)
def classes() -> Classes:
    """Every class on this server, one per process; a view is checked for moved runs at most
    every two seconds (viewers redraw every REFRESH_SECONDS)."""
    return Classes(refresh_seconds=REFRESH_SECONDS / 2.5)


@on_every_page
def read_and_sync_url() -> None:
    """Every page: on a session's first page run, join the class in ?class= (and take a teacher's
    &teacher= key out of the address, into the session); then keep the class in the address."""
    ss = st.session_state
    if URL_READ_KEY not in ss:
        ss[URL_READ_KEY] = True
        code = st.query_params.get(url.CLASS, "").strip().upper()[:16]
        if code:
            ss[CLASS_KEY] = code
            key = st.query_params.get(url.TEACHER)
            try:
                board = classes().find(code, key)
            except BoardError:
                board = None
            if board is not None and board.is_teacher(key):
                ss[TEACHER_KEY] = (board.code, key)
    if url.TEACHER in st.query_params:
        del st.query_params[url.TEACHER]
    code = ss.get(CLASS_KEY)
    if code and st.query_params.get(url.CLASS) != code:
        st.query_params[url.CLASS] = code
    elif not code and url.CLASS in st.query_params:
        del st.query_params[url.CLASS]


def teacher_key(code: str) -> str | None:
    held = st.session_state.get(TEACHER_KEY)
    return held[1] if held and held[0] == code else None


def learner() -> str:
    return st.session_state.setdefault(LEARNER_KEY, secrets.token_urlsafe(9))


def start_class() -> None:
    try:
        board = classes().open()
    except BoardError as err:
        st.session_state[NOTICE_KEY] = error_text(err)
        return
    st.session_state[CLASS_KEY] = board.code
    st.session_state[TEACHER_KEY] = (board.code, board.teacher_key)


def join_class() -> None:
    code = st.session_state.get("board_join_code", "").strip().upper()
    if code:
        st.session_state[CLASS_KEY] = code


def leave_class() -> None:
    st.session_state.pop(CLASS_KEY, None)


def start_or_join(heading: str | None = None) -> None:
    """No class (or one that is not there): start one, or type a code."""
    if heading:
        st.warning(heading)
    start_col, code_col, join_col = st.columns([1.3, 1.4, 0.8], vertical_alignment="bottom")
    start_col.button(_("Start a class"), key="board_start", type="primary", on_click=start_class,
                     help=_("You get a short code and a link for the class; this browser alone can hide entries, "
                            "set a challenge and close the class."))
    code_col.text_input(_("Class code"), key="board_join_code", max_chars=8, placeholder="K7Q2")
    join_col.button(_("Join"), key="board_join", on_click=join_class)


def board_page() -> None:
    ss = st.session_state
    notice = ss.pop(NOTICE_KEY, None)
    if notice:
        st.warning(md(notice))
    code = ss.get(CLASS_KEY)
    if not code:
        st.info(_("A class board sets every learner's run on one chart. A teacher starts a class and shares its "
                  "link; each learner who opens it can post their runs from Train or Experiments."))
        start_or_join()
        return
    key = teacher_key(code)
    try:
        board = classes().find(code, key)
    except BoardError as err:
        leave_class()
        start_or_join(md(error_text(err)))
        return
    link = url.link(**{url.CLASS: board.code, url.LANG: language()})
    st.header(_("Class {code}", code=board.code), anchor=False)
    st.markdown(_("**The class's link** (open it to join; copy it with the icon on the right):"))
    st.code(link, language=None)
    if key is not None:
        teacher_panel(board.code, key)
    live_board(board.code, key)
    my_posts(board.code)
    if key is None:
        st.button(_("Leave this class"), key="board_leave", on_click=leave_class, type="tertiary")


def board_view(code: str) -> BoardView:
    """The class's board now: its runs as the registry has them, a waiting run with its place in line."""
    registry = runs.registry()
    return classes().view(code, registry.get, registry.place)


def state_text(row) -> str:
    """A run's state on the board, a waiting run's place in line with it."""
    if row.state == "waiting" and row.place is not None:
        return _("waiting, {place} in line", place=ordinal(row.place))
    return _(STATES.get(row.state, row.state))


def progress_line(rows) -> str:
    """How far the class has got, at a glance: "3 waiting · 2 training · 5 done"."""
    waiting = sum(row.state in ("waiting", "starting") for row in rows)
    training = sum(row.state in ("running", "paused") for row in rows)
    done = len(rows) - waiting - training
    return " · ".join([n_("{n} run waiting for a training slot", "{n} runs waiting for a training slot", waiting),
                       n_("{n} training", "{n} training", training), n_("{n} done", "{n} done", done)])


def live_board(code: str, key: str | None) -> None:
    view = board_view(code)
    training = any(row.state in MOVING for row in view.rows)

    @st.fragment(run_every=REFRESH_SECONDS if training else REFRESH_SECONDS * 3)
    def board() -> None:
        try:
            now = board_view(code)
        except BoardError as err:  # the teacher closed it meanwhile
            st.warning(md(error_text(err)))
            return
        draw(now, teacher=key is not None)
        if any(row.state in MOVING for row in now.rows) != training:
            st.rerun()  # training began or ended: redraw at the other pace

    board()


def draw(view: BoardView, teacher: bool) -> None:
    rows = view.visible()
    if not rows:
        st.info(_("No run is on the board yet. A learner who has joined posts one from the Train page (or "
                  "Experiments) with “Post to the class board”."))
        return
    from minigpt.viz import board_title
    st.markdown(f"**{board_title(_)}**")
    st.caption(progress_line(rows))
    st.plotly_chart(figure(view), key="board_chart", config=chart_config())
    if view.challenge is not None:
        ranking(view)
    st.markdown(_("**The runs** (the settings that differ between them, and what each reached):"))
    table = shown_table(view)
    swipe_hint("board_table")
    st.dataframe(table, hide_index=True, key="board_table", column_config={
        _(COLUMNS["run"]): st.column_config.TextColumn(_(COLUMNS["run"]), pinned=True),
        _(COLUMNS["best_val"]): st.column_config.NumberColumn(_(COLUMNS["best_val"]), format="%.3f"),
    })
    st.markdown(_("**Each run's latest sample:**"))
    swipe_hint("board_samples")
    st.dataframe(samples_table(view), hide_index=True, key="board_samples")
    if not teacher:  # the exports are the teacher's: a viewer's redraw does without them
        return
    html_col, csv_col = st.columns(2)
    with html_col:
        html_button([figure(view, titled=True)], _("Class {code}", code=view.code), f"class-{view.code}")
    csv_col.download_button(_("Download the table (.csv)"), data=lambda: csv_text(table),
                            file_name=f"minigpt-class-{view.code}.csv", mime="text/csv", on_click="ignore",
                            key="board_csv", type="tertiary", icon=":material/download:")


@st.cache_resource(show_spinner=False, max_entries=64)
def _figure(code: str, view_key: tuple, lang: str, titled: bool, _view: BoardView):
    from minigpt.viz import board_figure
    return board_figure(_view.visible(), tr=_, titled=titled)


def figure(view: BoardView, titled: bool = False):
    """The board's chart, built once per update and language for every viewer (titled for the
    HTML export; on the page, the title is a line above it, which wraps on a phone)."""
    return _figure(view.code, view.key, language(), titled, view)


@st.cache_resource(show_spinner=False, max_entries=64)
def _table(code: str, view_key: tuple, lang: str, _view: BoardView):
    from .compare import SETTING_LABELS, setting_text
    table = _view.table()
    settings = [name for name in table.columns if name in SETTING_LABELS]
    table[settings] = table[settings].map(setting_text)
    return table.rename(columns={**{name: _(label) for name, label in SETTING_LABELS.items()},
                                 **{name: _(label) for name, label in COLUMNS.items()}})


@st.cache_resource(show_spinner=False, max_entries=64)
def _samples(code: str, view_key: tuple, lang: str, _view: BoardView):
    import pandas as pd
    rows = _view.visible()
    return pd.DataFrame({_("run"): [row.label for row in rows],
                         _("state"): [state_text(row) for row in rows],
                         _("latest sample"): [row.sample.replace("\n", " ⏎ ") for row in rows]})


def samples_table(view: BoardView):
    """Each run's latest sample, in the page's language, built once per update and language."""
    return _samples(view.code, view.key, language(), view)


def shown_table(view: BoardView):
    """The board's table with its columns in the page's language, built once per update and language."""
    return _table(view.code, view.key, language(), view)


def ranking(view: BoardView) -> None:
    challenge = view.challenge
    st.markdown("### " + _("Challenge: the lowest validation loss") + "  \n" + challenge_text(challenge))
    ranked = view.ranking()
    if ranked:
        st.markdown("  \n".join(_("**{place}.** {run}: {loss:.3f}", place=i, run=md(row.label), loss=row.best_val)
                                for i, row in enumerate(ranked, start=1)))
    else:
        st.caption(_("No run meets the challenge yet."))
    refused = [row for row in view.visible() if row.refusals]
    if refused:
        st.markdown(_("**Outside the challenge:**") + "  \n" + "  \n".join(
            _("{run}: {reasons}", run=md(row.label), reasons="; ".join(error_text(r) for r in row.refusals))
            for row in refused))


def challenge_text(challenge: Challenge) -> str:
    parts = []
    if challenge.corpus is not None:
        parts.append(_("on {corpus}", corpus=challenge.corpus))
    if challenge.max_steps is not None:
        parts.append(_("within {steps:,} steps", steps=challenge.max_steps))
    if challenge.max_params is not None:
        parts.append(_("with at most {params:,} parameters", params=challenge.max_params))
    return ", ".join(parts) if parts else _("any run")


def teacher_panel(code: str, key: str) -> None:
    """What only the teacher's browser sees: the challenge, hiding and pinning, closing."""
    with st.expander(_("Teacher: challenge, hide and pin, close the class")):
        st.caption(_("Only this browser sees this. Your teacher's link gives the controls back after a refresh; "
                     "keep it to yourself:"))
        st.code(url.link(**{url.CLASS: code, url.TEACHER: key, url.LANG: language()}), language=None)
        with st.form("board_challenge", border=False):
            corpus_col, steps_col, params_col = st.columns(3)
            corpora = [None, *BUILTIN_CORPORA]
            corpus = corpus_col.selectbox(_("Corpus"), corpora, key="challenge_corpus",
                                          format_func=lambda c: _("any") if c is None else c)
            steps = steps_col.number_input(_("At most this many steps (0: any)"), 0, 100_000, 300, step=50,
                                           key="challenge_steps")
            params = params_col.number_input(_("At most this many parameters (0: any)"), 0, 10_000_000, 150_000,
                                             step=10_000, key="challenge_params")
            set_col, clear_col = st.columns(2)
            if set_col.form_submit_button(_("Set the challenge")):
                classes().set_challenge(code, key, Challenge(corpus, int(steps) or None, int(params) or None))
            if clear_col.form_submit_button(_("No challenge")):
                classes().set_challenge(code, key, None)
        view = board_view(code)
        if view.rows:
            by_id = {row.post_id: row for row in view.rows}
            pick_col, hide_col, pin_col = st.columns([2, 1, 1], vertical_alignment="bottom")
            hidden = " " + _("(hidden)")
            chosen = pick_col.selectbox(_("Run"), list(by_id), key="board_pick",
                                        format_func=lambda i: by_id[i].label + (hidden if by_id[i].hidden else ""))
            row = by_id[chosen]
            if hide_col.button(_("Show again") if row.hidden else _("Hide"), key="board_hide"):
                classes().hide(code, key, chosen, not row.hidden)
                st.rerun()
            if pin_col.button(_("Unpin") if row.pinned else _("Pin to the top"), key="board_pin"):
                classes().pin(code, key, None if row.pinned else chosen)
                st.rerun()
        if st.button(_("Close the class"), key="board_close",
                     help=_("The board and its code end for everyone; the runs themselves go on.")):
            classes().close(code, key)
            leave_class()
            st.rerun()


def my_posts(code: str) -> None:
    """The runs this session posted (or whose run it owns, after a refresh), each with Withdraw."""
    mine = st.session_state.get(POSTS_KEY, {})
    own = st.session_state.get(runs.OWN_RUN_KEY)
    view = board_view(code)
    posted = [row for row in view.rows if row.post_id in mine or own and row.run_id == own[0]]
    if not posted:
        return
    st.markdown(_("**Your runs on the board:**"))
    for row in posted:
        name_col, button_col = st.columns([3, 1], vertical_alignment="center")
        name_col.markdown(md(row.label))
        if button_col.button(_("Withdraw"), key=f"board_withdraw_{row.post_id}"):
            withdraw(code, row.post_id)
            st.rerun()


def withdraw(code: str, post_id: str) -> None:
    mine = st.session_state.setdefault(POSTS_KEY, {})
    own = st.session_state.get(runs.OWN_RUN_KEY)
    try:
        classes().withdraw(code, post_id, mine.get(post_id) or (own[1] if own else None))
    except BoardError as err:
        st.error(md(error_text(err)))
        return
    mine.pop(post_id, None)


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
        st.session_state.setdefault(POSTS_KEY, {})[post_id] = post_key
        st.toast(_("Posted to the board of class {code}.", code=code))
    posted(code, entry)


def posted(code: str, entry) -> None:
    """Under the post button, for as long as the run is on the board: under which name. A toast alone
    goes after a few seconds, or sooner when the page draws itself again (the run has just finished)."""
    mine = st.session_state.get(POSTS_KEY, {})
    try:
        rows = board_view(code).rows
    except BoardError:  # the class has ended: the board page says so
        return
    names = [row.label for row in rows if row.post_id in mine and row.run_id == entry.run_id]
    if names:
        st.caption(_("Your run is on the board of class {code} as {name}.", code=code, name=md(names[0])))
