"""Attention heatmaps on a page: panels in rows of columns, which stack on a phone, and long
texts shown a page of positions at a time, so every row and column keeps a readable label."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from minigpt.lab.tasks import Task, find_task, right_key_chance, right_key_mask, right_key_scores
from minigpt.viz import POSITIONS_PER_HEATMAP, attention_heatmap

from app.chrome.charts import config as chart_config
from app.chrome.charts import shared_figure
from app.chrome.i18n import _
from app.state.run_notes import task_label

PER_ROW = 2  # two panels side by side stay readable on a 1280 px projector; a phone stacks them


def position_pages(length: int) -> list[tuple[int, int]]:
    """(start, stop) of each page of at most POSITIONS_PER_HEATMAP positions."""
    return [(a, min(a + POSITIONS_PER_HEATMAP, length)) for a in range(0, length, POSITIONS_PER_HEATMAP)]


def pick_page(length: int, key: str) -> tuple[int, int]:
    """All positions when they fit on one page, else a chooser of pages."""
    pages = position_pages(length)
    if len(pages) == 1:
        return pages[0]
    chosen = st.select_slider(_("Positions shown"), range(len(pages)), key=key,
                              format_func=lambda i: f"{pages[i][0] + 1}–{pages[i][1]}",
                              help=_("A heatmap shows at most {page} positions, so that every character keeps a "
                                     "readable label; rows here show only the keys of the same page.", page=POSITIONS_PER_HEATMAP))
    return pages[chosen]


def draw_panels(panels: list[tuple[str, np.ndarray]], text: str, span: tuple[int, int], key: str,
                expected: np.ndarray | None = None) -> None:
    """expected: a task's right keys, outlined on every panel."""
    for row_start in range(0, len(panels), PER_ROW):
        row = panels[row_start : row_start + PER_ROW]
        for i, (col, (title, weights)) in enumerate(zip(st.columns(PER_ROW), row)):
            col.plotly_chart(shared_figure(attention_heatmap, weights, text, title, *span, expected=expected),
                             key=f"{key}:{row_start + i}", config=chart_config())


@dataclass(frozen=True)
class TaskLine:
    """A text that begins like a line of a task: what its attention should look like."""

    task: Task
    question: str
    mask: np.ndarray   # (T, T) 1 on the right keys of the answer rows
    chance: float      # what a head spreading its weight evenly scores

    def scores(self, attention: np.ndarray) -> np.ndarray:
        return right_key_scores(attention, self.task, self.question)


def task_line(text: str) -> TaskLine | None:
    """The task line `text` is, when it is one and reaches at least the separator."""
    found = find_task(text)
    if found is None:
        return None
    task, question = found
    return TaskLine(task, question, right_key_mask(task, question, len(text)),
                    right_key_chance(task, question, len(text)))


def right_key_note(line: TaskLine, scores: np.ndarray) -> None:
    """Which head finds the right keys, against a uniform head, and every head's score."""
    layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    st.markdown(_("This text is a line of the **{task}** task. In each answer row a red square marks the key that "
                  "holds the character to write next: the **right key**. The head that puts most weight there, "
                  "layer {layer} · head {head}, puts **{best:.0%}** of it on the right keys; a head spreading its "
                  "weight evenly over the keys it can see would put {chance:.0%}.", task=task_label(line.task.name),
                  layer=layer + 1, head=head + 1, best=float(scores[layer, head]), chance=line.chance))
    table = pd.DataFrame(scores, index=[_("layer {layer}", layer=l + 1) for l in range(scores.shape[0])],
                         columns=[_("head {head}", head=h + 1) for h in range(scores.shape[1])])
    bars = {column: st.column_config.ProgressColumn(column, min_value=0.0, max_value=1.0, format="%.2f")
            for column in table.columns}
    st.dataframe(table, column_config={"_index": st.column_config.TextColumn(_("weight on the right keys")), **bars})
