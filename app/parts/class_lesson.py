"""The lesson in class: the teacher leads, the class follows, and each step's check question is
answered by the class and revealed by the teacher.

A teacher who leads the class (on the board's "Lead the lesson" tab, or by showing the Lesson page
while leading) sets the class's step. A learner in the class (its code is in their address) who
follows — the default, a switch on the Lesson page — is taken to that step within
POLL_SECONDS: the page polls one shared value (`Classes.lesson`), and reruns only when it
changed, so a class following an unchanged step costs the server a dictionary lookup per learner
per poll. Pressing Back, Next or the step list leaves "follow"; the switch rejoins.

While the teacher leads, a learner's answer to a step's question counts for the class, with no
name: one answer per learner (classroom.learner, the same across a refresh and a restart), which
they may change until the teacher reveals the step's answer. The learner learns whether they were
right once that step is revealed, whichever step they are on; the teacher sees how many chose each
option. The revealed counts are the class's answer: a learner may try again for themselves, and is
told the try is not counted, until the teacher hides the answer again, which reopens the question.

A learner waiting on the board sees the class's step within POLL_SECONDS of the teacher leading it
(class_line), and a follower is taken to the Lesson when the teacher moves the class.

The class follows the built-in lesson, each learner in their page's language, or a lesson file the
teacher loads on the board (lesson_picker): a file that is wrong is refused with its line and what to
fix, and the class keeps the lesson it had. Loading another lesson stops leading: the server starts
the next lesson session when the teacher leads again, from step 1, so that one session's answers are
to one lesson's questions.
"""
from __future__ import annotations

import string

import streamlit as st

from minigpt.serve import MAX_NAME, MAX_OPTIONS, BoardError, ClassLesson, LessonNow

from app.chrome import fields, site, url
from app.chrome.i18n import _, display_name, error_text, language, languages, n_
from app.chrome.text import file_name, md
from app.parts import lesson_links
from app.state import classroom
from app.state.lesson_file import (MAX_BYTES, MAX_STEPS, Lesson, LessonFileError, LessonStep, builtin_lesson,
                                   builtin_path, decode_lesson, parse_lesson)
from app.state.lesson_numbers import quoted
from app.state.loaded_model import ModelUnavailable, session_model

FOLLOW_KEY = "lesson_follow"     # session_state: this learner follows the teacher's step (on by default)
POLL_SECONDS = 2.0               # a follower's look at the class's step: it jumps within this
COUNTS_SECONDS = 3.0             # the teacher's counts of answers, redrawn this often
LETTERS = string.ascii_uppercase[:MAX_OPTIONS]
LESSON_UPLOAD = "class_lesson_upload"    # the lesson file's uploader (its container: uploader_<this>)
UPLOADS_KEY = "class_lesson_uploads"     # session_state: lesson files loaded so far, for the uploader's key
REFUSED_KEY = "class_lesson_refused"     # session_state: (file name, the error) of the last lesson file refused
BUILTIN_KEY = "class_lesson_builtin"     # the select box of the built-in lessons


def class_code() -> str | None:
    return st.session_state.get(classroom.CLASS_KEY)


def lesson_now(code: str | None) -> LessonNow | None:
    """Where the class's teacher leads it, or None: no class, or one that has ended."""
    if not code:
        return None
    try:
        return classroom.classes().lesson(code)
    except BoardError:
        return None


def following() -> bool:
    return st.session_state.get(FOLLOW_KEY, True)


def leave_follow() -> None:
    """Back, Next or the step list while the teacher leads: this learner goes their own way."""
    now = lesson_now(class_code())
    if now is not None and now.step is not None and classroom.teacher_key(class_code()) is None:
        st.session_state[FOLLOW_KEY] = False


# ------------------------------------------------------------------------- the Lesson page

def follow(n: int, followed: Lesson) -> int:
    """On the Lesson page, before the step is drawn: the step of `followed` to show. A follower goes
    to the teacher's step; the teacher, showing the Lesson while leading, takes the class to theirs."""
    code = class_code()
    now = lesson_now(code)
    if now is None or now.step is None:
        return n
    key = classroom.teacher_key(code)
    if key is not None:
        if now.step != n:
            classroom.classes().lead(code, key, n)
        st.caption(_("You lead class {code}: the learners who follow come to the step you show here.", code=code))
        return n
    left, right = st.columns([1, 3], vertical_alignment="center")
    st.session_state.setdefault(FOLLOW_KEY, True)
    left.toggle(_("Follow the teacher"), key=FOLLOW_KEY, **fields.REMEMBERED,
                help=_("On: this page goes to the step your teacher shows, by itself. Off: you move on your own."))
    if following():
        if now.step != n and 1 <= now.step <= len(followed.steps):
            n = now.step
            lesson_links.go(n)  # the address says the step shown
        right.caption(_("Class {code} is on step {n}: {title}.", code=code, n=n, title=followed.steps[n - 1].title))
    else:
        right.caption(_("Class {code} is on step {n}: switch on “Follow the teacher” to go there.", code=code,
                        n=now.step))
    watch(code, n, now)
    return n


def watch(code: str, n: int, drawn: LessonNow) -> None:
    """Poll the class's step; rerun the page only when what it shows would change: the class's step
    (a follower goes there; the others' caption names it), this step's reveal, or the lead itself
    starting or ending."""

    @st.fragment(run_every=POLL_SECONDS)
    def poll() -> None:
        now = lesson_now(code)
        if now is None or now.version == drawn.version:
            return
        moved = now.step != drawn.step
        revealed = (n in now.revealed) != (n in drawn.revealed)
        if moved or revealed or now.step is None:
            st.rerun(scope="app")

    poll()


def question(n: int, step: LessonStep, params: dict) -> None:
    """The step's check question. Alone, the answer says at once whether it is right. In a class
    the teacher leads, it counts for the class, and its verdict waits for the step's reveal."""
    if step.question is None:
        return
    st.subheader(_("Check yourself"))
    code = class_code()
    now = lesson_now(code)
    leading = now is not None and now.step is not None
    key = classroom.teacher_key(code) if leading else None
    options = [lesson_links.words(option, params) for option in step.options]
    if key is not None and now.step == n:
        st.markdown(lesson_links.words(step.question, params))
        class_answers(code, key, n, step, params)
        return
    widget = f"lesson_answer:{n}"
    if st.session_state.get(widget) not in (None, *options):  # another lesson's, or another language's
        st.session_state[widget] = None
    counted = leading and key is None  # the teacher's own answer is not the class's
    notice = st.session_state.pop(classroom.NOTICE_KEY, None)  # an answer the class could not take
    if notice:
        st.warning(md(notice))
    revealed = leading and n in now.revealed
    waiting = counted and not revealed  # the verdict waits for this step's reveal, whichever step the class is on
    kept = counted_answer(code, n, len(options)) if counted else None
    # the radio shows what counts: while the question is open (after a refresh, a refused answer, a reopening);
    # once revealed, only until the learner tries again for themselves
    if waiting or counted and widget not in st.session_state:
        st.session_state[widget] = options[kept] if kept is not None else None
    answer = st.radio(lesson_links.words(step.question, params), options, index=None, key=widget,
                      on_change=send_answer if counted else None, args=(code, n, widget, options))
    explanation = lesson_links.words(step.explanation, params)
    if answer is None:
        if revealed:
            st.info(_("The teacher has revealed the answer: {answer}. {why}", answer=options[step.answer],
                      why=explanation))
        return
    if waiting:
        st.info(_("Your answer counts for the class. You will see whether it is right when your teacher reveals "
                  "the answer."))
        return
    if counted and options.index(answer) != kept:
        st.caption(_("This try is not counted: the class's answers were counted when your teacher revealed this "
                     "question's answer."))
    if options.index(answer) == step.answer:
        st.success(_("Right. {why}", why=explanation))
    else:
        st.error(_("Not quite: the right answer is “{answer}”. {why}", answer=options[step.answer], why=explanation)
                 if revealed else _("Not quite: try again. {why}", why=explanation))


def counted_answer(code: str, n: int, options: int) -> int | None:
    """The option this learner's answer to step n counts for the class, if any."""
    try:
        kept = classroom.classes().answered(code, classroom.learner(code), n)
    except BoardError:
        return None
    return kept if kept is not None and 0 <= kept < options else None


def send_answer(code: str, n: int, widget: str, options: list[str]) -> None:
    chosen = st.session_state.get(widget)
    try:
        classroom.classes().answer(code, classroom.learner(code), n,
                                   options.index(chosen) if chosen in options else None)
    except BoardError as err:
        st.session_state[classroom.NOTICE_KEY] = error_text(err)


# ---------------------------------------------------------------------------- the teacher

def lead(code: str, key: str, step: int | None) -> None:
    try:
        classroom.classes().lead(code, key, step)
    except BoardError as err:
        st.session_state[classroom.NOTICE_KEY] = error_text(err)


def reveal(code: str, key: str, step: int, shown: bool) -> None:
    try:
        classroom.classes().reveal(code, key, step, shown)
    except BoardError as err:
        st.session_state[classroom.NOTICE_KEY] = error_text(err)


def lead_panel(code: str, key: str) -> None:
    """The board's "Lead the lesson" tab: the class's step, Back and Next, the link to show the
    step, and its question's answers as counts, with Reveal; below, the lesson the class follows."""
    now = lesson_now(code)
    if now is None:
        return
    followed = lesson_links.lesson(code)
    if now.step is None:
        st.markdown(_("Lead the class through the lesson's {steps} steps. Every learner who has joined and follows "
                      "goes to your step within a few seconds, and answers its question on their Lesson page. You "
                      "see how many chose each option, never who, and reveal the right answer when you choose.",
                      steps=len(followed.steps)))
        st.button(_("Lead the lesson from step 1"), key="lead_start", type="primary", on_click=lead,
                  args=(code, key, 1))
    else:
        lead_step(code, key, followed, min(now.step, len(followed.steps)))
    st.divider()
    lesson_picker(code, key, now)


def lead_step(code: str, key: str, followed: Lesson, n: int) -> None:
    """While leading: step n, Back and Next, the link to show it, Stop, and its question's counts."""
    total = len(followed.steps)
    back_col, title_col, next_col = st.columns([1, 4, 1], vertical_alignment="center")
    back_col.button(_("← Back"), key="lead_back", disabled=n == 1, on_click=lead, args=(code, key, n - 1),
                    width="stretch")
    title_col.markdown(_("**The class is on step {n} of {total}:** {title}", n=n, total=total,
                         title=followed.steps[n - 1].title))
    next_col.button(_("Next →"), key="lead_next", disabled=n == total, on_click=lead, args=(code, key, n + 1),
                    type="primary", width="stretch")
    show_col, stop_col = st.columns([3, 1], vertical_alignment="center")
    show_col.page_link(site.LESSON.script, label=_("Show step {n} on the Lesson page (your steps there lead the "
                                                   "class)", n=n), icon="🎓",
                       query_params={url.LESSON: str(n), url.CLASS: code, url.LANG: language()})
    stop_col.button(_("Stop leading"), key="lead_stop", on_click=lead, args=(code, key, None), type="tertiary")
    step = followed.steps[n - 1]
    if step.question is None:
        st.caption(_("Step {n} has no question.", n=n))
        return
    params = teacher_params()
    shown = lesson_links.words(step.question, params)
    st.markdown("#### " + (shown if shown is not None else _("Step {n}'s question", n=n)))
    class_answers(code, key, n, step, params)


def teacher_params() -> dict | None:
    """The numbers the question quotes, from the teacher's own model (each learner sees their own
    model's); None when this session has no model to read them from."""
    try:
        return quoted(session_model())
    except ModelUnavailable:
        return None


def class_answers(code: str, key: str, n: int, step: LessonStep, params: dict | None) -> None:
    """The class's answers to step n's question, redrawn every few seconds, and Reveal."""

    @st.fragment(run_every=COUNTS_SECONDS)
    def answers() -> None:
        try:
            counts = classroom.classes().counts(code, key, n, len(step.options))
            shown = n in classroom.classes().lesson(code).revealed
        except BoardError as err:
            st.warning(md(error_text(err)))
            return
        total = sum(counts)
        for i, (option, count) in enumerate(zip(step.options, counts)):
            text = lesson_links.words(option, params) or ""
            mark = " ✅" if shown and i == step.answer else ""
            st.progress(count / total if total else 0.0,
                        text=_("**{letter}.** {option}{mark} — {count}", letter=LETTERS[i], option=md(text),
                               mark=mark, count=count))
        st.caption(n_("{n} learner has answered.", "{n} learners have answered.", total))
        if shown:
            st.success(lesson_links.words(step.explanation, params) or _("The answer is revealed."))
            st.caption(_("These counts are the class's answer: a learner who changes theirs now is not counted. "
                         "Hiding the answer reopens the question, and changes count again."))
        st.button(_("Hide the answer and reopen the question") if shown else _("Reveal the answer"),
                  key=f"lead_reveal:{n}", type="secondary" if shown else "primary", on_click=reveal,
                  args=(code, key, n, not shown))

    answers()


def class_line(code: str) -> None:
    """On the board: where the teacher leads the class, with a link there, looked at every
    POLL_SECONDS (a dictionary lookup), so that an open board shows the lesson once it starts. A
    learner who follows is taken to the Lesson at the class's step when the teacher moves the class
    while the board is open; one who opened the board during the lesson stays on it until then."""
    drawn = lesson_now(code)
    teacher = classroom.teacher_key(code) is not None

    @st.fragment(run_every=POLL_SECONDS)
    def line() -> None:
        now = lesson_now(code)
        followed = lesson_links.lesson(code) if now is not None and now.step is not None else None
        if followed is None or not 1 <= now.step <= len(followed.steps):
            return
        if not teacher and following() and drawn is not None and now.step != drawn.step:
            st.switch_page(site.LESSON.script, query_params={url.LESSON: str(now.step), url.CLASS: code})
        st.page_link(site.LESSON.script, label=_("The class is on step {n} of the lesson: {title}", n=now.step,
                                                  title=followed.steps[now.step - 1].title), icon="🎓",
                     query_params={url.LESSON: str(now.step), url.CLASS: code, url.LANG: language()})

    line()


# ------------------------------------------------------------------------ the class's lesson

def lesson_picker(code: str, key: str, now: LessonNow) -> None:
    """Which lesson the class follows; a teacher's file to load instead, or a built-in one in one
    language for the whole class; and the way back to the built-in lesson."""
    st.markdown("#### " + _("The class's lesson"))
    loaded = class_file(code)
    followed = lesson_links.lesson(code)
    if loaded is None:
        st.caption(_("The class follows the built-in lesson ({steps} steps), each learner in their page's language.",
                     steps=len(followed.steps)))
    else:
        st.caption(_("The class follows **{name}** ({steps} steps), which you loaded.", name=md(loaded.name),
                     steps=len(followed.steps)))
    if now.step is not None:
        st.caption(_("Loading another lesson stops leading this one: you then lead the class from its step 1."))
    uploader(code, key)
    pick_col, load_col = st.columns([3, 1], vertical_alignment="bottom")
    offered = languages()
    pick = pick_col.selectbox(_("…or a built-in lesson in one language for the whole class"), offered,
                              index=offered.index(language()) if language() in offered else 0,  # the page's first
                              key=BUILTIN_KEY, format_func=lambda lang: f"{builtin_lesson(lang).title} · "
                                                                        f"{display_name(lang)}")
    load_col.button(_("Load it"), key="class_lesson_builtin_load", on_click=set_lesson, width="stretch",
                    args=(code, key, ClassLesson(builtin_lesson(pick).title, builtin_path(pick).read_text("utf-8"))))
    if loaded is not None:
        st.button(_("Back to the built-in lesson"), key="class_lesson_clear", on_click=set_lesson,
                  args=(code, key, None), help=_("Each learner reads it in their page's language."))


def uploader(code: str, key: str) -> None:
    """The lesson file's uploader, and why the last file was refused."""
    widget = f"{LESSON_UPLOAD}:{st.session_state.get(UPLOADS_KEY, 0)}"  # a new one, empty, after each load
    with st.container(key=f"uploader_{LESSON_UPLOAD}"):  # uploaders_css paints it in the page's language
        st.file_uploader(_("Load a lesson file (.md or .txt, UTF-8): its steps, words and questions are yours"),
                         type=["md", "txt"], key=widget, on_change=upload, args=(code, key, widget),
                         help=_("Markdown in a small structure (the built-in lessons are written so), at most "
                                "{limit:,} bytes and {steps} steps. A file that is wrong is refused with its line and "
                                "what to fix.", limit=MAX_BYTES, steps=MAX_STEPS))
    if refused := st.session_state.get(REFUSED_KEY):  # the error, not its words: a language switch translates it
        st.error(_("{name} was not loaded, and the class keeps its lesson. {error}", name=md(refused[0]),
                   error=md(error_text(refused[1]))))


def class_file(code: str) -> ClassLesson | None:
    try:
        return classroom.classes().class_lesson(code)
    except BoardError:
        return None


def upload(code: str, key: str, widget: str) -> None:
    """The uploader's callback: its file as the class's lesson, or why not (the class keeps its lesson).
    A file taken off the uploader changes nothing: "Back to the built-in lesson" does."""
    st.session_state.pop(REFUSED_KEY, None)
    file = st.session_state.get(widget)
    if file is None:
        return
    name = file_name(file.name, "lesson.md", MAX_NAME)
    try:
        text = decode_lesson(file.getvalue())
        parse_lesson(text)
    except LessonFileError as err:
        st.session_state[REFUSED_KEY] = (name, err)
        return
    set_lesson(code, key, ClassLesson(name, text))


def set_lesson(code: str, key: str, chosen: ClassLesson | None) -> None:
    try:
        classroom.classes().set_lesson(code, key, chosen)
    except BoardError as err:  # the class has ended meanwhile, or the file is over the server's own limit
        if chosen is None:
            st.session_state[classroom.NOTICE_KEY] = error_text(err)  # the board says it on top
        else:
            st.session_state[REFUSED_KEY] = (chosen.name, err)
        return
    st.session_state.pop(REFUSED_KEY, None)
    st.session_state[UPLOADS_KEY] = st.session_state.get(UPLOADS_KEY, 0) + 1
