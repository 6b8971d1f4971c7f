"""How every chart is drawn: Plotly's own toolbar, on hover, with one button that saves the chart
as a PNG in the browser (no server-side renderer: that would be a heavy dependency), its tooltip
in the page's language through a Plotly locale of our own; and, under the charts of an experiment,
a button that saves them as an HTML page that stays interactive."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import streamlit as st

from app.chrome.i18n import _, language

if TYPE_CHECKING:  # Plotly is heavy to import, and config() is on every page's path
    import plotly.graph_objects as go

SAVE = "Download plot as a PNG"  # Plotly's own words for the button, the key of its locale dictionary


def config() -> dict:
    """The config every st.plotly_chart gets."""
    lang = language()
    return {
        "displayModeBar": "hover",
        "modeBarButtons": [["toImage"]],
        "displaylogo": False,
        "toImageButtonOptions": {"format": "png", "scale": 2, "filename": "minigpt-lab"},
        "locale": lang,
        "locales": {lang: {"dictionary": {SAVE: _("Download plot as a PNG")}}},
    }


def html_button(figures: Sequence[go.Figure], name: str, key: str) -> None:
    """Save these charts as one HTML page (plotly.js inside, so it opens offline), built only when
    the button is clicked."""
    from minigpt.viz import figures_html
    title = f"MiniGPT Lab · {name}"
    st.download_button(_("Save as HTML"), data=lambda: figures_html(figures, title), file_name=f"minigpt-{key}.html",
                       mime="text/html", on_click="ignore", key=f"html_{key}", type="tertiary",
                       icon=":material/download:",
                       help=_("One page with these charts that opens in any browser, offline, and stays "
                              "interactive: hover, zoom, and the PNG button."))


SWIPE = "swipe_hint"  # the key prefix of the hints a phone shows over a table wider than itself


def swipe_hint(key: str) -> None:
    """Over a table with more columns than a phone is wide: a line saying it scrolls sideways, shown
    on narrow screens only (the page's CSS), where a phone draws no scrollbar and just cuts it off."""
    with st.container(key=f"{SWIPE}_{key}"):
        st.caption(_("⇆ Swipe the table sideways: it has more columns than this screen is wide."))
