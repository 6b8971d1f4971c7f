"""Figure builders: pure functions from plain data to Plotly figures (and tables).

Pages only call these and hand the result to Streamlit, so every chart can be
tested without a browser. Attention heatmaps show the masked (future) triangle as
grey cells with no hover, and label every axis with the position and character.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .runner import EvalRecord
from .sample import Step
from .train import TrainEvent

MAX_POINTS = 2000
MASK_COLOR = "#d9d9d9"
HOVER = "query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>"


def position_labels(text: str) -> list[str]:
    """Unique axis labels, 'position:character', so repeated characters stay apart."""
    return [f"{i}:{c}" if c.isprintable() and not c.isspace() else f"{i}:{c!r}" for i, c in enumerate(text)]


def _downsample(rows: Sequence, limit: int = MAX_POINTS) -> list:
    if len(rows) <= limit:
        return list(rows)
    stride = -(-len(rows) // limit)
    return list(rows[::stride]) + ([rows[-1]] if (len(rows) - 1) % stride else [])


def loss_figure(history: Sequence[TrainEvent]) -> go.Figure:
    """Train loss per logged interval, validation loss at evaluations, lr on a second axis."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    rows = _downsample(history)
    fig.add_trace(go.Scatter(x=[e.step for e in rows], y=[e.train_loss for e in rows], name="train loss",
                             mode="lines", line=dict(color="#1E88E5")), secondary_y=False)
    evals = [e for e in history if e.val_loss is not None]
    fig.add_trace(go.Scatter(x=[e.step for e in evals], y=[e.val_loss for e in evals], name="val loss",
                             mode="lines+markers", line=dict(color="#E53935")), secondary_y=False)
    fig.add_trace(go.Scatter(x=[e.step for e in rows], y=[e.lr for e in rows], name="learning rate",
                             mode="lines", line=dict(color="#9E9E9E", dash="dot")), secondary_y=True)
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="cross-entropy loss (nats)", secondary_y=False)
    fig.update_yaxes(title_text="learning rate", secondary_y=True, showgrid=False, tickformat=".1e")
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=30, b=10), legend=dict(orientation="h", y=1.12))
    return fig


def _masked(weights: np.ndarray) -> np.ndarray:
    """float32 copy with the future (upper) triangle set to NaN, drawn as the grey background."""
    z = np.array(weights, dtype=np.float32, copy=True)
    z[np.triu_indices(z.shape[-1], k=1)] = np.nan
    return z


def _heatmap(weights: np.ndarray, labels: list[str]) -> go.Heatmap:
    return go.Heatmap(z=_masked(weights), x=labels, y=labels, coloraxis="coloraxis",
                      hovertemplate=HOVER, hoverongaps=False)


def attention_figure(attention: np.ndarray, text: str, view: str = "grid", layer: int = 0) -> go.Figure:
    """Heatmaps of attention weights, attention shaped (layers, heads, T, T).

    view="layers": each layer's mean over heads, side by side (the demo's first figure);
    view="heads":  the heads of one layer side by side (the demo's second figure);
    view="grid":   every layer (rows) x head (columns).
    """
    attention = np.asarray(attention, dtype=np.float32)
    n_layers, n_heads = attention.shape[:2]
    labels = position_labels(text)[: attention.shape[-1]]
    if view == "layers":
        panels = [(0, l, attention[l].mean(axis=0), f"layer {l + 1} · mean of heads") for l in range(n_layers)]
        rows, cols = 1, n_layers
    elif view == "heads":
        if not 0 <= layer < n_layers:
            raise ValueError(f"layer must be in 0..{n_layers - 1}, got {layer}")
        panels = [(0, h, attention[layer, h], f"layer {layer + 1} · head {h + 1}") for h in range(n_heads)]
        rows, cols = 1, n_heads
    elif view == "grid":
        panels = [(l, h, attention[l, h], f"L{l + 1} H{h + 1}") for l in range(n_layers) for h in range(n_heads)]
        rows, cols = n_layers, n_heads
    else:
        raise ValueError(f"view must be 'layers', 'heads' or 'grid', got {view!r}")
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[p[3] for p in panels],
                        horizontal_spacing=0.03, vertical_spacing=0.08 if rows > 1 else 0.0)
    for r, c, weights, _ in panels:
        fig.add_trace(_heatmap(weights, labels), row=r + 1 if view == "grid" else 1, col=c + 1)
    show_ticks = len(labels) <= 24 and cols <= 4
    fig.update_xaxes(showticklabels=False, constrain="domain")
    fig.update_yaxes(autorange="reversed", showticklabels=False, scaleanchor="x", constrain="domain")
    # axis titles and position labels once per row / column, so they don't spill into the next panel
    fig.update_xaxes(title_text="key", showticklabels=show_ticks, row=rows)
    fig.update_yaxes(title_text="query", showticklabels=show_ticks, col=1)
    for i in range(2, rows * cols + 1):  # keep every panel square against its own x axis
        fig.layout[f"yaxis{i}"].scaleanchor = f"x{i}"
    fig.update_layout(
        coloraxis=dict(colorscale="Viridis", cmin=0.0, cmax=1.0, colorbar=dict(title="weight")),
        plot_bgcolor=MASK_COLOR, height=max(400, 280 * rows), margin=dict(l=10, r=10, t=40, b=10),
    )
    return fig


def timelapse_frame(record: EvalRecord, text: str, view: str = "layers", layer: int = 0) -> go.Figure:
    """The probe text's attention at one evaluation of a run, titled with its step and losses."""
    fig = attention_figure(record.attention, text, view=view, layer=layer)
    fig.update_layout(title=f"step {record.step} · val loss {record.val_loss:.3f}")
    return fig


def scaling_figure(table: pd.DataFrame) -> go.Figure:
    """Mean softmax entropy and mean max weight per d_k, unscaled vs scaled, as grouped bars."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Entropy (higher = more uniform)",
                                                        "Max attention weight (lower = less saturated)"))
    x = [f"d_k={d}" for d in table["d_k"]]
    for col, metric in enumerate(("entropy", "max_weight"), start=1):
        fig.add_trace(go.Bar(x=x, y=table[f"{metric}_unscaled"], name="no scaling", marker_color="#E53935",
                             legendgroup="no", showlegend=col == 1), row=1, col=col)
        fig.add_trace(go.Bar(x=x, y=table[f"{metric}_scaled"], name="scaled by 1/√d_k", marker_color="#1E88E5",
                             legendgroup="yes", showlegend=col == 1), row=1, col=col)
    fig.update_yaxes(title_text="mean softmax entropy (nats)", row=1, col=1)
    fig.update_yaxes(title_text="mean max weight", range=[0, 1], row=1, col=2)
    fig.update_layout(barmode="group", height=380, margin=dict(l=10, r=10, t=40, b=10))
    return fig


def score_std_figure(table: pd.DataFrame) -> go.Figure:
    """Standard deviation of q·k against d_k: it grows as √d_k unless scaled."""
    d_k = table["d_k"].to_numpy(dtype=float)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=d_k, y=table["score_std_unscaled"], name="q·k (measured)", mode="lines+markers",
                             line=dict(color="#E53935")))
    fig.add_trace(go.Scatter(x=d_k, y=np.sqrt(d_k), name="√d_k (theory)", mode="lines",
                             line=dict(color="#E53935", dash="dot")))
    fig.add_trace(go.Scatter(x=d_k, y=table["score_std_scaled"], name="q·k / √d_k (measured)",
                             mode="lines+markers", line=dict(color="#1E88E5")))
    fig.update_xaxes(title_text="d_k", type="log")
    fig.update_yaxes(title_text="standard deviation of the score")
    fig.update_layout(height=340, margin=dict(l=10, r=10, t=30, b=10))
    return fig


def steps_table(steps: Sequence[Step]) -> pd.DataFrame:
    """One row per generated character: the choice, its model probability and the top-5."""
    rows = []
    for i, step in enumerate(steps):
        row = {"step": i + 1, "chosen": step.text, "p(chosen)": round(step.prob, 4)}
        for rank, (text, prob) in enumerate(step.top, start=1):
            row[f"#{rank}"] = f"{text!r} {prob:.2f}" if text.isspace() else f"{text} {prob:.2f}"
        rows.append(row)
    return pd.DataFrame(rows)
