"""The logit lens, drawn the same on Inside the model and in the lesson: the likeliest next
character read out of the residual stream after the embedding and after every layer."""
from __future__ import annotations

import streamlit as st

from minigpt.viz import logit_lens_figure

from app.chrome.charts import config as chart_config
from app.chrome.charts import shared_figure
from app.chrome.i18n import _
from app.state import shared_results
from app.state.loaded_model import LoadedModel


def logit_lens_view(loaded: LoadedModel, text: str, key: str) -> None:
    lens = shared_results.logit_lens(loaded, text)
    st.plotly_chart(shared_figure(logit_lens_figure, lens, text, loaded.tokenizer.chars), key=key,
                    config=chart_config())
    st.caption(_("Each cell is the likeliest next character after that position, read out of the residual stream "
                 "after the embedding and after each layer through the final LayerNorm and the tied head; its colour "
                 "is that character's probability. The last row is the model's own prediction. The first row "
                 "mostly names the character itself, at a probability near 1: before any layer, the vector is that "
                 "character's own row of the table E, and the tied head scores every character by how alike its "
                 "row is, so a row is most alike itself. That row shows the head at work, not a guess."))
