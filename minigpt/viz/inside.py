"""Inside the model: how one attention weight is made (query, keys, scores, values), the
position encodings, the embedding table and the logit lens."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from ._layout import MARGIN, MASK_COLOR, Spec, Translate, axis_title, english, figure, position_labels, stack, tick

if TYPE_CHECKING:
    from ..lab.heads import AttentionRow


def attention_row_figure(row: AttentionRow, text: str, tr: Translate = english) -> go.Figure:
    """One query's scores, scores ÷ √d_k and softmax weights over every key, stacked bars; the
    keys the causal mask hides are grey, at 0, and their scaled score is marked −∞."""
    return figure(*_row_spec(row, text, tr))


def _row_spec(row: AttentionRow, text: str, tr: Translate) -> Spec:
    _ = tr
    keys = position_labels(text[: len(row.weights)])
    color = np.where(row.allowed, "#1E88E5", MASK_COLOR).tolist()
    if row.divisor == 1.0:
        divided = _("÷ 1: without the scaling (√d_k would be {root:.2f}); the causal mask sets the future to −∞",
                    root=len(row.q) ** 0.5)
    else:
        divided = _("÷ √d_k = {divisor:.2f}; the causal mask sets the future to −∞", divisor=row.divisor)
    titles = (_("scores q·k"), divided, _("softmax: the attention weights (they add up to 1)"))
    key, weight = _("key"), _("weight")  # plotly's own %{…} fields stay as they are
    masked = [_("−∞ (masked)") if not ok else "" for ok in row.allowed]
    bars = [  # (y, colours, hover, extra): three rows of bars sharing the keys' axis
        (np.where(row.allowed, row.scores, 0.0), color, f"{key} %{{x}}<br>q·k %{{y:.3f}}<extra></extra>", {}),
        (np.where(row.allowed, row.scaled, 0.0), color, f"{key} %{{x}}<br>q·k/√d_k %{{y:.3f}}<extra></extra>",
         {"text": masked, "textposition": "outside"}),
        (row.weights, np.where(row.allowed, "#E53935", MASK_COLOR).tolist(),
         f"{key} %{{x}}<br>{weight} %{{y:.3f}}<extra></extra>", {}),
    ]
    gap, height = 0.08, (1 - 2 * 0.08) / 3  # make_subplots(rows=3, vertical_spacing=0.08), written out
    data, layout = [], {"height": 520, "showlegend": False, "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
                        "annotations": []}
    for i, (y, colors, hover, extra) in enumerate(bars):
        n = "" if i == 0 else str(i + 1)
        top = 1 - i * (height + gap)
        data.append({"type": "bar", "x": keys, "y": np.asarray(y), "marker": {"color": colors}, "hovertemplate": hover,
                     "xaxis": f"x{n}", "yaxis": f"y{n}", **extra})
        layout[f"yaxis{n}"] = {"anchor": f"x{n}", "domain": [top - height, top]}
        layout[f"xaxis{n}"] = {"anchor": f"y{n}", "domain": [0.0, 1.0], "matches": "x3", "showticklabels": False}
        layout["annotations"].append({"text": titles[i], "x": 0.0, "y": top, "xref": "paper", "yref": "paper",
                                      "xanchor": "left", "yanchor": "bottom", "showarrow": False,
                                      "font": {"size": 14}})
    layout["yaxis3"]["range"] = [0, 1.05]
    layout["xaxis3"] = {"anchor": "y3", "domain": [0.0, 1.0], "tickmode": "array", "tickvals": keys,
                        "ticktext": [tick(c) for c in text[: len(keys)]], "tickangle": 0, "title": {"text": key}}
    return data, layout


def _vectors_spec(rows: dict[str, np.ndarray], title: str, tr: Translate) -> Spec:
    _ = tr
    labels, z = list(rows), np.stack([np.asarray(v, dtype=float) for v in rows.values()])
    span = float(np.abs(z).max()) or 1.0
    component = _("component")
    return [{"type": "heatmap", "z": z, "y": labels, "x": list(range(1, z.shape[1] + 1)),
             "colorscale": "RdBu", "zmid": 0, "zmin": -span, "zmax": span,
             "hovertemplate": f"%{{y}}<br>{component} %{{x}}: %{{z:.3f}}<extra></extra>"}], {
        "yaxis": {"autorange": "reversed", "tickmode": "array", "tickvals": labels, "ticktext": labels},
        "xaxis": {"title": {"text": _("component (1 … d_k)")}},
        "title": {"text": title, "x": 0.0, "font": {"size": 13}}, "height": max(220, 60 + 20 * len(labels)),
        "margin": {"l": 10, "r": 10, "t": 36, "b": 10},
    }


def _key_labels(row: AttentionRow, text: str, tr: Translate) -> list[str]:
    _ = tr
    labels = position_labels(text[: len(row.allowed)])
    return [label if ok else _("{key} (future, masked)", key=label) for label, ok in zip(labels, row.allowed)]


def keys_figure(row: AttentionRow, text: str, tr: Translate = english) -> go.Figure:
    """The query vector q on top of every key vector k: the numbers whose dot products are the scores."""
    return figure(*_keys_spec(row, text, tr))


def _keys_spec(row: AttentionRow, text: str, tr: Translate) -> Spec:
    _ = tr
    labels = _key_labels(row, text, tr)
    rows = {_("q of {query}", query=position_labels(text)[row.query]): row.q}
    rows.update({f"k {label}": k for label, k in zip(labels, row.k)})
    return _vectors_spec(rows, _("query q and keys k (d_k = {d_k} numbers each)", d_k=len(row.q)), tr)


def values_figure(row: AttentionRow, text: str, tr: Translate = english) -> go.Figure:
    """Every value vector v with its weight, and their weighted sum: what this head passes on."""
    return figure(*_values_spec(row, text, tr))


def _values_spec(row: AttentionRow, text: str, tr: Translate) -> Spec:
    _ = tr
    labels = _key_labels(row, text, tr)
    rows = {f"v {label} · {w:.2f}": v for label, v, w in zip(labels, row.v, row.weights)}
    rows[_("output Σ weight·v")] = row.output
    return _vectors_spec(rows, _("values v (with their weights) and the output"), tr)


def weight_figure(row: AttentionRow, text: str, tr: Translate = english) -> go.Figure:
    """How one attention weight is made, as one figure: the query and the keys, the scores
    (÷ √d_k, masked, softmax), the values and the output, one above the other. One chart rather
    than three because Streamlit draws a changed chart from scratch, and this view changes
    whenever the learner moves the query, the head or the layer."""
    _ = tr
    return figure(*stack([(_("1. The query and the keys"), _keys_spec(row, text, tr)),
                            (_("2. Scores, ÷ √d_k, the causal mask and softmax"), _row_spec(row, text, tr)),
                            (_("3. The output: the weighted sum of the values"), _values_spec(row, text, tr))]))


def positions_figure(pe: np.ndarray, tr: Translate = english) -> go.Figure:
    """The sinusoidal position encodings: one row per position, one column per dimension."""
    _ = tr
    position, dimension, value = _("position"), _("dimension"), _("value")
    return figure([{"type": "heatmap", "z": np.asarray(pe), "colorscale": "RdBu", "zmid": 0, "zmin": -1, "zmax": 1,
                    "hovertemplate": f"{position} %{{y}}, {dimension} %{{x}}<br>{value} %{{z:.3f}}<extra></extra>"}], {
        "xaxis": axis_title(_("dimension (0 … d_model − 1):<br>fast waves on the left, slow on the right")),
        "yaxis": {**axis_title(position), "autorange": "reversed"}, "height": 360, "margin": MARGIN,
    })


def similarity_figure(similarity: np.ndarray, tr: Translate = english) -> go.Figure:
    """Cosine similarity of every pair of position vectors."""
    _ = tr
    position, similar = _("position"), _("cosine similarity")
    return figure([{"type": "heatmap", "z": np.asarray(similarity), "colorscale": "Viridis", "zmin": -1, "zmax": 1,
                    "hovertemplate": f"{position} %{{y}} · %{{x}}<br>{similar} %{{z:.3f}}<extra></extra>"}], {
        "xaxis": axis_title(position), "yaxis": {**axis_title(position), "autorange": "reversed", "scaleanchor": "x"},
        "height": 380, "margin": MARGIN,
    })


def embeddings_figure(coords: np.ndarray, chars: Sequence[str], share: np.ndarray, labelled: Sequence[int] = (),
                      chosen: int | None = None, neighbours: Sequence[int] = (), tr: Translate = english) -> go.Figure:
    """Every character's embedding on the table's first two principal axes: a dot each, named on
    hover; a label only on `labelled` (a learner's text), on `chosen` (red) and on its nearest
    `neighbours` (orange): hundreds of labels at once are one unreadable cloud."""
    _ = tr
    coords = np.asarray(coords)
    ticks = [tick(c) for c in chars]
    marked = {i: "#E53935" for i in ([chosen] if chosen is not None else [])}
    marked.update({i: "#FB8C00" for i in neighbours if i not in marked})
    named = sorted(set(labelled) | set(marked))
    data = [{"type": "scatter", "x": coords[:, 0], "y": coords[:, 1], "mode": "markers", "text": ticks,
             "marker": {"size": 5, "color": "#1E88E5", "opacity": 0.45}, "showlegend": False,
             "hovertemplate": "%{text}<extra></extra>"}]
    if named:
        data.append({"type": "scatter", "x": coords[named, 0], "y": coords[named, 1], "mode": "markers+text",
                     "text": [ticks[i] for i in named], "textposition": "top center", "showlegend": False,
                     "marker": {"size": [11 if i in marked else 7 for i in named],
                                "color": [marked.get(i, "#1E88E5") for i in named]},
                     "textfont": {"color": [marked.get(i, "#37474F") for i in named]},
                     "hovertemplate": "%{text}<extra></extra>"})
    return figure(data, {
        "xaxis": axis_title(_("first principal axis ({share:.0%} of the variance)", share=float(share[0]))),
        "yaxis": axis_title(_("second principal axis ({share:.0%} of the variance)", share=float(share[1]))),
        "height": 520, "margin": MARGIN,
    })


def logit_lens_figure(probs: np.ndarray, text: str, chars: Sequence[str], tr: Translate = english) -> go.Figure:
    """The likeliest next character at every position, read out after the embedding and after
    each layer: the cell shows it, its colour its probability."""
    _ = tr
    probs = np.asarray(probs)
    top = probs.argmax(axis=-1)  # (layers + 1, T)
    rows = [_("embedding")] + [_("after layer {layer}", layer=i) for i in range(1, probs.shape[0])]
    labels = position_labels(text[: probs.shape[1]])
    cells = [[tick(chars[i]) for i in row] for row in top]
    reads, probability = _("reads"), _("probability")
    return figure([{"type": "heatmap", "z": probs.max(axis=-1), "x": labels, "y": rows, "text": cells,
                    "texttemplate": "%{text}", "colorscale": "Viridis", "zmin": 0, "zmax": 1, "customdata": cells,
                    "hovertemplate": f"%{{y}} · %{{x}}<br>{reads} %{{customdata}} ({probability} %{{z:.2f}})"
                                     "<extra></extra>"}], {
        "xaxis": {"tickmode": "array", "tickvals": labels, "ticktext": [tick(c) for c in text[: probs.shape[1]]],
                  "tickangle": 0, **axis_title(_("position: the prediction is for the character after it"))},
        "yaxis": {"autorange": "reversed"}, "height": 120 + 40 * len(rows), "margin": {**MARGIN, "t": 10},
    })
