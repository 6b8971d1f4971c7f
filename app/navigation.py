"""What every page does first, written once: page config, torch threads, the run and the
comparison in the address, the sidebar drawn with `st.page_link`, then the page's title, its
lesson links, its introduction and, for the pages that need one, the loaded model.

The app keeps Streamlit's plain `pages/` convention, without `st.navigation`: with a folder
named pages/, a cold deep link would skip an `st.navigation` router. The pages themselves are
defined in app.chrome.site.
"""
from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import TYPE_CHECKING

import streamlit as st

from minigpt import BUILTIN_CORPORA

from app.chrome import charts, streamlit_words, url
from app.chrome.charts import SWIPE
from app.chrome.i18n import _, choose_language, language_switch, streamlit_chrome_css
from app.chrome.site import HOME, LESSON, PAGES, Page, page_of
from app.chrome.streamlit_words import uploaders_css
from app.chrome.text import md
from app.parts import lesson_links, line
from app.state import classroom, kept_runs, loaded_model, warmup
from app.state.choices import SHIPPED, device_label, model_source, model_source_label
from app.state.corpora import current_corpus
from app.state.runs import NOTICE_KEY, prepare_training, read_run_from_url, session_run

if TYPE_CHECKING:
    from app.state.loaded_model import LoadedModel

def offer(page: Page) -> str:
    """What a page's link says it offers, in the page's language."""
    return _(page.offer, steps=len(lesson_links.lesson().steps)) if page == LESSON else _(page.offer)


def open_page(page: Page, intro: str = "", *, lesson_steps: Sequence[int] = ()) -> None:
    """The top of a page: setup, its title, links to its lesson steps, its introduction (a template
    marked with N_, translated here once the language is known)."""
    setup_page(page.script)
    st.title(_(page.label))
    if lesson_steps:
        lesson_links.link(*lesson_steps)
    if intro:
        st.markdown(_(intro))


def open_model_page(page: Page, intro: str = "", *, lesson_steps: Sequence[int] = ()) -> LoadedModel:
    """`open_page`, then the loaded model and its one-line summary; a page without a model to show
    says why, links to Home and ends there."""
    open_page(page, intro, lesson_steps=lesson_steps)
    loaded = loaded_model.require_model()
    st.caption(loaded.summary())
    return loaded


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


def disabled_labels_css() -> str:
    """A disabled widget's label in the theme's text colour at 60%, as Streamlit draws captions (4.5:1 or more
    on white: .streamlit/config.toml), not its 40% (2.4:1). WCAG lets an inactive control's words off, but
    its label is read as text all the same (axe: color-contrast), and it still reads as disabled beside
    its greyed box. Nothing where no text colour is set (Streamlit's own colours then)."""
    text = (st.get_option("theme.textColor") or "").lstrip("#")
    if len(text) != 6:
        return ""
    red, green, blue = (int(text[i:i + 2], 16) for i in (0, 2, 4))
    return (f"[data-testid=stWidgetLabel][disabled], [data-testid=stWidgetLabel][disabled] p "
            f"{{ color: rgba({red}, {green}, {blue}, 0.6) }} ")


_process_configured = False


def setup_page(script: str) -> None:
    """First call of every page (open_page calls it), passing its script."""
    page = page_of(script)
    lang = choose_language()  # first: the tab's title is in the language too
    st.set_page_config(page_title=f"{_(page.label)} · MiniGPT Lab", page_icon=page.icon, layout="wide")
    configure_process(wait=page != HOME)
    read_run_from_url()
    classroom.read_and_sync_url()  # the class and the kept runs travel in the address, from any page
    kept_runs.read_and_sync_url()
    entry, owner = session_run()  # first, so that a vanished run's notice shows now
    notice = st.session_state.pop(NOTICE_KEY, None)
    if notice:
        st.warning(notice)
    with st.sidebar:
        # the page's own CSS as markdown, which the browser draws with the page: st.html's code loads
        # on first use, and until it has, every link on a first visit showed cut off
        st.markdown(f"<style>{WRAP_LINKS}{FIT_PHONES}{disabled_labels_css()}{streamlit_chrome_css()}{uploaders_css()}"
                    "</style>",
                    unsafe_allow_html=True)
        language_switch()
        for linked in PAGES:
            st.page_link(linked.script, label=_(linked.label), icon=linked.icon, query_params={url.LANG: lang})
        st.divider()
        source, learned, corpus = model_source(), loaded_model.loaded_corpus(), current_corpus()
        model = (_("{source}, trained on {corpus}", source=model_source_label(source), corpus=md(learned))
                 if learned else model_source_label(source))
        st.caption(_("**Model** {model}  \n**Corpus for new runs** {corpus}  \n**Device** {device}",
                     model=model, corpus=md(corpus.label), device=device_label()))
        if source != SHIPPED and corpus.key in BUILTIN_CORPORA:
            st.button(_("Back to the shipped model"), key="use_shipped", on_click=loaded_model.use_shipped_model,
                      help=_("Generate, Attention and the other pages use the model shipped for {corpus} again; "
                             "your run stays as it is.", corpus=corpus.key))
        if entry is not None:
            st.caption(_("**Run** `{run}` (yours)", run=entry.run_id) if owner
                       else _("**Run** `{run}` (watching)", run=entry.run_id))
        streamlit_words.translate_streamlit_words()
        charts.describe_for_readers()
    line.sidebar_note()


def configure_process(wait: bool = True) -> None:
    """At every page: torch and the model code load once per process on a thread of their own
    (app.state.warmup, which also sets torch to one thread); every page but Home waits for them (Home
    starts the load once it is drawn). Before
    that, once, gc.freeze() takes what Streamlit and plotly made at import out of the garbage
    collector's walk (the warmup freezes torch's once loaded; see its _configure)."""
    global _process_configured
    if not _process_configured:
        gc.freeze()
        _process_configured = True
    if wait:
        warmup.wait(then=prepare_training)
