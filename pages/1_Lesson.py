"""Lesson: a guided path through the loaded model, one step at a time (?lesson=N)."""
import streamlit as st

from app import lesson, lesson_links, loaded_model, navigation, site
from minigpt import N_

navigation.open_page(site.LESSON, N_(
    "From what a language model predicts to training and sampling one of your own, on the loaded model and your own "
    "text. Each step has a few sentences, a live view to try, and a question to check yourself."))

n = lesson_links.step_number()
lesson_links.steps_bar(n, "top")
loaded = loaded_model.require_model()
st.caption(loaded.summary())
lesson.show(n, loaded)
st.divider()
lesson_links.steps_bar(n, "bottom")
