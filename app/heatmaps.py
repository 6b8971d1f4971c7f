"""Attention heatmaps on a page: panels in rows of columns, which stack on a phone, and long
texts shown a page of positions at a time, so every row and column keeps a readable label."""
from __future__ import annotations

import numpy as np
import streamlit as st

from minigpt import PAGE, attention_heatmap

from .i18n import _

PER_ROW = 2  # two panels side by side stay readable on a 1280 px projector; a phone stacks them


def position_pages(length: int) -> list[tuple[int, int]]:
    """(start, stop) of each page of at most PAGE positions."""
    return [(a, min(a + PAGE, length)) for a in range(0, length, PAGE)]


def pick_page(length: int, key: str) -> tuple[int, int]:
    """All positions when they fit on one page, else a chooser of pages."""
    pages = position_pages(length)
    if len(pages) == 1:
        return pages[0]
    chosen = st.select_slider(_("Positions shown"), range(len(pages)), key=key,
                              format_func=lambda i: f"{pages[i][0] + 1}–{pages[i][1]}",
                              help=_("A heatmap shows at most {page} positions, so that every character keeps a "
                                     "readable label; rows here show only the keys of the same page.", page=PAGE))
    return pages[chosen]


def draw_panels(panels: list[tuple[str, np.ndarray]], text: str, span: tuple[int, int], key: str) -> None:
    for row_start in range(0, len(panels), PER_ROW):
        row = panels[row_start : row_start + PER_ROW]
        for i, (col, (title, weights)) in enumerate(zip(st.columns(PER_ROW), row)):
            col.plotly_chart(attention_heatmap(weights, text, title, *span, tr=_), key=f"{key}:{row_start + i}",
                             config={"displayModeBar": False})
