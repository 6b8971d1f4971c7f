"""Generation: the next-character distribution, the characters written so far, and where the
character that chose the next one looked."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ._layout import Translate, english, figure, position_labels, sign, text_px, tick

if TYPE_CHECKING:
    from ..lab.predictions import Beliefs
    from ..sample import SampledToken


def beliefs_figure(belief: Beliefs, chars: Sequence[str], top: int = 20, tr: Translate = english) -> go.Figure:
    """The `top` likeliest next characters after the temperature: blue what is drawn from, grey
    what top-k or top-p cut off (at the chance the temperature alone would give it)."""
    _ = tr
    order = np.argsort(-belief.tempered, kind="stable")[:top]
    labels = [tick(chars[i]) for i in order]
    cut = belief.removed[order]
    y = np.where(cut, belief.tempered[order], belief.final[order])
    probability, removed = _("probability"), _("cut off by top-k / top-p")
    title = "<br>".join((  # two lines: one would run past a phone's edge
        _("entropy {entropy:.2f} nats · effective number of choices e^H = {choices:.1f}", entropy=belief.entropy,
          choices=belief.effective_choices), _("grey: cut off by top-k / top-p")))
    positions = list(range(len(order)))
    return figure([{"type": "bar", "x": positions, "y": np.asarray(y),
                     "marker": {"color": ["#BDBDBD" if c else "#1E88E5" for c in cut]},
                     "text": [removed if c else "" for c in cut], "textposition": "none", "customdata": labels,
                     "hovertemplate": f"%{{customdata}}<br>{probability} %{{y:.3f}} %{{text}}<extra></extra>"}], {
        "xaxis": {"tickmode": "array", "tickvals": positions, "ticktext": labels, "tickangle": 0, "automargin": False},
        "yaxis": {"title": {"text": probability}, "range": [0, max(1e-9, float(y.max())) * 1.1], "automargin": False},
        "title": {"text": title, "x": 0.0, "font": {"size": 13}}, "height": 314, "showlegend": False,
        "margin": {"l": 64, "r": 10, "t": 54, "b": 30},  # fixed, that no axis grows: see _stack
    })


def steps_table(steps: Sequence[SampledToken], tr: Translate = english) -> pd.DataFrame:
    """One row per generated character: the choice, its model probability and the model's five
    likeliest characters, in one narrow column, so that the table fits a phone (their probabilities
    are in the step inspector)."""
    _ = tr
    step_header, chosen_header, prob_header, top_header = _("step"), _("chosen"), _("p(chosen)"), _("likeliest five")
    return pd.DataFrame([{step_header: i + 1, chosen_header: sign(step.text), prob_header: round(step.prob, 4),
                          top_header: " ".join(sign(text) for text, _p in step.top)} for i, step in enumerate(steps)],
                        columns=[step_header, chosen_header, prob_header, top_header])


def step_attention_figure(rows: np.ndarray, text: str, tr: Translate = english) -> go.Figure:
    """Each layer's attention row (mean of its heads) of the character that chose the next one."""
    _ = tr
    rows = np.asarray(rows, dtype=np.float32)
    labels = position_labels(text[-rows.shape[1]:])
    layers = [_("layer {layer}", layer=i + 1) for i in range(rows.shape[0])]
    weight = _("weight")
    return figure([{"type": "heatmap", "z": rows, "x": labels, "y": layers, "coloraxis": "coloraxis",
                     "hovertemplate": f"%{{y}} · %{{x}}<br>{weight} %{{z:.3f}}<extra></extra>"}], {
        "xaxis": {"tickmode": "array", "tickvals": labels, "ticktext": [tick(c) for c in text[-rows.shape[1]:]],
                  "tickangle": 0, "title": {"text": _("key")}, "automargin": False},
        "yaxis": {"autorange": "reversed", "automargin": False},
        "coloraxis": {"colorscale": "Viridis", "cmin": 0.0, "cmax": 1.0, "showscale": False},
        "height": 80 + 36 * rows.shape[0],  # fixed margins, that no axis grows: see _stack
        "margin": {"l": 16 + max(map(text_px, layers)), "r": 10, "t": 10, "b": 56},
    })
