"""Lesson: a guided path through the loaded model, one step at a time (?lesson=N): the built-in
lesson in the page's language, or the one the class's teacher loaded."""
import streamlit as st

from minigpt import N_

from app import navigation
from app.chrome import site
from app.chrome.i18n import _, language
from app.chrome.text import md
from app.parts import class_lesson, lesson_links
from app.state import loaded_model
from app.state.lesson_file import Lesson, builtin_lesson
from app.views import lesson

INTRO = N_("From what a language model predicts to training and sampling one of your own, on the loaded model and "
           "your own text. Each step has a few sentences, a live view to try, and a question to check yourself.")

navigation.open_page(site.LESSON)
followed = lesson_links.lesson()
if followed == builtin_lesson(language()):
    st.markdown(_(INTRO))
else:  # the teacher's own file: its title, not the words that describe ours
    st.markdown(_("Your teacher's lesson: **{title}**", title=md(followed.title)) if followed.title
                else _("Your teacher's lesson."))


@st.fragment  # Back, Next, the step list and a step's own widgets redraw the step, not the sidebar and title
def step(drawn: Lesson) -> None:
    followed = lesson_links.lesson()
    if followed != drawn:  # the teacher loaded another lesson since the page was drawn: its title changes too
        st.rerun(scope="app")
    n = class_lesson.follow(lesson_links.step_number(len(followed.steps)), followed)  # in a led class: the teacher's
    lesson_links.steps_bar(followed, n, "top", on_move=class_lesson.leave_follow)
    loaded = loaded_model.require_model()
    st.caption(loaded.summary())
    lesson.show(followed.steps[n - 1], n, loaded)
    st.divider()
    lesson_links.steps_bar(followed, n, "bottom", on_move=class_lesson.leave_follow)


step(followed)
