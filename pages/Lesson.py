"""Lesson: a guided path through the loaded model, one step at a time (?lesson=N)."""
import streamlit as st

from minigpt import N_

from app import navigation
from app.chrome import site
from app.parts import class_lesson, lesson_links
from app.state import loaded_model
from app.views import lesson

navigation.open_page(site.LESSON, N_(
    "From what a language model predicts to training and sampling one of your own, on the loaded model and your own "
    "text. Each step has a few sentences, a live view to try, and a question to check yourself."))

n = class_lesson.follow(lesson_links.step_number())  # in a class the teacher leads: the teacher's step
lesson_links.steps_bar(n, "top", on_move=class_lesson.leave_follow)
loaded = loaded_model.require_model()
st.caption(loaded.summary())
lesson.show(n, loaded)
st.divider()
lesson_links.steps_bar(n, "bottom", on_move=class_lesson.leave_follow)
