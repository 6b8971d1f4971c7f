"""Figures saved as one HTML page, for a learner to keep or a teacher to show offline."""
from __future__ import annotations

import html
from collections.abc import Sequence

import plotly.graph_objects as go


def figures_html(figures: Sequence[go.Figure], title: str) -> str:
    """Figures as one standalone HTML page that opens offline: plotly.js is inside, once (about
    4.8 MB), and each figure stays interactive (hover, zoom, Plotly's PNG button)."""
    config = {"displaylogo": False}
    parts = [figure.to_html(full_html=False, include_plotlyjs=i == 0, config=config) for i, figure in enumerate(figures)]
    return ("<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"><title>" + html.escape(title) +
            "</title></head>\n<body>\n" + "\n".join(parts) + "\n</body>\n</html>\n")
