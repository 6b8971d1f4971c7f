"""How every chart is drawn: Plotly's own toolbar, on hover, with one button that saves the chart
as a PNG in the browser (no server-side renderer: that would be a heavy dependency), its tooltip
in the page's language through a Plotly locale of our own."""
from __future__ import annotations

from .i18n import _, language

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
