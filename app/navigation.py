"""The pages and what every page does first: page config, torch threads, the run in the URL,
and the sidebar drawn with `st.page_link`. A new page is one file in pages/ and one row in PAGES.

The app keeps Streamlit's plain `pages/` convention, without `st.navigation`: with a folder
named pages/, a cold deep link would skip an `st.navigation` router.
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st
import torch

from .choices import current_device, model_source
from .corpora import current_corpus
from .runs import NOTICE, read_run_from_url, session_run
from .text import md

HOME = "streamlit_app.py"
# (script, label, icon, what it offers): the sidebar and Home's links, in this order
PAGES = (
    (HOME, "Home", "🏠", "The loaded model; corpus, model and device"),
    ("pages/1_Train.py", "Train", "🏋️", "Train a model and watch it learn"),
    ("pages/2_Generate.py", "Generate", "✍️", "Write text, one character at a time"),
    ("pages/3_Attention.py", "Attention", "🔍", "See where each character looks"),
    ("pages/4_Scaling.py", "√d_k scaling", "📐", "Why attention divides by √d_k"),
)

_torch_configured = False


def setup_page(script: str) -> None:
    """First call of every page, passing its __file__."""
    _, title, icon, _ = next(p for p in PAGES if Path(p[0]).name == Path(script).name)
    st.set_page_config(page_title=f"{title} · MiniGPT Lab", page_icon=icon, layout="wide")
    configure_torch()
    read_run_from_url()
    entry, owner = session_run()  # first, so that a vanished run's notice shows now
    notice = st.session_state.pop(NOTICE, None)
    if notice:
        st.warning(notice)
    with st.sidebar:
        for page, label, page_icon, _ in PAGES:
            st.page_link(page, label=label, icon=page_icon)
        st.divider()
        st.caption(f"**Corpus** {md(current_corpus().label)}  \n**Model** {model_source()}  \n"
                   f"**Device** {current_device()}")
        if entry is not None:
            st.caption(f"**Run** `{entry.run_id}` ({'yours' if owner else 'watching'})")


def configure_torch() -> None:
    """One intra-op thread: under CPU contention (server, browser, trainers) more threads
    made training ~100x slower, not faster."""
    global _torch_configured
    if not _torch_configured:
        torch.set_num_threads(1)
        _torch_configured = True
