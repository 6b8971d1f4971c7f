"""Lesson: a guided path through the loaded model, one step at a time (?lesson=N)."""
import streamlit as st

from app import lesson, lesson_links, models, navigation
from app.i18n import _

navigation.setup_page(__file__)

st.title(_("Lesson"))
st.markdown(_("From what a language model predicts to training and sampling one of your own, on the loaded model "
              "and your own text. Each step has a few sentences, a live view to try, and a question to check "
              "yourself."))

n = lesson_links.step_number()
lesson_links.steps_bar(n, "top")
lm = models.require_model()
st.caption(lm.summary())
lesson.show(n, lm)
st.divider()
lesson_links.steps_bar(n, "bottom")
