"""√d_k scaling: the reference demo's experiment (entropy, max weight and the score's spread
per d_k) and the race of a scaled and an unscaled model."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ._layout import MARGIN, Translate, axis_title, english, figure, step_axis
from ..messages import N_

SCALING_METRICS = {
    "entropy": (N_("Entropy (higher = more uniform)"), N_("mean softmax entropy (nats)"), None),
    "max_weight": (N_("Max attention weight (lower = less saturated)"), N_("mean max weight"), [0, 1]),
}


def scaling_figure(table: pd.DataFrame, metric: str = "entropy", tr: Translate = english) -> go.Figure:
    """One metric of the √d_k experiment per d_k, unscaled vs scaled, as grouped bars."""
    _ = tr
    title, axis, span = SCALING_METRICS[metric]
    x = [f"d_k={d}" for d in table["d_k"]]
    return figure([
        {"type": "bar", "x": x, "y": table[f"{metric}_unscaled"].to_numpy(), "name": _("no scaling"),
         "marker": {"color": "#E53935"}},
        {"type": "bar", "x": x, "y": table[f"{metric}_scaled"].to_numpy(), "name": _("scaled by 1/√d_k"),
         "marker": {"color": "#1E88E5"}},
    ], {
        "title": {"text": _(title), "x": 0.0, "font": {"size": 14}}, "barmode": "group",
        "yaxis": {**axis_title(_(axis)), "range": span}, "height": 360, "margin": {**MARGIN, "t": 40},
        "legend": {"orientation": "h", "y": -0.15, "x": 0},
    })


def score_std_figure(table: pd.DataFrame, tr: Translate = english) -> go.Figure:
    """Standard deviation of q·k against d_k: it grows as √d_k unless scaled."""
    _ = tr
    d_k = table["d_k"].to_numpy(dtype=float)
    return figure([
        {"type": "scatter", "x": d_k, "y": table["score_std_unscaled"].to_numpy(), "name": _("q·k (measured)"),
         "mode": "lines+markers", "line": {"color": "#E53935"}},
        {"type": "scatter", "x": d_k, "y": np.sqrt(d_k), "name": _("√d_k (theory)"), "mode": "lines",
         "line": {"color": "#E53935", "dash": "dot"}},
        {"type": "scatter", "x": d_k, "y": table["score_std_scaled"].to_numpy(), "name": _("q·k / √d_k (measured)"),
         "mode": "lines+markers", "line": {"color": "#1E88E5"}},
    ], {
        "xaxis": {**axis_title("d_k"), "type": "log", "tickmode": "array", "tickvals": list(d_k),
                  "ticktext": [f"{int(d)}" for d in d_k]},
        "yaxis": axis_title(_("standard deviation of the score")), "height": 340, "margin": {**MARGIN, "t": 30},
        "legend": {"orientation": "h", "y": -0.25, "x": 0},
    })


RACE_METRICS = {  # what a race chart plots: (title, y-axis title)
    "loss": (N_("Loss on a fixed validation batch"), N_("loss (nats)")),
    "entropy": (N_("Mean attention entropy (low = saturated)"), N_("entropy (nats)")),
    "jacobian": (N_("How much of a change in the scores softmax lets through"), N_("‖∂softmax/∂scores‖")),
}


def race_figure(points: Sequence, metric: str, tr: Translate = english) -> go.Figure:
    """One measurement of a √d_k race over its steps: with 1/√d_k in blue, without in red, one
    line per layer (dashed after the first)."""
    _ = tr
    title, y_title = RACE_METRICS[metric]
    steps = [p.step for p in points]
    data = []
    for side, name, color in (("scaled", _("with 1/√d_k"), "#1E88E5"), ("unscaled", _("without"), "#E53935")):
        values = np.array([np.atleast_1d(getattr(getattr(p, side), metric)) for p in points])  # (points, layers)
        for layer in range(values.shape[1]):
            label = name if values.shape[1] == 1 else _("{name} · layer {layer}", name=name, layer=layer + 1)
            data.append({"type": "scatter", "mode": "lines+markers", "x": steps, "y": values[:, layer], "name": label,
                         "line": {"color": color, "dash": ["solid", "dash", "dot", "dashdot"][layer % 4]}})
    return figure(data, {
        "title": {"text": _(title), "x": 0.0, "font": {"size": 13}}, "height": 300,
        "xaxis": step_axis(_("step"), steps), "yaxis": {"title": {"text": _(y_title)}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.3}, "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
    })
