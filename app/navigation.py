"""The pages and what every page does first: page config, torch threads, the run in the URL,
and the sidebar drawn with `st.page_link`. A new page is one file in pages/ and one row in PAGES.

The app keeps Streamlit's plain `pages/` convention, without `st.navigation`: with a folder
named pages/, a cold deep link would skip an `st.navigation` router.
"""
from __future__ import annotations

import gc
from pathlib import Path

import streamlit as st
import torch

from minigpt import BUILTIN_CORPORA, N_

from . import compare
from .choices import SHIPPED, current_device, model_source, model_source_label
from .corpora import current_corpus
from .charts import SWIPE
from .i18n import _, choose_language, language_switch, streamlit_chrome_css
from .runs import NOTICE, read_run_from_url, session_run
from .text import md

HOME = "streamlit_app.py"
# (script, label, icon, what it offers): the sidebar and Home's links, in this order
PAGES = (
    (HOME, N_("Home"), "🏠", N_("The loaded model; corpus, model and device")),
    ("pages/9_Lesson.py", N_("Lesson"), "🎓", N_("A guided path through your own model, in 15 steps")),
    ("pages/1_Train.py", N_("Train"), "🏋️", N_("Train a model and watch it learn")),
    ("pages/2_Generate.py", N_("Generate"), "✍️", N_("Write text, one character at a time")),
    ("pages/3_Attention.py", N_("Attention"), "🔍", N_("See where each character looks")),
    ("pages/4_Scaling.py", N_("√d_k scaling"), "📐", N_("Why attention divides by √d_k")),
    ("pages/5_Inside.py", N_("Inside attention"), "🔬", N_("How one attention weight is made; what each head does")),
    ("pages/6_Model.py", N_("Inside the model"), "🧩", N_("Positions, embeddings, and the prediction layer by layer")),
    ("pages/8_Experiments.py", N_("Experiments"), "🧪", N_("Take a part of the model out and measure what it did")),
    ("pages/7_Glossary.py", N_("Glossary"), "📖", N_("The course's terms, Chinese and English")),
)

# Streamlit keeps a page link's label on one line and cuts off what does not fit: the lesson's step
# titles, side by side on a tool page or on a phone, wrap instead
WRAP_LINKS = ("[data-testid=stPageLink-NavLink] span:has(> [data-testid=stMarkdownContainer]), "
              "[data-testid=stPageLink-NavLink] [data-testid=stMarkdownContainer] p "
              "{ white-space: normal; overflow: visible } ")
# on a phone: displayed formulas in smaller type (the lesson's are written to fit then), and the line
# that says a wide table scrolls sideways (charts.swipe_hint), which only a phone shows
FIT_PHONES = (f"[class*=st-key-{SWIPE}] {{ display: none }} "
              "@media (max-width: 640px) { [data-testid=stMain] .katex-display { font-size: 0.78em; "
              "overflow-x: auto; overflow-y: hidden } "
              f"[class*=st-key-{SWIPE}] {{ display: block }} }} ")

_process_configured = False


def setup_page(script: str) -> None:
    """First call of every page, passing its __file__."""
    title, icon = next((label, icon) for page, label, icon, _offer in PAGES if Path(page).name == Path(script).name)
    lang = choose_language()  # first: the tab's title is in the language too
    st.set_page_config(page_title=f"{_(title)} · MiniGPT Lab", page_icon=icon, layout="wide")
    configure_process()
    read_run_from_url()
    compare.read_and_sync_url()
    entry, owner = session_run()  # first, so that a vanished run's notice shows now
    notice = st.session_state.pop(NOTICE, None)
    if notice:
        st.warning(notice)
    with st.sidebar:
        # the page's own CSS as markdown, which the browser draws with the page: st.html's code loads
        # on first use, and until it has, every link on a first visit showed cut off
        from .uploads import uploaders_css  # here: uploads imports models, which imports this module

        st.markdown(f"<style>{WRAP_LINKS}{FIT_PHONES}{streamlit_chrome_css()}{uploaders_css()}</style>",
                    unsafe_allow_html=True)
        language_switch()
        for page, label, page_icon, _offer in PAGES:
            st.page_link(page, label=_(label), icon=page_icon, query_params={"lang": lang})
        st.divider()
        from . import models  # here: models imports this module's HOME

        source, learned = model_source(), models.loaded_corpus()
        model = (_("{source}, trained on {corpus}", source=model_source_label(source), corpus=md(learned))
                 if learned else model_source_label(source))
        st.caption(_("**Model** {model}  \n**Corpus for new runs** {corpus}  \n**Device** {device}",
                     model=model, corpus=md(current_corpus().label), device=current_device()))
        if source != SHIPPED and current_corpus().key in BUILTIN_CORPORA:
            st.button(_("Back to the shipped model"), key="use_shipped", on_click=models.use_shipped_model,
                      help=_("Generate, Attention and the other pages use the model shipped for {corpus} again; "
                             "your run stays as it is.", corpus=current_corpus().key))
        if entry is not None:
            st.caption(_("**Run** `{run}` (yours)", run=entry.run_id) if owner
                       else _("**Run** `{run}` (watching)", run=entry.run_id))


def configure_process() -> None:
    """Once per server process, at the first page.

    One intra-op torch thread: under CPU contention (server, browser, trainers) more threads
    made training ~100x slower, not faster.

    gc.freeze(): Streamlit collects garbage after every script run (`runner.postScriptGC`), and a
    full collection walked every object the libraries made at import (torch, plotly, pandas,
    Streamlit: ~250,000), ~240 ms with the GIL held, after every widget move. Those live as long
    as the process; frozen, the collection only walks what was made since. Frozen objects are
    still freed when nothing refers to them."""
    global _process_configured
    if not _process_configured:
        torch.set_num_threads(1)
        gc.freeze()
        _process_configured = True
