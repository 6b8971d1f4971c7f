"""The class as a course that lasts the term, on the class board (views.board draws these parts).

For the teacher, the Course tab: each lesson session of the class (its date, its lesson, the steps
led and how many learners chose each option of their quick checks), as a table and its CSV, and a
new round of the board ("week 3"), which archives the posts so far without losing them.

For a learner, what is theirs in the class, on their own screen (the teacher's view, which a
projector shows, has none of it): the runs they started in the class, to open again on Train; their
personal code, which makes another browser the same learner, and the box to type it on that one;
and erasing their data from the class.
"""
from __future__ import annotations

import datetime
import zoneinfo

import streamlit as st

from minigpt.lab.run_records import csv_text
from minigpt.serve import MAX_NAME, PERSONAL_CODE_TRIES, BoardError, LessonSession, Round, personal_code

from app.chrome import fields, site, url
from app.chrome.i18n import _, error_text, language, n_
from app.chrome.text import md
from app.parts import class_lesson, lesson_links
from app.state import classroom, runs
from app.state.lesson_file import Lesson, builtin_lesson

ROUND_NAME_KEY = "course_round_name"
CLAIM_KEY = "course_claim_code"  # the personal code typed on a new device
CLAIM_SAID_KEY = "course_claim_said"  # session_state: (kind, sentence) after the last try
WRONG_KEY = "course_claim_wrong"      # session_state: how many codes this session typed that were refused


# ------------------------------------------------------------------------------ rounds

def round_label(found: Round) -> str:
    """A round as plain text ("Round 3: week 3"): md() it where markdown shows it."""
    return _("Round {n}: {name}", n=found.number, name=found.name) if found.name else _("Round {n}", n=found.number)


def round_line(code: str) -> None:
    """Above the board, once the teacher has started a second round: which one it shows."""
    rounds = classroom.classes().rounds(code)
    if len(rounds) > 1:
        st.caption(_("{round}, since {date}. The posts of earlier rounds are under “Earlier rounds”.",
                     round=md(round_label(rounds[-1])), date=when(rounds[-1].started)))


def new_round_form(code: str, key: str) -> None:
    st.markdown("#### " + _("Rounds"))
    rounds = classroom.classes().rounds(code)
    st.caption(_("The board shows {round}. A new round starts an empty board; the posts so far stay, under "
                 "“Earlier rounds” on the board, with their table and its CSV.", round=md(round_label(rounds[-1]))))
    name_col, button_col = st.columns([3, 1], vertical_alignment="bottom")
    fields.short_text(_("Name of the new round"), MAX_NAME, key=ROUND_NAME_KEY, where=name_col,
                      placeholder=_("week 3"), help=_("Plain text, at most {limit} characters.", limit=MAX_NAME))
    button_col.button(_("Start a new round"), key="course_new_round", on_click=start_round, args=(code, key))


def start_round(code: str, key: str) -> None:
    name = (st.session_state.get(ROUND_NAME_KEY) or "").strip()
    try:
        started = classroom.classes().new_round(code, key, name)
    except BoardError as err:
        st.session_state[classroom.NOTICE_KEY] = error_text(err)
        return
    st.session_state[ROUND_NAME_KEY] = ""
    st.session_state[classroom.NOTICE_KEY] = _("{round} has started: the board is empty for its posts.",
                                               round=round_label(started))


# ------------------------------------------------------------------------- the course

def course_panel(code: str, key: str) -> None:
    """The teacher's Course tab: the lesson sessions so far and their quick checks, and the rounds."""
    try:
        sessions = classroom.classes().course(code, key)
    except BoardError as err:
        st.warning(md(error_text(err)))
        return
    st.markdown("#### " + _("The lesson sessions"))
    if not sessions:
        st.info(_("No lesson session yet. One begins when you lead the lesson (“Lead the lesson”); leading it "
                  "again hours later, or after loading another lesson, begins the next."))
    else:
        st.caption(n_("{n} lesson session so far: each step it led, and how many learners chose each option of its "
                      "quick check.", "{n} lesson sessions so far: each step they led, and how many learners chose "
                      "each option of its quick check.", len(sessions)))
        table = sessions_table(code, sessions)
        st.dataframe(table, hide_index=True, key="course_table")
        st.download_button(_("Download the course (.csv)"), data=lambda: csv_text(table),
                           file_name=f"minigpt-class-{code}-course.csv", mime="text/csv", on_click="ignore",
                           key="course_csv", type="tertiary", icon=":material/download:")
    new_round_form(code, key)


def sessions_table(code: str, sessions: tuple[LessonSession, ...]):
    """One row per step each session led: the session, its date, its lesson, the step (with its title
    where the lesson is at hand), how many chose each option, how many answered, and, where the
    lesson is at hand, its right answer and how many chose it."""
    import pandas as pd
    steps = []
    for session in sessions:
        followed = known_lesson(code, session.lesson)
        steps += [(session, n, followed.steps[n - 1] if followed and 1 <= n <= len(followed.steps) else None)
                  for n in session.steps]
    counts = [option_counts(session.tallies.get(n, ()), step) for session, n, step in steps]
    widest = max(map(len, counts), default=0)
    rows = []
    for (session, n, step), chosen in zip(steps, counts):
        right = step.answer if step is not None and step.answer is not None else None
        rows.append({_("session"): session.number, _("date"): when(session.started),
                     _("lesson"): session.lesson or _("the built-in lesson"), _("step"): n,
                     _("title"): step.title if step is not None else "",
                     **{class_lesson.LETTERS[i]: chosen[i] if i < len(chosen) else None for i in range(widest)},
                     _("answered"): sum(chosen),
                     _("right answer"): class_lesson.LETTERS[right] if right is not None else "",
                     _("chose it"): chosen[right] if right is not None else None})
    return pd.DataFrame(rows)


def option_counts(tally: tuple[int, ...], step) -> tuple[int, ...]:
    """How many chose each option: the server counts up to the highest option chosen, the lesson (where
    it is at hand) says how many options there are."""
    options = len(step.options) if step is not None else len(tally)
    return (tally + (0,) * options)[:max(options, len(tally))]


def known_lesson(code: str, lesson: str) -> Lesson | None:
    """A session's lesson, where the app has it: the one the class follows now, or the built-in one
    ("", in the page's language). A lesson file the class followed before is not kept: its sessions
    show their counts alone."""
    loaded = classroom.classes().class_lesson(code)
    if lesson == (loaded.name if loaded is not None else ""):
        return lesson_links.lesson(code)
    return builtin_lesson(language()) if not lesson else None


def when(seconds: float) -> str:
    """A moment as a date and time in the page's language, in the browser's time zone (else the server's)."""
    from babel.dates import format_date, format_time
    try:
        zone = zoneinfo.ZoneInfo(st.context.timezone or "")
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):  # no browser behind the session, or no zone
        zone = None
    moment = datetime.datetime.fromtimestamp(seconds, zone or datetime.datetime.now().astimezone().tzinfo)
    return f"{format_date(moment, 'medium', locale=language())} {format_time(moment, 'short', locale=language())}"


# ------------------------------------------------------------------------- the learner

def learner_panel(code: str) -> None:
    """On the learner's view of the board: their runs in the class, their personal code, erasing."""
    said = st.session_state.pop(CLAIM_SAID_KEY, None)
    if said is not None and said[0] == "success":  # above the runs it brought: the expander may redraw closed
        st.success(md(said[1]))
    own_runs(code)
    with st.expander(_("Use this class on another device"), expanded=said is not None and said[0] == "error"):
        personal(code, said[1] if said is not None and said[0] == "error" else None)
    with st.expander(_("Erase your data in this class")):
        st.caption(_("What the class keeps of you: your answers to the quick checks, the runs you started in the "
                     "class and the names you posted them under. Erasing deletes all of it from this server for "
                     "good; this browser is then a new learner in the class."))
        sure = st.checkbox(_("Yes, erase my answers, runs and posts in this class"), key="course_erase_sure")
        st.button(_("Erase my data"), key="course_erase", disabled=not sure, on_click=erase_me, args=(code,))


def own_runs(code: str) -> None:
    """The runs this learner started in the class, each to open again on Train (its key derived from
    who they are in the class: on any browser that is them)."""
    try:
        mine = classroom.own_runs(code)
    except BoardError:
        return
    if not mine:
        return
    st.markdown(_("**Your runs in this class:**"))
    for run_id, key in reversed(mine):  # the newest first
        name_col, button_col = st.columns([3, 1], vertical_alignment="center")
        # only a run in memory is read: twenty runs a learner, each read back from the store on every page
        # run, would crowd out the runs others keep; Open reads one (and says so if it has gone)
        entry = runs.registry().held(run_id)
        if entry is None:
            name_col.markdown(_("`{run}`, kept on the server", run=run_id))
        else:
            name_col.markdown(_("`{run}` on {corpus}: step {step:,}", run=run_id, corpus=md(entry.corpus),
                                step=entry.run.snapshot().step))
        if button_col.button(_("Open on Train"), key=f"course_open_{run_id}"):
            open_run(code, run_id, key)


def open_run(code: str, run_id: str, key: str) -> None:
    if runs.open_own_run(run_id, key):
        st.switch_page(site.TRAIN.script, query_params={url.CLASS: code, url.RUN: run_id, url.KEY: key})
    st.error(md(runs.gone_notice(run_id)))


def personal(code: str, refused: str | None) -> None:
    """The learner's personal code, shown to them alone, and the box to type it on another device
    (`refused`: why the code typed last was not taken)."""
    st.markdown(_("**Your personal code** in class {code}:", code=code))
    st.code(personal_code(classroom.learner(code)), language=None)
    st.caption(_("It carries your answers, runs and posts in this class to another browser: open the class's link "
                 "there and type the code in the box below. Keep it to yourself: whoever has it is you in this "
                 "class."))
    st.button(_("Forget me on this browser"), key="course_forget_me", on_click=classroom.forget_browser, args=(code,),
              help=_("On a shared computer: this browser no longer knows you in this class. Note your personal code "
                     "first: it brings you back."))
    with st.form("course_claim", border=False):
        st.text_input(_("A personal code from your other device"), key=CLAIM_KEY, max_chars=32,
                      placeholder="····-····-····")  # the shape of a code, no letters to translate
        st.form_submit_button(_("Use this code"), on_click=claim, args=(code,))
    if refused is None:
        return
    st.error(md(refused))
    wrong = st.session_state.get(WRONG_KEY, 0)
    if wrong <= PERSONAL_CODE_TRIES:  # the server's own words say when to try again after
        st.caption(n_("This browser has typed {n} wrong code. After {limit}, it must wait a while before typing "
                      "another.", "This browser has typed {n} wrong codes. After {limit}, it must wait a while "
                      "before typing another.", wrong, limit=PERSONAL_CODE_TRIES))


def claim(code: str) -> None:
    ss = st.session_state
    typed = (ss.get(CLAIM_KEY) or "").strip()
    if not typed:
        return
    try:
        classroom.claim_learner(code, typed)
    except BoardError as err:  # the box keeps what was typed, and this browser who it was
        ss[CLAIM_SAID_KEY] = ("error", error_text(err))
        ss[WRONG_KEY] = ss.get(WRONG_KEY, 0) + 1
        return
    ss[CLAIM_KEY] = ""
    ss[CLAIM_SAID_KEY] = ("success", _("This browser is you in class {code} now: your runs, answers and posts are "
                                       "here.", code=code))


def erase_me(code: str) -> None:
    try:
        classroom.erase_me(code)
    except BoardError as err:
        st.session_state[classroom.NOTICE_KEY] = error_text(err)
        return
    st.session_state.pop("course_erase_sure", None)
    st.session_state[classroom.NOTICE_KEY] = _("Your data in class {code} is erased: your answers, runs and posts.",
                                               code=code)
