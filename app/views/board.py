"""The class board in the app: starting a class, joining it from its link, posting and
withdrawing a run, the teacher's controls, and the board itself (one live chart of the posted runs:
every one, or on a lecture hall's board the best, the pinned and the viewer's own over the class in
grey; the settings that differ, the latest samples, the challenge's ranking, and the HTML and CSV to
take away).

The class code travels in the address (?class=K7Q2), so a refresh or a page change keeps the
class. The teacher's key does not, and the page never draws it: a projector shows the address
bar and the page to the whole room. The teacher's browser keeps it, in a cookie of this site
that a refresh sends back (the server keeps only a salted digest of it), and a copy button puts
the teacher's link on the clipboard, for another browser, without showing it; where the
clipboard is blocked (plain http), the link shows only while the button is held down. A
teacher's link opened elsewhere hands the key over, and it leaves the address bar at once.
"""
from __future__ import annotations

import functools
import json
import math

import streamlit as st

from minigpt import BUILTIN_CORPORA, N_
from minigpt.lab.run_records import csv_text
from minigpt.serve import CLASS_CORPUS, COLUMNS, RUN_LABEL, BoardError, BoardView, Challenge

from app.chrome import site, url
from app.chrome.charts import config as chart_config
from app.chrome.charts import html_button, swipe_hint
from app.chrome.i18n import _, error_text, language, n_
from app.chrome.text import md, ordinal, word_list
from app.parts import class_corpus, class_lesson, class_qr, course
from app.parts.post import challenge_text
from app.state import classroom, runs, serving
from app.state.classroom import (
    CLASS_KEY,
    COOKIE_PREFIX,
    FORGET_KEY,
    LEARNER_PREFIX,
    NOTICE_KEY,
    POSTS_KEY,
    board_view,
    classes,
    cookies,
    join_class,
    learner,
    leave_class,
    start_class,
    teacher_key,
)
from app.state.train_settings import SETTING_LABELS, setting_text

COOKIE_SENT_KEY = "board_cookie_sent"  # session_state: the class whose key this session has written to the browser
TAB_KEY = "board_tab"                 # session_state: the teacher's open tab (its label)
MOVING = ("running", "waiting", "starting")  # states that change without anyone pressing anything
# a board of up to this many runs redraws at the full pace, each as many more slows it by as much again: about
# as many viewers watch a board as it has runs, and a lecture hall's redraws must fit one core (bench/class_board.py)
PACE_RUNS = 100
STATES = {"waiting": N_("waiting"), "starting": N_("starting"),
          "running": N_("training"), "paused": N_("paused"), "finished": N_("finished"), "stopped": N_("stopped"),
          "error": N_("stopped by an error"), "released": N_("ended (its owner left)"), "idle": N_("starting"),
          "closed": N_("ended (its owner left)")}


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
    """The board page: start or join a class, or the class's board: the teacher's view or a learner's."""
    ss = st.session_state
    serving.not_saving_warning()
    notice = ss.pop(NOTICE_KEY, None)
    if notice:
        st.warning(md(notice))
    closed = ss.pop(FORGET_KEY, None)
    if closed:
        forget_key(closed)
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
    link = url.link(**{url.CLASS: board.code})  # no language: each learner's browser (or choice) decides
    # the teacher's QR button in the heading's row, not above the board: on a projector the chart starts near the top
    head_col, link_col, *qr_col = st.columns([2, 5, 2] if key else [1, 3], vertical_alignment="center")
    head_col.header(_("Class {code}", code=board.code), anchor=False)
    with link_col:
        st.caption(_("The class's link (open it to join; copy it with the icon on the right):"))
        st.code(link, language=None)
    if key is None:
        learner_view(board.code)
        return
    with qr_col[0]:
        class_qr.qr_button(link)
    teacher_view(board.code, key)


def learner_view(code: str) -> None:
    """A learner's board: where the class is in the lesson, a way to train a run for it, the board of this
    round and earlier ones, and what is theirs in the class (parts.course)."""
    class_lesson.class_line(code)
    st.page_link(site.TRAIN.script, label=_("Train a run for this class"), icon="🏋️",
                 query_params={url.CLASS: code, url.LANG: language()})
    course.round_line(code)
    live_board(code, None)
    my_posts(code)
    earlier_rounds(code, teacher=False)
    course.learner_panel(code)
    st.button(_("Leave this class"), key="board_leave", on_click=leave_class, type="tertiary")
    st.caption(_("This is the learners' view. The teacher's controls come back in the browser that started the "
                 "class, or in another one through the teacher's link copied there."))


def teacher_view(code: str, key: str) -> None:
    """The teacher's board, in four tabs (the board, leading the lesson, the course so far, the class's
    controls), so that on a projector the chart starts near the top."""
    remember_key(code, key)
    board_tab, lesson_tab, course_tab, controls_tab = st.tabs(
        [_("Board"), _("Lead the lesson"), _("Course"), _("Teacher's controls")],
        key=TAB_KEY, on_change="rerun")  # only the open tab runs
    if board_tab.open:
        with board_tab:
            class_lesson.class_line(code)  # where the class is in the lesson, when the teacher leads it
            course.round_line(code)
            live_board(code, key)
            my_posts(code)
            earlier_rounds(code, teacher=True)
    if lesson_tab.open:
        with lesson_tab:
            class_lesson.lead_panel(code, key)
    if course_tab.open:
        with course_tab:
            course.course_panel(code, key)
    if controls_tab.open:
        with controls_tab:
            teacher_panel(code, key)


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
    pace = redraw_seconds(board_view(code))

    @st.fragment(run_every=pace)
    def board() -> None:
        try:
            now = board_view(code)
        except BoardError as err:  # the teacher closed it meanwhile
            st.warning(md(error_text(err)))
            return
        draw(now, teacher=key is not None)
        if redraw_seconds(now) != pace:
            st.rerun()  # training began or ended, or the class grew past a hundred: redraw at the other pace

    board()


def redraw_seconds(view: BoardView) -> float:
    """How often the board redraws itself: every REFRESH_SECONDS while a run on it trains, three times as
    far apart when none does; twice as far apart on a board of more than PACE_RUNS runs, three times on one
    of more than twice as many, and so on."""
    training = any(row.state in MOVING for row in view.rows)
    hundreds = max(1, math.ceil(len(view.rows) / PACE_RUNS))
    return (serving.REFRESH_SECONDS if training else serving.REFRESH_SECONDS * 3) * hundreds


def draw(view: BoardView, teacher: bool) -> None:
    rows = view.visible()
    if not rows:
        st.info(_("No run is on the board yet. A learner who has joined posts one from the Train page (or "
                  "Experiments) with “Post to the class board”: “Train a run for this class” opens it."))
        if view.challenge is not None:  # the class knows its goal before the first post
            ranking(view)
        return
    from minigpt.viz import board_title
    own = own_posts(view)
    chosen = choice(view, own)
    marked = own if chosen.summarised else frozenset()  # a small board marks no one's: one chart for every viewer
    st.markdown(f"**{board_title(_)}**")
    st.caption(progress_line(rows))
    st.plotly_chart(figure(view, own=marked), key="board_chart", config=chart_config())
    if chosen.summarised:
        st.caption(summary_text(view, chosen, own))
    drawn = {row.label for row in chosen.drawn}
    for group in view.coinciding():
        group = [label for label in group if label in drawn]  # on a large board, those in the band are not lines
        if len(group) < 2:
            continue
        st.caption(n_("{runs} trained exactly alike (the same settings and seed): their curves lie on one another, "
                      "so the chart draws one line for {n} run.",
                      "{runs} trained exactly alike (the same settings and seed): their curves lie on one another, "
                      "so the chart draws one line for {n} runs.", len(group), runs=word_list([md(g) for g in group])))
    if view.challenge is not None:
        ranking(view, chosen)
    if chosen.summarised:
        st.markdown(_("**The runs**, the lowest validation loss first (the settings that differ between them, and "
                      "what each reached):"))
    else:
        st.markdown(_("**The runs** (the settings that differ between them, and what each reached):"))
    runs_table(shown_arrow(view, best_first=chosen.summarised), "board_table")
    if chosen.summarised:
        st.markdown(_("**The latest sample of each run drawn on the chart** ({shown} of {total}):",
                      shown=len(chosen.drawn), total=chosen.total))
    else:
        st.markdown(_("**Each run's latest sample:**"))
    swipe_hint("board_samples")
    st.dataframe(samples_table(view, chosen.drawn if chosen.summarised else None), hide_index=True, key="board_samples")
    if not teacher:  # the exports are the teacher's: a viewer's redraw does without them
        return
    table = shown_table(view, best_first=chosen.summarised)
    html_col, csv_col = st.columns(2)
    with html_col:
        html_button([figure(view, titled=True, own=marked)], _("Class {code}", code=view.code), f"class-{view.code}")
    csv_col.download_button(_("Download the table (.csv)"), data=lambda: csv_text(table),
                            file_name=f"minigpt-class-{view.code}.csv", mime="text/csv", on_click="ignore",
                            key="board_csv", type="tertiary", icon=":material/download:")


def own_posts(view: BoardView) -> frozenset[str]:
    """The posts on the board that are this browser's: posted in this session, by this learner (their
    token), or of the run this session owns."""
    mine = st.session_state.get(POSTS_KEY, {})
    own = st.session_state.get(runs.OWN_RUN_KEY)
    try:
        theirs = set(classes().posts_of(view.code, learner(view.code)))
    except BoardError:  # the class has ended meanwhile: the board says so at its next redraw
        theirs = set()
    return frozenset(row.post_id for row in view.rows
                     if row.post_id in mine or row.post_id in theirs or own and row.run_id == own[0])


def choice(view: BoardView, own: frozenset[str]):
    """The runs the chart draws as curves (viz.board_choice), for this viewer."""
    from minigpt.viz import board_choice
    return board_choice(view.visible(), own)


def summary_text(view: BoardView, chosen, own: frozenset[str]) -> str:
    """Under a large board's chart: which runs are drawn, and what the grey stands for."""
    from minigpt.viz import BOARD_BAND
    low, high = BOARD_BAND
    # above BOARD_ALL runs: the best and the whole class are always several, so no plural forms
    said = [_("The {best} runs with the lowest validation loss, of {total}, are drawn in colour. All {total} are in "
              "grey: the dashed line is their median validation loss at each step, the band runs from their {low}th "
              "to their {high}th percentile.", best=chosen.best, total=chosen.total, low=low, high=high)]
    if view.challenge is not None:
        said.append(_("The runs that meet the challenge come first."))
    extra = chosen.drawn[chosen.best:]
    if any(row.pinned for row in extra):
        said.append(_("The pinned run is drawn too."))
    mine = sum(row.post_id in own for row in chosen.drawn)
    if mine:
        said.append(n_("Your run is drawn thicker, marked “(yours)”.",
                       "Your {n} runs are drawn thicker, marked “(yours)”.", mine))
    # sentences one after another: Chinese runs one on into the next, with no space
    return functools.reduce(lambda earlier, later: _("{earlier} {later}", earlier=earlier, later=later), said)


def runs_table(table, key: str) -> None:
    """The board's table of runs, its name column pinned (the live board's and an earlier round's)."""
    swipe_hint(key)
    st.dataframe(table, hide_index=True, key=key, column_config={
        _(RUN_LABEL): st.column_config.TextColumn(_(RUN_LABEL), pinned=True),
        _(COLUMNS["best_val"].label): st.column_config.NumberColumn(_(COLUMNS["best_val"].label), format="%.3f"),
    })


def earlier_rounds(code: str, teacher: bool) -> None:
    """Below the board, once the teacher has started a new round: an earlier round's table, read-only
    (its runs as they were last read), with its CSV for the teacher."""
    try:
        rounds = classes().rounds(code)[:-1]
    except BoardError:  # the class has ended meanwhile: the board says so
        return
    if not rounds:
        return
    with st.expander(n_("Earlier round ({n})", "Earlier rounds ({n})", len(rounds))):
        by_number = {r.number: r for r in rounds}
        number = st.selectbox(_("Round"), list(reversed(by_number)), key="board_past_round",
                              format_func=lambda n: course.round_label(by_number[n]))
        view = classes().archived_view(code, number)
        if not view.visible():
            st.caption(_("No run is on this round's board."))
            return
        table = shown_table(view, past=number)
        runs_table(table, "board_past_table")
        if teacher:
            st.download_button(_("Download this round's table (.csv)"), data=lambda: csv_text(table),
                               file_name=f"minigpt-class-{code}-round-{number}.csv", mime="text/csv",
                               on_click="ignore", key="board_past_csv", type="tertiary", icon=":material/download:")


@st.cache_resource(show_spinner=False, max_entries=64)
def _figure(code: str, digest: str, lang: str, titled: bool, own: tuple[str, ...], _view: BoardView):
    from minigpt.viz import board_figure
    return board_figure(_view.visible(), tr=_, titled=titled, own=own, band=_band(code, digest, _view))


@st.cache_resource(show_spinner=False, max_entries=16)
def _band(code: str, digest: str, _view: BoardView):
    from minigpt.viz import board_band
    return board_band(_view.visible())


def figure(view: BoardView, titled: bool = False, own: frozenset[str] = frozenset()):
    """The board's chart, built once per update, language and set of `own` runs (marked on a large
    board alone: pass none for a small one, the same for every viewer), the class's band once per
    update for every viewer; titled for the HTML export (on the page, the title is a line above it,
    which wraps on a phone: Plotly cuts it off)."""
    return _figure(view.code, view.digest, language(), titled, tuple(sorted(own)), view)


@st.cache_resource(show_spinner=False, max_entries=64)
def _table(code: str, digest: str, lang: str, past: int | None, best_first: bool,
           _view: BoardView):  # past: a key part only
    table = _view.table()
    if best_first:
        table = table.sort_values("best_val", kind="stable", na_position="last", ignore_index=True)
    settings = [name for name in table.columns if name in SETTING_LABELS]
    table[settings] = table[settings].map(setting_text)
    return table.rename(columns={**{name: _(label) for name, label in SETTING_LABELS.items()},
                                 "run": _(RUN_LABEL), **{name: _(column.label) for name, column in COLUMNS.items()}})


@st.cache_resource(show_spinner=False, max_entries=64)
def _samples(code: str, digest: str, lang: str, drawn: tuple[str, ...] | None, _view: BoardView):
    import pandas as pd
    rows = _view.visible()
    if drawn is not None:
        by_id = {row.post_id: row for row in rows}
        rows = [by_id[post_id] for post_id in drawn]
    return arrow(pd.DataFrame({_("run"): [row.label for row in rows],
                               _("state"): [state_text(row) for row in rows],
                               _("latest sample"): [row.sample.replace("\n", " ⏎ ") for row in rows]}))


def samples_table(view: BoardView, drawn=None):
    """Each run's latest sample (`drawn`: only these rows', in their order), in the page's language,
    built once per update and language."""
    return _samples(view.code, view.digest, language(), None if drawn is None else tuple(r.post_id for r in drawn),
                    view)


@st.cache_resource(show_spinner=False, max_entries=64)
def _arrow(code: str, digest: str, lang: str, best_first: bool, _view: BoardView):
    return arrow(_table(code, digest, lang, None, best_first, _view))


def arrow(table):
    """A table as Arrow, which st.dataframe sends without converting it again for every viewer."""
    import pyarrow as pa
    return pa.Table.from_pandas(table, preserve_index=False)


def shown_arrow(view: BoardView, best_first: bool = False):
    """The live board's table (shown_table) as Arrow, converted once per update and language."""
    return _arrow(view.code, view.digest, language(), best_first, view)


def shown_table(view: BoardView, past: int | None = None, best_first: bool = False):
    """The board's table with its columns in the page's language, built once per update and language
    (`past`: the number of the earlier round `view` is of; `best_first`: sorted by best validation loss)."""
    return _table(view.code, view.digest, language(), past, best_first, view)


def ranking(view: BoardView, chosen=None) -> None:
    """The challenge, and its ranking; on a large board (`chosen` summarised), the places of the runs drawn
    on the chart alone, and how many more there are."""
    challenge = view.challenge
    own = classes().class_corpus(view.code) if challenge.corpus == CLASS_CORPUS else None
    st.markdown("### " + _("Challenge: the lowest validation loss") + "  \n" + challenge_text(challenge, own))
    drawn = {row.post_id for row in chosen.drawn} if chosen is not None and chosen.summarised else None
    ranked = view.ranking()
    if ranked:
        placed = [(place, row) for place, row in zip(places(ranked), ranked) if drawn is None or row.post_id in drawn]
        st.markdown("  \n".join(_("**{place}.** {run}: {loss:.3f}", place=place, run=md(row.label), loss=row.best_val)
                                for place, row in placed))
        if len(placed) < len(ranked):
            st.caption(n_("{n} more run meets the challenge: the table lists every run.",
                          "{n} more runs meet the challenge: the table lists every run.", len(ranked) - len(placed)))
    else:
        st.caption(_("No run meets the challenge yet."))
    every = [row for row in view.visible() if row.refusals]
    refused = [row for row in every if drawn is None or row.post_id in drawn]
    if refused:
        st.markdown(_("**Outside the challenge:**") + "  \n" + "  \n".join(
            _("{run}: {reasons}", run=md(row.label), reasons="; ".join(error_text(r) for r in row.refusals))
            for row in refused))
    if len(refused) < len(every):
        st.caption(n_("{n} more run is outside the challenge.", "{n} more runs are outside the challenge.",
                      len(every) - len(refused)))


def places(ranked: list) -> list[int]:
    """Each ranked run's place, best first: runs whose results read the same (to the three decimals
    shown) share one, and the place after them skips as many ("1. a, 1. b, 3. c")."""
    first: dict[float, int] = {}
    for place, row in enumerate(ranked, 1):
        first.setdefault(round(row.best_val, 3), place)
    return [first[round(row.best_val, 3)] for row in ranked]


def remember_key(code: str, key: str) -> None:
    """Write the teacher's key into this browser's cookie for the class, once a session, so that
    a refresh keeps the controls. The script runs once and is gone from the page at the next redraw."""
    if st.session_state.get(COOKIE_SENT_KEY) == code or cookies().get(COOKIE_PREFIX + code) == key:
        return
    st.session_state[COOKIE_SENT_KEY] = code
    # Strict: no other site's page sends it along; no Secure flag, which a school server on plain http
    # would refuse to keep (the key is no more exposed there than the page it controls)
    cookie = f"{COOKIE_PREFIX}{code}={key}; path=/; max-age={classroom.cookie_seconds(code)}; SameSite=Strict"
    st.html(f"<script>document.cookie = {json.dumps(cookie)};</script>", unsafe_allow_javascript=True)


def forget_key(code: str) -> None:
    """Clear this browser's cookies for the class: the teacher's key and the learner's token."""
    gone = [json.dumps(f"{prefix}{code}=; path=/; max-age=0; SameSite=Strict") for prefix in (COOKIE_PREFIX, LEARNER_PREFIX)]
    st.html("<script>" + "".join(f"document.cookie = {cookie};" for cookie in gone) + "</script>",
            unsafe_allow_javascript=True)


COPY_BUTTON = """
<div class="teacher-link">
<button id="{id}" type="button" style="font: inherit; color: inherit; background: transparent; cursor: pointer;
  border: 1px solid rgba(128, 128, 128, 0.4); border-radius: 0.5rem; padding: 0.25rem 0.75rem;">{label}</button>
<span id="{id}-said" style="margin-left: 0.75rem; opacity: 0.75;"></span>
</div>
<script>
(() => {{
  const button = document.getElementById({id_js}), said = document.getElementById({id_js} + "-said");
  const words = {words};
  const link = () => {{
    const key = document.cookie.split("; ").find(c => c.startsWith({cookie_js} + "="));
    return key ? location.origin + location.pathname + "?class=" + {code_js} + "&teacher=" +
      encodeURIComponent(key.slice({cookie_js}.length + 1)) : null;
  }};
  const byHand = (text) => {{  // plain http: no clipboard API, the old copy command instead
    const area = document.createElement("textarea");
    area.value = text; area.setAttribute("readonly", "");
    area.style.position = "fixed"; area.style.opacity = "0"; area.style.left = "-9999px";
    document.body.appendChild(area); area.select();
    let done = false;
    try {{ done = document.execCommand("copy"); }} catch (e) {{ done = false; }}
    area.remove();
    return done;
  }};
  let holding = false;
  button.addEventListener("click", async () => {{
    const text = link();
    if (!text) {{ said.textContent = words.missing; return; }}
    let done = false;
    // browsers give the clipboard API to https and localhost only; a school server on plain http
    // falls back to the old copy command, then to showing the link while the button is held
    if (navigator.clipboard && window.isSecureContext) {{
      try {{ await navigator.clipboard.writeText(text); done = true; }} catch (e) {{ done = false; }}
    }}
    if (!done) done = byHand(text);
    if (done) {{ said.textContent = words.copied; return; }}
    holding = true; button.textContent = words.hold; said.textContent = words.blocked;
  }});
  const show = () => {{ if (holding) said.textContent = link() || words.missing; }};
  const hide = () => {{ if (holding) said.textContent = words.blocked; }};
  button.addEventListener("pointerdown", show);
  for (const gone of ["pointerup", "pointerleave", "pointercancel", "blur"]) button.addEventListener(gone, hide);
}})();
</script>
"""


def copy_teacher_link(code: str) -> None:
    """A button that copies the teacher's link (read from this browser's cookie) to the clipboard:
    the key is never drawn. Where copying is blocked, the link shows only while the button is held."""
    words = {"copied": _("Copied: paste it where only you will see it."),
             "blocked": _("This browser does not allow copying here. Press and hold the button to see the link."),
             "hold": _("Hold to show the teacher's link"),
             "missing": _("This browser does not keep the key (cookies are off): the controls last until you close "
                          "this tab.")}
    st.html(COPY_BUTTON.format(id=f"copy-teacher-{code}", id_js=json.dumps(f"copy-teacher-{code}"),
                               label=_("Copy the teacher's link"), words=json.dumps(words, ensure_ascii=False),
                               cookie_js=json.dumps(COOKIE_PREFIX + code), code_js=json.dumps(code)),
            unsafe_allow_javascript=True)


def teacher_panel(code: str, key: str) -> None:
    """What only the teacher's browser sees: the teacher's link, the challenge, the class's text, hiding,
    pinning and erasing a learner, closing."""
    st.caption(_("Only the browser that started the class sees these controls; a refresh keeps them. The teacher's "
                 "link gives them to another browser (your laptop, say): copy it and keep it to yourself. It is "
                 "never shown on the screen."))
    copy_teacher_link(code)
    with st.form("board_challenge", border=False):  # callbacks: the board (the first tab) draws the change at once
        corpus_col, steps_col, params_col = st.columns(3)
        corpus_col.selectbox(_("Corpus"), [None, CLASS_CORPUS, *BUILTIN_CORPORA], key="challenge_corpus",
                             format_func=lambda c: challenge_corpus_label(code, c))
        steps_col.number_input(_("At most this many steps (0: any)"), 0, 100_000, 300, step=50, key="challenge_steps")
        params_col.number_input(_("At most this many parameters (0: any)"), 0, 10_000_000, 150_000, step=10_000,
                                key="challenge_params")
        set_col, clear_col = st.columns(2)
        set_col.form_submit_button(_("Set the challenge"), on_click=set_challenge, args=(code, key, True))
        clear_col.form_submit_button(_("No challenge"), on_click=set_challenge, args=(code, key, False))
    class_corpus.teacher_form(code, key)
    view = board_view(code)
    if view.rows:
        by_id = {row.post_id: row for row in view.rows}
        pick_col, hide_col, pin_col = st.columns([2, 1, 1], vertical_alignment="bottom")
        hidden = " " + _("(hidden)")
        chosen = pick_col.selectbox(_("Run"), list(by_id), key="board_pick",
                                    format_func=lambda i: by_id[i].label + (hidden if by_id[i].hidden else ""))
        row = by_id[chosen]
        hide_col.button(_("Show again") if row.hidden else _("Hide"), key="board_hide", on_click=as_teacher,
                        args=("hide", code, key, chosen, not row.hidden))
        pin_col.button(_("Unpin") if row.pinned else _("Pin to the top"), key="board_pin", on_click=as_teacher,
                       args=("pin", code, key, None if row.pinned else chosen))
        sure_col, erase_col = st.columns([3, 1], vertical_alignment="bottom")
        sure = sure_col.checkbox(_("Erase the learner who posted this run"), key="board_erase_learner_sure",
                                 help=_("Every post, answer and run of theirs in this class, from every round, "
                                        "deleted for good."))
        erase_col.button(_("Erase this learner's data"), key="board_erase_learner", disabled=not sure,
                         on_click=erase_learner, args=(code, key, chosen))
    st.button(_("Close the class"), key="board_close", on_click=close_class, args=(code, key),
              help=_("The board and its code end for everyone, and the server forgets the class, its posts and "
                     "answers; the runs themselves go on."))
    sure = st.checkbox(_("Also erase the runs posted to this class"), key="board_erase_sure",
                       help=_("What the server keeps of the class: the names the learners typed, their answers, and "
                              "the runs they posted, with their checkpoints. Erasing closes the class and deletes all "
                              "of it for good."))
    st.button(_("Erase the class's data"), key="board_erase", disabled=not sure, on_click=erase_class, args=(code, key))
    st.button(_("Forget the controls on this browser"), key="board_forget_me", on_click=classroom.forget_browser,
              args=(code,), help=_("On a shared computer: this browser no longer keeps the teacher's key for this "
                                   "class. Your teacher's link gives you the controls back."))


def challenge_corpus_label(code: str, corpus: str | None) -> str:
    """A corpus the challenge may ask for, as the form offers it: any, the class's own text, a built-in one."""
    if corpus is None:
        return _("any")
    if corpus != CLASS_CORPUS:
        return corpus
    own = classes().class_corpus(code)
    return _("the class's text ({name})", name=own.label) if own else _("the class's text (none set yet)")


def set_challenge(code: str, key: str, on: bool) -> None:
    ss = st.session_state
    challenge = Challenge(ss.get("challenge_corpus"), int(ss.get("challenge_steps") or 0) or None,
                          int(ss.get("challenge_params") or 0) or None) if on else None
    as_teacher("set_challenge", code, key, challenge)


def as_teacher(action: str, code: str, key: str, *args) -> None:
    """A teacher's change, from a button's callback: one of Classes' teacher methods."""
    try:
        getattr(classes(), action)(code, key, *args)
    except BoardError as err:  # the class has ended meanwhile
        st.session_state[NOTICE_KEY] = error_text(err)


def erase_learner(code: str, key: str, post_id: str) -> None:
    try:
        classroom.erase_poster(code, key, post_id)
    except BoardError as err:  # the class has ended meanwhile, or the post has gone
        st.session_state[NOTICE_KEY] = error_text(err)
        return
    st.session_state.pop("board_erase_learner_sure", None)
    st.session_state[NOTICE_KEY] = _("The learner's data is erased: their posts, answers and runs in this class.")


def close_class(code: str, key: str) -> None:
    as_teacher("close", code, key)
    leave_class()
    st.session_state.pop(COOKIE_SENT_KEY, None)
    st.session_state[FORGET_KEY] = code


def erase_class(code: str, key: str) -> None:
    try:
        classroom.erase_class(code, key)
    except BoardError as err:  # the class has ended meanwhile
        st.session_state[NOTICE_KEY] = error_text(err)
        return
    st.session_state.pop(COOKIE_SENT_KEY, None)
    st.session_state[FORGET_KEY] = code
    st.session_state[NOTICE_KEY] = _("Class {code} is closed and its data erased.", code=code)


def my_posts(code: str) -> None:
    """The runs this learner posted (this session, or since in the same browser or one their personal
    code moved: the class knows them by their token), each with Withdraw."""
    view = board_view(code)
    own = own_posts(view)
    posted = [row for row in view.rows if row.post_id in own]
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
        classes().withdraw(code, post_id, mine.get(post_id) or (own[1] if own else None), learner=learner(code))
    except BoardError as err:
        st.error(md(error_text(err)))
        return
    mine.pop(post_id, None)


