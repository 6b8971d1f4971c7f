"""Attention: the heatmaps of who attends to whom, a task's right keys over training, and how
much each head matters (the knock-outs)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ._layout import (MARGIN, MASK_COLOR, Translate, axis_title, english, figure, hline, legend_below, masked,
                      position_labels, step_axis, text_px, tick, vline)

POSITIONS_PER_HEATMAP = 24  # at most this many rows and columns in one heatmap, each labelled


def attention_panels(attention: np.ndarray, view: str = "layers", layer: int = 0,
                     tr: Translate = english) -> list[tuple[str, np.ndarray]]:
    """The heatmaps a view shows, as (title, weights (T, T)), attention shaped (layers, heads, T, T).

    view="layers": each layer's mean over heads (the demo's first figure);
    view="heads":  the heads of one layer (the demo's second figure);
    view="grid":   every layer x head, layer by layer.
    """
    _ = tr
    attention = np.asarray(attention, dtype=np.float32)
    n_layers, n_heads = attention.shape[:2]
    if view == "layers":
        return [(_("layer {layer} · mean of heads", layer=l + 1), attention[l].mean(axis=0)) for l in range(n_layers)]
    if view == "heads":
        if not 0 <= layer < n_layers:
            raise ValueError(f"layer must be in 0..{n_layers - 1}, got {layer}")
        return [(_("layer {layer} · head {head}", layer=layer + 1, head=h + 1), attention[layer, h])
                for h in range(n_heads)]
    if view == "grid":
        return [(_("layer {layer} · head {head}", layer=l + 1, head=h + 1), attention[l, h])
                for l in range(n_layers) for h in range(n_heads)]
    raise ValueError(f"view must be 'layers', 'heads' or 'grid', got {view!r}")


def attention_heatmap(weights: np.ndarray, text: str, title: str = "", start: int = 0,
                      stop: int | None = None, tr: Translate = english,
                      expected: np.ndarray | None = None) -> go.Figure:
    """One attention matrix (T, T) as a heatmap: rows are queries, columns keys, the future grey.

    start, stop: the positions shown (a page of a long text); every row and column keeps its
    character as a tick label, upright, and its position in the hover text.
    expected: a (T, T) 0/1 mask of the right keys (a task's answer rows), drawn as open squares.
    """
    _ = tr
    T = np.asarray(weights).shape[-1]
    stop = T if stop is None else min(stop, T)
    if not 0 <= start < stop:
        raise ValueError(f"positions {start}..{stop} are not inside the text's {T}")
    labels = position_labels(text[:T])[start:stop]
    z = masked(weights)[start:stop, start:stop]
    ticks = [tick(c) for c in text[start:stop]]
    query, key, weight = _("query"), _("key"), _("weight")  # plotly's own %{…} fields stay as they are
    hover = f"{query} %{{y}}<br>{key} %{{x}}<br>{weight} %{{z:.3f}}<extra></extra>"
    data = [{"type": "heatmap", "z": z, "x": labels, "y": labels, "coloraxis": "coloraxis",
             "hovertemplate": hover, "hoverongaps": False}]
    if expected is not None:
        rows, cols = np.nonzero(np.asarray(expected)[start:stop, start:stop])
        data.append({"type": "scatter", "x": [labels[c] for c in cols], "y": [labels[r] for r in rows],
                     "mode": "markers", "name": _("right key"), "showlegend": False, "hoverinfo": "skip",
                     "marker": {"symbol": "square-open", "size": 16 if stop - start <= 16 else 11,
                                "color": "#FF1744", "line": {"width": 2}}})
    font = {"size": 12 if stop - start <= 16 else 10}
    # fixed margins, room for the ticks and the axis title, that no axis grows: see _stack
    axis = {"tickmode": "array", "tickvals": labels, "ticktext": ticks, "tickangle": 0, "tickfont": font,
            "showgrid": False, "constrain": "domain", "automargin": False}
    return figure(data, {
        "xaxis": {**axis, "title": {"text": _("key")}, "side": "bottom"},
        "yaxis": {**axis, "title": {"text": _("query")}, "autorange": "reversed", "scaleanchor": "x"},
        "title": {"text": title, "x": 0.0, "font": {"size": 13}},
        "coloraxis": {"colorscale": "Viridis", "cmin": 0.0, "cmax": 1.0, "showscale": False},
        "plot_bgcolor": MASK_COLOR, "height": max(300, 100 + 22 * (stop - start)),
        "margin": {"l": 36 + max(text_px(t, font["size"]) for t in ticks), "r": 10, "t": 36, "b": 56},
    })


def right_key_figure(steps: Sequence[int], scores: np.ndarray, chance: float, chosen: int | None = None,
                     tr: Translate = english) -> go.Figure:
    """The time-lapse's right-key score: scores (steps, layers, heads), drawn as each layer's best head."""
    _ = tr
    scores = np.asarray(scores, dtype=np.float32)
    data = [{"type": "scatter", "x": list(steps), "y": scores[:, layer].max(axis=-1), "mode": "lines+markers",
             "name": _("layer {layer}, best head", layer=layer + 1)} for layer in range(scores.shape[1])]
    shape, note = hline(chance, _("a uniform head: {chance:.2f}", chance=chance))
    shapes = [shape]
    if chosen is not None:
        shapes.append(vline(chosen, color="#FF1744", dash="solid")[0])
    return figure(data, {
        "xaxis": step_axis(_("step"), steps), "yaxis": {**axis_title(_("weight on the right keys")), "range": [0, 1.02]},
        "shapes": shapes, "annotations": [note], "height": 280, "margin": MARGIN, "legend": legend_below(),
    })


def importance_figure(rise: np.ndarray, tr: Translate = english) -> go.Figure:
    """How much the validation loss rises when each head alone is zeroed, as a layer × head grid
    with the number in every cell (a head that helps is red; one whose loss falls, blue)."""
    _ = tr
    rise = np.asarray(rise, dtype=float)
    span = float(np.abs(rise).max()) or 1.0
    layers = [_("layer {layer}", layer=l + 1) for l in range(rise.shape[0])]
    heads = [_("head {head}", head=h + 1) for h in range(rise.shape[1])]
    change = _("val loss change")
    return figure([{"type": "heatmap", "z": rise, "x": heads, "y": layers, "colorscale": "RdBu", "reversescale": True,
                     "zmid": 0, "zmin": -span, "zmax": span, "texttemplate": "%{z:+.3f}", "showscale": False,
                     "hovertemplate": f"%{{y}} · %{{x}}<br>{change} %{{z:+.4f}}<extra></extra>"}], {
        "yaxis": {"autorange": "reversed", "automargin": False}, "xaxis": {"side": "top", "automargin": False},
        "height": 90 + 48 * rise.shape[0],  # fixed margins, that no axis grows: see _stack
        "margin": {"l": 16 + max(map(text_px, layers)), "r": 10, "t": 40, "b": 10},
    })
