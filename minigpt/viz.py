"""Figure builders: pure functions from plain data to Plotly figures (and tables).

Pages only call these and hand the result to Streamlit, so every chart can be
tested without a browser. Attention heatmaps show the masked (future) triangle as
grey cells with no hover, and label every axis with the position and character.
"""
from __future__ import annotations

import html
import unicodedata
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .diagnosis import Overfitting
from .explain import AttentionRow, Beliefs
from .messages import N_
from .sample import Step
from .config import TrainConfig
from .train import TrainEvent, lr_at

MAX_POINTS = 2000
MASK_COLOR = "#d9d9d9"
LR_TICKS = "~g"  # learning rates as a textbook writes them: 0.0004, not 4.0e-4
PAGE = 24  # positions per heatmap page: at most this many rows and columns, each labelled


def english(message: str, /, **params) -> str:
    """The default `tr` of every builder: the English message, its fields filled.

    An app passes its own `tr(message, **params)` (a gettext lookup, then the same filling) to
    get every title, axis, legend and hover text in the learner's language.
    """
    return message.format(**params) if params else message


Translate = Callable[..., str]


Spec = tuple[list[dict], dict]  # a figure's traces and layout as plain dicts


def _figure(data: list[dict], layout: dict) -> go.Figure:
    """A figure from plain trace and layout dicts, unvalidated: the views that redraw as a learner
    moves a slider are built this way, 10-20× faster than through graph_objects' setters and
    make_subplots (tests/test_viz.py validates every builder's output through plotly)."""
    return go.Figure({"data": data, "layout": layout}, _validate=False)  # numpy arrays go out as typed arrays


HEADING_PX = 40  # the height of a stacked part's heading
COLORBAR_PX = 80  # the right margin of a stacked figure: a colour bar, its ticks and their numbers
AXIS_PX = 50  # room under a stacked part for its bottom axis's ticks and title, which a lone figure's margin grows to
_OWN = ("height", "margin", "title", "annotations", "shapes", "showlegend")  # what a part's layout keeps to itself


def _stack(parts: Sequence[tuple[str, Spec]]) -> Spec:
    """Figure specs one above the other in one spec, each under a heading, keeping its own axes,
    height (px) and title: each part's axes are renumbered and its paper y mapped into its band.

    The margins are fixed (wide enough for the longest y tick label, and for the colour bars) and
    no axis grows them: a margin that grows makes plotly draw the figure a second time, and
    Streamlit already draws a changed chart twice (once before it knows the width)."""
    total = sum(HEADING_PX + layout["height"] + AXIS_PX for _, (_, layout) in parts)
    ticks = [t for _, (_, part) in parts for k, axis in part.items() if k.startswith("yaxis")
             for t in axis.get("ticktext", [])]
    data, layout = [], {"height": total, "showlegend": False, "annotations": [], "shapes": [],
                        "margin": {"l": 10 + max(map(_text_px, ticks), default=30), "r": COLORBAR_PX, "t": 0, "b": 0}}
    top, count, edge = 0, {"x": 0, "y": 0}, 4 - layout["margin"]["l"]  # edge: xshift from the plot to the figure's left
    for heading, (part_data, part) in parts:
        margin = {"t": 0, "b": 0, **part.get("margin", {})}
        band = (top + HEADING_PX + margin["t"], top + HEADING_PX + part["height"] - margin["b"])  # px from the top
        paper = lambda y, band=band: 1 - (band[1] - y * (band[1] - band[0])) / total  # noqa: E731
        rename = _renamer(part_data, part, count)
        for trace in part_data:
            trace = {**trace, "xaxis": rename(trace.get("xaxis", "x")), "yaxis": rename(trace.get("yaxis", "y"))}
            if trace["type"] == "heatmap" and "coloraxis" not in trace:  # its colour bar beside its own band
                trace["colorbar"] = {"y": paper(0.5), "len": (band[1] - band[0]) / total, "yanchor": "middle",
                                     **trace.get("colorbar", {})}
            data.append(trace)
        for key, axis in part.items():
            if key.startswith(("xaxis", "yaxis")):
                axis = {**axis, **{ref: rename(axis[ref]) for ref in ("anchor", "matches", "overlaying") if ref in axis}}
                if key[0] == "y":
                    axis["domain"] = [paper(y) for y in axis.get("domain", [0.0, 1.0])]
                layout[key[:5] + rename(key[0] + key[5:])[1:]] = {**axis, "automargin": False}
            elif key not in _OWN:
                layout.setdefault(key, axis)  # the rest (a colour axis, say), if no part set it first
        for note in part.get("annotations", []):
            note = {**note, "xref": rename(note.get("xref", "x")), "yref": rename(note.get("yref", "y"))}
            if note["yref"] == "paper":
                note["y"] = paper(note["y"])
            if note["xref"] == "paper" and note["x"] == 0 and note.get("xanchor") == "left":
                note["xshift"] = edge  # a title at the left: at the figure's edge, as a phone is narrow
            layout["annotations"].append(note)
        for shape in part.get("shapes", []):
            shape = {**shape, "xref": rename(shape.get("xref", "x")), "yref": rename(shape.get("yref", "y"))}
            if shape["yref"] == "paper":
                shape["y0"], shape["y1"] = paper(shape["y0"]), paper(shape["y1"])
            layout["shapes"].append(shape)
        if part.get("title", {}).get("text"):  # in the part's top margin, as it would stand alone
            layout["annotations"].append({"text": part["title"]["text"], "font": part["title"].get("font", {}),
                                          "x": 0.0, "xref": "paper", "xanchor": "left", "xshift": edge,
                                          "y": paper(1.0), "yref": "paper", "yanchor": "bottom", "yshift": 8,
                                          "showarrow": False})
        layout["annotations"].append({"text": f"<b>{heading}</b>", "font": {"size": 16}, "x": 0.0, "xref": "paper",
                                      "xanchor": "left", "xshift": edge, "y": 1 - top / total, "yref": "paper",
                                      "yanchor": "top", "showarrow": False})
        top += HEADING_PX + part["height"] + AXIS_PX
    return data, layout


def _text_px(text: str, size: int = 12) -> int:
    """About how wide plotly draws `text` (px): a Chinese or other full-width character is as wide
    as the font size, others about 0.6 of it."""
    return round(sum(size if unicodedata.east_asian_width(c) in "WF" else 0.6 * size for c in text)) + 8


def _renamer(part_data: list[dict], part: dict, count: dict[str, int]) -> Callable[[str], str]:
    """The part's axis names ("x2") → the stack's next free ones ("x5"); "paper" stays."""
    used = {"x": set(), "y": set()}
    for key in part:
        if key.startswith(("xaxis", "yaxis")):
            used[key[0]].add(key[5:])
    for trace in part_data:
        used["x"].add(trace.get("xaxis", "x")[1:]), used["y"].add(trace.get("yaxis", "y")[1:])
    names = {}
    for letter, suffixes in used.items():
        for suffix in sorted(suffixes, key=lambda n: int(n or 1)):
            count[letter] += 1
            names[letter + suffix] = letter + ("" if count[letter] == 1 else str(count[letter]))
    return lambda ref: names.get(ref, ref)


def position_labels(text: str) -> list[str]:
    """Unique axis labels, 'position:character', so repeated characters stay apart."""
    return [f"{i}:{c}" if c.isprintable() and not c.isspace() else f"{i}:{c!r}" for i, c in enumerate(text)]


def _downsample(rows: Sequence, limit: int = MAX_POINTS) -> list:
    if len(rows) <= limit:
        return list(rows)
    stride = -(-len(rows) // limit)
    return list(rows[::stride]) + ([rows[-1]] if (len(rows) - 1) % stride else [])


def loss_figure(history: Sequence[TrainEvent], *, uniform: float | None = None,
                overfit: "Overfitting | None" = None, floor: float | None = None,
                tr: Translate = english) -> go.Figure:
    """Train loss per logged interval, validation loss at evaluations, lr on a second axis.

    uniform: the loss of guessing uniformly (ln vocab), drawn as a reference line;
    overfit: marks where val loss was lowest and the stretch where it rose since;
    floor: the lowest loss possible (a task's random questions), drawn as a second line.
    """
    _ = tr
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    rows = _downsample(history)
    fig.add_trace(go.Scatter(x=[e.step for e in rows], y=[e.train_loss for e in rows], name=_("train loss"),
                             mode="lines", line=dict(color="#1E88E5")), secondary_y=False)
    evals = [e for e in history if e.val_loss is not None]
    fig.add_trace(go.Scatter(x=[e.step for e in evals], y=[e.val_loss for e in evals], name=_("val loss"),
                             mode="lines+markers", line=dict(color="#E53935")), secondary_y=False)
    fig.add_trace(go.Scatter(x=[e.step for e in rows], y=[e.lr for e in rows], name=_("learning rate"),
                             mode="lines", line=dict(color="#9E9E9E", dash="dot")), secondary_y=True)
    if uniform is not None:
        fig.add_hline(y=uniform, line=dict(color="#757575", dash="dash", width=1), secondary_y=False,
                      annotation_text=_("guessing uniformly: ln V = {loss:.2f}", loss=uniform), annotation_position="bottom right")
    if floor is not None:
        fig.add_hline(y=floor, line=dict(color="#2E7D32", dash="dot", width=1), secondary_y=False,
                      annotation_text=_("lowest possible: {loss:.2f} (the questions are random)", loss=floor),
                      annotation_position="top right")
    if overfit is not None:
        fig.add_vrect(x0=overfit.best_step, x1=overfit.step, fillcolor="#E53935", opacity=0.08, line_width=0)
        fig.add_annotation(x=overfit.best_step, y=overfit.best_val, text=_("val loss lowest; rising since: overfitting"),
                           showarrow=True, arrowhead=2, ax=40, ay=-40, font=dict(color="#B71C1C"))
    max_lr = max((e.lr for e in rows), default=0.0)
    fig.update_xaxes(title_text=_("step"))
    fig.update_yaxes(title_text=_("cross-entropy loss (nats)"), rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title_text=_("learning rate"), secondary_y=True, showgrid=False, tickformat=LR_TICKS,
                     range=[0, 1.05 * max_lr if max_lr > 0 else 1], nticks=4)
    fig.update_layout(height=400, margin=dict(l=10, r=10, t=20, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return fig


def lr_figure(cfg: TrainConfig, tr: Translate = english) -> go.Figure:
    """The learning rate a run's settings give at every step: the warmup's straight climb, then
    the cosine down to min_lr (or flat), with the turn marked."""
    _ = tr
    steps = np.arange(cfg.max_steps)
    fig = go.Figure(go.Scatter(x=steps, y=[lr_at(int(s), cfg) for s in steps], mode="lines", name=_("learning rate"),
                               line=dict(color="#1E88E5"), hovertemplate=_("step") + " %{x}: %{y:.3~g}<extra></extra>"))
    if 0 < cfg.warmup_steps < cfg.max_steps:
        fig.add_vline(x=cfg.warmup_steps, line=dict(color="#757575", dash="dash", width=1),
                      annotation_text=_("warmup ends (step {step})", step=cfg.warmup_steps),
                      annotation_position="bottom right")  # the curve peaks at the line's top: the label goes low
    fig.update_xaxes(title_text=_("step"))
    fig.update_yaxes(title_text=_("learning rate"), tickformat=LR_TICKS, rangemode="tozero")
    fig.update_layout(height=300, margin=dict(l=10, r=10, t=30, b=10), showlegend=False)
    return fig


def _masked(weights: np.ndarray) -> np.ndarray:
    """float32 copy with the future (upper) triangle set to NaN, drawn as the grey background."""
    z = np.array(weights, dtype=np.float32, copy=True)
    z[np.triu_indices(z.shape[-1], k=1)] = np.nan
    return z


def _sign(c: str) -> str:
    """A character in a list of characters: a space or a line break drawn as a sign, not lost."""
    return {" ": "␣", "\n": "⏎", "\t": "⇥"}.get(c, _tick(c))


def _tick(c: str) -> str:
    return c if c.isprintable() and not c.isspace() else repr(c)[1:-1] or "·"


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
    z = _masked(weights)[start:stop, start:stop]
    ticks = [_tick(c) for c in text[start:stop]]
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
    return _figure(data, {
        "xaxis": {**axis, "title": {"text": _("key")}, "side": "bottom"},
        "yaxis": {**axis, "title": {"text": _("query")}, "autorange": "reversed", "scaleanchor": "x"},
        "title": {"text": title, "x": 0.0, "font": {"size": 13}},
        "coloraxis": {"colorscale": "Viridis", "cmin": 0.0, "cmax": 1.0, "showscale": False},
        "plot_bgcolor": MASK_COLOR, "height": max(300, 100 + 22 * (stop - start)),
        "margin": {"l": 36 + max(_text_px(t, font["size"]) for t in ticks), "r": 10, "t": 36, "b": 56},
    })

SCALING_METRICS = {
    "entropy": (N_("Entropy (higher = more uniform)"), N_("mean softmax entropy (nats)"), None),
    "max_weight": (N_("Max attention weight (lower = less saturated)"), N_("mean max weight"), [0, 1]),
}


def scaling_figure(table: pd.DataFrame, metric: str = "entropy", tr: Translate = english) -> go.Figure:
    """One metric of the √d_k experiment per d_k, unscaled vs scaled, as grouped bars."""
    _ = tr
    title, axis, span = SCALING_METRICS[metric]
    x = [f"d_k={d}" for d in table["d_k"]]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=table[f"{metric}_unscaled"], name=_("no scaling"), marker_color="#E53935"))
    fig.add_trace(go.Bar(x=x, y=table[f"{metric}_scaled"], name=_("scaled by 1/√d_k"), marker_color="#1E88E5"))
    fig.update_yaxes(title_text=_(axis), range=span)
    fig.update_layout(title=dict(text=_(title), x=0.0, font=dict(size=14)), barmode="group", height=360,
                      margin=dict(l=10, r=10, t=40, b=10), legend=dict(orientation="h", y=-0.15, x=0))
    return fig


def score_std_figure(table: pd.DataFrame, tr: Translate = english) -> go.Figure:
    """Standard deviation of q·k against d_k: it grows as √d_k unless scaled."""
    _ = tr
    d_k = table["d_k"].to_numpy(dtype=float)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=d_k, y=table["score_std_unscaled"], name=_("q·k (measured)"), mode="lines+markers",
                             line=dict(color="#E53935")))
    fig.add_trace(go.Scatter(x=d_k, y=np.sqrt(d_k), name=_("√d_k (theory)"), mode="lines",
                             line=dict(color="#E53935", dash="dot")))
    fig.add_trace(go.Scatter(x=d_k, y=table["score_std_scaled"], name=_("q·k / √d_k (measured)"),
                             mode="lines+markers", line=dict(color="#1E88E5")))
    fig.update_xaxes(title_text="d_k", type="log", tickmode="array", tickvals=list(d_k),
                     ticktext=[f"{int(d)}" for d in d_k])
    fig.update_yaxes(title_text=_("standard deviation of the score"))
    fig.update_layout(height=340, margin=dict(l=10, r=10, t=30, b=10), legend=dict(orientation="h", y=-0.25, x=0))
    return fig


def task_figure(history: Sequence[TrainEvent], chance: float, tr: Translate = english) -> go.Figure:
    """A task's held-out accuracy at each evaluation: answer characters, and whole lines, right."""
    _ = tr
    evals = [e for e in history if e.task_accuracy is not None]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[e.step for e in evals], y=[e.task_accuracy for e in evals], mode="lines+markers",
                             name=_("answer characters right"), line=dict(color="#2E7D32")))
    fig.add_trace(go.Scatter(x=[e.step for e in evals], y=[e.task_solved for e in evals], mode="lines+markers",
                             name=_("whole answers right"), line=dict(color="#6A1B9A", dash="dot")))
    fig.add_hline(y=chance, line=dict(color="#757575", dash="dash", width=1),
                  annotation_text=_("guessing: {chance:.0%}", chance=chance), annotation_position="top right")
    fig.update_xaxes(title_text=_("step"))
    fig.update_yaxes(title_text=_("accuracy on held-out lines"), range=[0, 1.02], tickformat=".0%")
    fig.update_layout(height=300, margin=dict(l=10, r=10, t=20, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.25, x=0))
    return fig


def right_key_figure(steps: Sequence[int], scores: np.ndarray, chance: float, chosen: int | None = None,
                     tr: Translate = english) -> go.Figure:
    """The time-lapse's right-key score: scores (steps, layers, heads), drawn as each layer's best head."""
    _ = tr
    scores = np.asarray(scores, dtype=np.float32)
    fig = go.Figure()
    for layer in range(scores.shape[1]):
        fig.add_trace(go.Scatter(x=list(steps), y=scores[:, layer].max(axis=-1), mode="lines+markers",
                                 name=_("layer {layer}, best head", layer=layer + 1)))
    fig.add_hline(y=chance, line=dict(color="#757575", dash="dash", width=1),
                  annotation_text=_("a uniform head: {chance:.2f}", chance=chance), annotation_position="top right")
    if chosen is not None:
        fig.add_vline(x=chosen, line=dict(color="#FF1744", width=1))
    fig.update_xaxes(title_text=_("step"))
    fig.update_yaxes(title_text=_("weight on the right keys"), range=[0, 1.02])
    fig.update_layout(height=280, margin=dict(l=10, r=10, t=20, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.25, x=0))
    return fig


def steps_table(steps: Sequence[Step], tr: Translate = english) -> pd.DataFrame:
    """One row per generated character: the choice, its model probability and the model's five
    likeliest characters, in one narrow column, so that the table fits a phone (their probabilities
    are in the step inspector)."""
    _ = tr
    step_header, chosen_header, prob_header, top_header = _("step"), _("chosen"), _("p(chosen)"), _("likeliest five")
    return pd.DataFrame([{step_header: i + 1, chosen_header: _sign(step.text), prob_header: round(step.prob, 4),
                          top_header: " ".join(_sign(text) for text, _p in step.top)} for i, step in enumerate(steps)],
                        columns=[step_header, chosen_header, prob_header, top_header])


def attention_row_figure(row: AttentionRow, text: str, tr: Translate = english) -> go.Figure:
    """One query's scores, scores ÷ √d_k and softmax weights over every key, stacked bars; the
    keys the causal mask hides are grey, at 0, and their scaled score is marked −∞."""
    return _figure(*_row_spec(row, text, tr))


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
                        "ticktext": [_tick(c) for c in text[: len(keys)]], "tickangle": 0, "title": {"text": key}}
    return data, layout


def vectors_figure(rows: dict[str, np.ndarray], title: str, tr: Translate = english) -> go.Figure:
    """Vectors of d_k numbers as the rows of one heatmap (q, the keys, the values, the output),
    on one colour scale centred on 0."""
    return _figure(*_vectors_spec(rows, title, tr))


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
    return _figure(*_keys_spec(row, text, tr))


def _keys_spec(row: AttentionRow, text: str, tr: Translate) -> Spec:
    _ = tr
    labels = _key_labels(row, text, tr)
    rows = {_("q of {query}", query=position_labels(text)[row.query]): row.q}
    rows.update({f"k {label}": k for label, k in zip(labels, row.k)})
    return _vectors_spec(rows, _("query q and keys k (d_k = {d_k} numbers each)", d_k=len(row.q)), tr)


def values_figure(row: AttentionRow, text: str, tr: Translate = english) -> go.Figure:
    """Every value vector v with its weight, and their weighted sum: what this head passes on."""
    return _figure(*_values_spec(row, text, tr))


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
    return _figure(*_stack([(_("1. The query and the keys"), _keys_spec(row, text, tr)),
                            (_("2. Scores, ÷ √d_k, the causal mask and softmax"), _row_spec(row, text, tr)),
                            (_("3. The output: the weighted sum of the values"), _values_spec(row, text, tr))]))


def beliefs_figure(belief: Beliefs, chars: Sequence[str], top: int = 20, tr: Translate = english) -> go.Figure:
    """The `top` likeliest next characters after the temperature: blue what is drawn from, grey
    what top-k or top-p cut off (at the chance the temperature alone would give it)."""
    _ = tr
    order = np.argsort(-belief.tempered, kind="stable")[:top]
    labels = [_tick(chars[i]) for i in order]
    cut = belief.removed[order]
    y = np.where(cut, belief.tempered[order], belief.final[order])
    probability, removed = _("probability"), _("cut off by top-k / top-p")
    title = "<br>".join((  # two lines: one would run past a phone's edge
        _("entropy {entropy:.2f} nats · effective number of choices e^H = {choices:.1f}", entropy=belief.entropy,
          choices=belief.effective_choices), _("grey: cut off by top-k / top-p")))
    positions = list(range(len(order)))
    return _figure([{"type": "bar", "x": positions, "y": np.asarray(y),
                     "marker": {"color": ["#BDBDBD" if c else "#1E88E5" for c in cut]},
                     "text": [removed if c else "" for c in cut], "textposition": "none", "customdata": labels,
                     "hovertemplate": f"%{{customdata}}<br>{probability} %{{y:.3f}} %{{text}}<extra></extra>"}], {
        "xaxis": {"tickmode": "array", "tickvals": positions, "ticktext": labels, "tickangle": 0, "automargin": False},
        "yaxis": {"title": {"text": probability}, "range": [0, max(1e-9, float(y.max())) * 1.1], "automargin": False},
        "title": {"text": title, "x": 0.0, "font": {"size": 13}}, "height": 314, "showlegend": False,
        "margin": {"l": 64, "r": 10, "t": 54, "b": 30},  # fixed, that no axis grows: see _stack
    })


def step_attention_figure(rows: np.ndarray, text: str, tr: Translate = english) -> go.Figure:
    """Each layer's attention row (mean of its heads) of the character that chose the next one."""
    _ = tr
    rows = np.asarray(rows, dtype=np.float32)
    labels = position_labels(text[-rows.shape[1]:])
    layers = [_("layer {layer}", layer=i + 1) for i in range(rows.shape[0])]
    weight = _("weight")
    return _figure([{"type": "heatmap", "z": rows, "x": labels, "y": layers, "coloraxis": "coloraxis",
                     "hovertemplate": f"%{{y}} · %{{x}}<br>{weight} %{{z:.3f}}<extra></extra>"}], {
        "xaxis": {"tickmode": "array", "tickvals": labels, "ticktext": [_tick(c) for c in text[-rows.shape[1]:]],
                  "tickangle": 0, "title": {"text": _("key")}, "automargin": False},
        "yaxis": {"autorange": "reversed", "automargin": False},
        "coloraxis": {"colorscale": "Viridis", "cmin": 0.0, "cmax": 1.0, "showscale": False},
        "height": 80 + 36 * rows.shape[0],  # fixed margins, that no axis grows: see _stack
        "margin": {"l": 16 + max(map(_text_px, layers)), "r": 10, "t": 10, "b": 56},
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
    return _figure([{"type": "heatmap", "z": rise, "x": heads, "y": layers, "colorscale": "RdBu", "reversescale": True,
                     "zmid": 0, "zmin": -span, "zmax": span, "texttemplate": "%{z:+.3f}", "showscale": False,
                     "hovertemplate": f"%{{y}} · %{{x}}<br>{change} %{{z:+.4f}}<extra></extra>"}], {
        "yaxis": {"autorange": "reversed", "automargin": False}, "xaxis": {"side": "top", "automargin": False},
        "height": 90 + 48 * rise.shape[0],  # fixed margins, that no axis grows: see _stack
        "margin": {"l": 16 + max(map(_text_px, layers)), "r": 10, "t": 40, "b": 10},
    })


COLORS = ("#1E88E5", "#E53935", "#43A047", "#FB8C00", "#8E24AA", "#00ACC1", "#6D4C41", "#546E7A")


def compare_figure(records: Sequence, tr: Translate = english) -> go.Figure:
    """Runs side by side: each run's validation loss (solid, at its evaluations) and training loss
    (dotted), one colour per run."""
    _ = tr
    data = []
    for i, record in enumerate(records):
        color = COLORS[i % len(COLORS)]
        data.append({"type": "scatter", "mode": "lines+markers", "x": list(record.val_steps), "y": list(record.val_loss),
                     "name": _("{run} · val loss", run=record.name), "line": {"color": color}})
        data.append({"type": "scatter", "mode": "lines", "x": list(record.steps), "y": list(record.train_loss),
                     "name": _("{run} · train loss", run=record.name), "line": {"color": color, "dash": "dot",
                                                                                  "width": 1}})
    return _figure(data, {
        "height": 380, "xaxis": {"title": {"text": _("step")}}, "yaxis": {"title": {"text": _("loss (nats)")}},
        "legend": {"orientation": "h", "y": -0.25}, "margin": {"l": 10, "r": 10, "t": 20, "b": 10},
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
    return _figure(data, {
        "title": {"text": _(title), "x": 0.0, "font": {"size": 13}}, "height": 300,
        "xaxis": {"title": {"text": _("step")}}, "yaxis": {"title": {"text": _(y_title)}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.3}, "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
    })


def positions_figure(pe: np.ndarray, tr: Translate = english) -> go.Figure:
    """The sinusoidal position encodings: one row per position, one column per dimension."""
    _ = tr
    pe = np.asarray(pe)
    position, dimension, value = _("position"), _("dimension"), _("value")
    fig = go.Figure(go.Heatmap(z=pe, colorscale="RdBu", zmid=0, zmin=-1, zmax=1,
                               hovertemplate=f"{position} %{{y}}, {dimension} %{{x}}<br>{value} %{{z:.3f}}<extra></extra>"))
    fig.update_xaxes(title_text=_("dimension (0 … d_model − 1):<br>fast waves on the left, slow on the right"))
    fig.update_yaxes(title_text=position, autorange="reversed")
    fig.update_layout(height=360, margin=dict(l=10, r=10, t=20, b=10))
    return fig


def similarity_figure(similarity: np.ndarray, tr: Translate = english) -> go.Figure:
    """Cosine similarity of every pair of position vectors."""
    _ = tr
    position, similar = _("position"), _("cosine similarity")
    fig = go.Figure(go.Heatmap(z=np.asarray(similarity), colorscale="Viridis", zmin=-1, zmax=1,
                               hovertemplate=f"{position} %{{y}} · %{{x}}<br>{similar} %{{z:.3f}}<extra></extra>"))
    fig.update_xaxes(title_text=position)
    fig.update_yaxes(title_text=position, autorange="reversed", scaleanchor="x")
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=20, b=10))
    return fig


def embeddings_figure(coords: np.ndarray, chars: Sequence[str], share: np.ndarray, labelled: Sequence[int] = (),
                      chosen: int | None = None, neighbours: Sequence[int] = (), tr: Translate = english) -> go.Figure:
    """Every character's embedding on the table's first two principal axes: a dot each, named on
    hover; a label only on `labelled` (a learner's text), on `chosen` (red) and on its nearest
    `neighbours` (orange): hundreds of labels at once are one unreadable cloud."""
    _ = tr
    ticks = [_tick(c) for c in chars]
    marked = {i: "#E53935" for i in ([chosen] if chosen is not None else [])}
    marked.update({i: "#FB8C00" for i in neighbours if i not in marked})
    named = sorted(set(labelled) | set(marked))
    fig = go.Figure(go.Scatter(x=coords[:, 0], y=coords[:, 1], mode="markers", text=ticks,
                               marker=dict(size=5, color="#1E88E5", opacity=0.45), showlegend=False,
                               hovertemplate="%{text}<extra></extra>"))
    if named:
        fig.add_trace(go.Scatter(x=coords[named, 0], y=coords[named, 1], mode="markers+text",
                                 text=[ticks[i] for i in named], textposition="top center", showlegend=False,
                                 marker=dict(size=[11 if i in marked else 7 for i in named],
                                             color=[marked.get(i, "#1E88E5") for i in named]),
                                 textfont=dict(color=[marked.get(i, "#37474F") for i in named]),
                                 hovertemplate="%{text}<extra></extra>"))
    fig.update_xaxes(title_text=_("first principal axis ({share:.0%} of the variance)", share=float(share[0])))
    fig.update_yaxes(title_text=_("second principal axis ({share:.0%} of the variance)", share=float(share[1])))
    fig.update_layout(height=520, margin=dict(l=10, r=10, t=20, b=10))
    return fig


def logit_lens_figure(probs: np.ndarray, text: str, chars: Sequence[str], tr: Translate = english) -> go.Figure:
    """The likeliest next character at every position, read out after the embedding and after
    each layer: the cell shows it, its colour its probability."""
    _ = tr
    probs = np.asarray(probs)
    top = probs.argmax(axis=-1)  # (layers + 1, T)
    best = probs.max(axis=-1)
    rows = [_("embedding")] + [_("after layer {layer}", layer=i) for i in range(1, probs.shape[0])]
    labels = position_labels(text[: probs.shape[1]])
    cells = [[_tick(chars[i]) for i in row] for row in top]
    reads, probability = _("reads"), _("probability")
    fig = go.Figure(go.Heatmap(z=best, x=labels, y=rows, text=cells, texttemplate="%{text}", colorscale="Viridis",
                               zmin=0, zmax=1, customdata=cells,
                               hovertemplate=f"%{{y}} · %{{x}}<br>{reads} %{{customdata}} ({probability} %{{z:.2f}})"
                                             "<extra></extra>"))
    fig.update_xaxes(tickmode="array", tickvals=labels, ticktext=[_tick(c) for c in text[: probs.shape[1]]],
                     tickangle=0, title_text=_("position: the prediction is for the character after it"))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=120 + 40 * len(rows), margin=dict(l=10, r=10, t=10, b=10))
    return fig


def figures_html(figures: Sequence[go.Figure], title: str) -> str:
    """Figures as one standalone HTML page that opens offline: plotly.js is inside, once (about
    4.8 MB), and each figure stays interactive (hover, zoom, Plotly's PNG button)."""
    config = {"displaylogo": False}
    parts = [figure.to_html(full_html=False, include_plotlyjs=i == 0, config=config) for i, figure in enumerate(figures)]
    return ("<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"><title>" + html.escape(title) +
            "</title></head>\n<body>\n" + "\n".join(parts) + "\n</body>\n</html>\n")
