"""Training: the loss curves, the learning-rate schedule, a task's accuracy, runs side by side."""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from ._layout import (COLORS, LR_TICKS, MARGIN, Translate, axis_title, downsample, english, figure, hline,
                      legend_below, step_axis, vline)

if TYPE_CHECKING:
    from ..lab.diagnosis import Overfitting
    from ..train import TrainEvent


def plain(name: str) -> str:
    """A name (a run's, as a learner typed it) for Plotly's text, which reads a little HTML: its
    tags and entities escaped, and nothing else (a `"` stays a `"`: Plotly knows no &quot;)."""
    return name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# a trace's name in a hover template, read from the trace: a name typed into the template itself
# would be a template too ("%{y}" would show a number)
TRACE_NAME = "%{fullData.name}"


def loss_figure(history: Sequence[TrainEvent], *, uniform: float | None = None,
                overfit: Overfitting | None = None, floor: float | None = None,
                tr: Translate = english) -> go.Figure:
    """Train loss per logged interval, validation loss at evaluations, lr on a second axis.

    uniform: the loss of guessing uniformly (ln vocab), drawn as a reference line;
    overfit: marks where val loss was lowest and the stretch where it rose since;
    floor: the lowest loss possible (a task's random questions), drawn as a second line.
    """
    _ = tr
    rows = downsample(history)
    evals = [e for e in history if e.val_loss is not None]
    steps = [e.step for e in rows]
    data = [
        {"type": "scatter", "x": steps, "y": [e.train_loss for e in rows], "name": _("train loss"), "mode": "lines",
         "line": {"color": "#1E88E5"}},
        {"type": "scatter", "x": [e.step for e in evals], "y": [e.val_loss for e in evals], "name": _("val loss"),
         "mode": "lines+markers", "line": {"color": "#E53935"}},
        {"type": "scatter", "x": steps, "y": [e.lr for e in rows], "name": _("learning rate"), "mode": "lines",
         "line": {"color": "#9E9E9E", "dash": "dot"}, "yaxis": "y2"},
    ]
    lines = []
    if uniform is not None:
        lines.append(hline(uniform, _("guessing uniformly: ln V = {loss:.2f}", loss=uniform), position="bottom right"))
    if floor is not None:
        lines.append(hline(floor, _("lowest possible: {loss:.2f} (the questions are random)", loss=floor),
                           color="#2E7D32", dash="dot"))
    shapes, notes = [s for s, _n in lines], [n for _s, n in lines]
    if overfit is not None:
        shapes.append({"type": "rect", "xref": "x", "x0": overfit.best_step, "x1": overfit.step, "yref": "y domain",
                       "y0": 0, "y1": 1, "fillcolor": "#E53935", "opacity": 0.08, "line": {"width": 0}})
        notes.append({"x": overfit.best_step, "y": overfit.best_val, "text": _("val loss lowest; rising since: overfitting"),
                      "showarrow": True, "arrowhead": 2, "ax": 40, "ay": -40, "font": {"color": "#B71C1C"}})
    max_lr = max((e.lr for e in rows), default=0.0)
    return figure(data, {
        "xaxis": {**step_axis(_("step"), steps), "domain": [0.0, 0.94]},  # room on the right for the lr axis
        "yaxis": {**axis_title(_("cross-entropy loss (nats)")), "rangemode": "tozero"},
        # tickmode "auto": Plotly's default for an axis overlaying another is "sync", ticks at the loss
        # axis' gridlines (a learning rate of 0.000295082); before the first step there is no rate to tick
        "yaxis2": {**axis_title(_("learning rate")), "overlaying": "y", "side": "right", "anchor": "x",
                   "showgrid": False, "tickformat": LR_TICKS, "range": [0, 1.05 * max_lr if max_lr > 0 else 1],
                   "tickmode": "auto", "nticks": 4, "showticklabels": max_lr > 0},
        "shapes": shapes, "annotations": notes, "height": 400, "margin": MARGIN, "legend": legend_below(-0.2),
    })


def lr_figure(lrs: Sequence[float], warmup_steps: int = 0, tr: Translate = english) -> go.Figure:
    """The learning rate at every step (`lrs[step]`, from minigpt.train.lr_at): the warmup's
    straight climb, then the cosine down to min_lr (or flat), with the turn marked."""
    _ = tr
    data = [{"type": "scatter", "x": list(range(len(lrs))), "y": list(lrs), "mode": "lines", "name": _("learning rate"),
             "line": {"color": "#1E88E5"}, "hovertemplate": _("step") + " %{x}: %{y:.3~g}<extra></extra>"}]
    shapes, notes = [], []
    if 0 < warmup_steps < len(lrs):  # the curve peaks at the line's top: the label goes at its foot
        shape, note = vline(warmup_steps, _("warmup ends (step {step})", step=warmup_steps))
        shapes, notes = [shape], [note]
    return figure(data, {
        "xaxis": axis_title(_("step")), "yaxis": {**axis_title(_("learning rate")), "tickformat": LR_TICKS,
                                                  "rangemode": "tozero"},
        "shapes": shapes, "annotations": notes, "height": 300, "margin": {**MARGIN, "t": 30}, "showlegend": False,
    })


def task_figure(history: Sequence[TrainEvent], chance: float, tr: Translate = english) -> go.Figure:
    """A task's held-out accuracy at each evaluation (the events' `score`, a TaskScore): answer
    characters, and whole lines, right."""
    _ = tr
    evals = [e for e in history if e.score is not None]
    steps = [e.step for e in evals]
    shape, note = hline(chance, _("guessing: {chance:.0%}", chance=chance))
    return figure([
        {"type": "scatter", "x": steps, "y": [e.score.chars for e in evals], "mode": "lines+markers",
         "name": _("answer characters right"), "line": {"color": "#2E7D32"}},
        {"type": "scatter", "x": steps, "y": [e.score.lines for e in evals], "mode": "lines+markers",
         "name": _("whole answers right"), "line": {"color": "#6A1B9A", "dash": "dot"}},
    ], {
        "xaxis": step_axis(_("step"), steps),
        "yaxis": {**axis_title(_("accuracy on held-out lines")), "range": [0, 1.02], "tickformat": ".0%"},
        "shapes": [shape], "annotations": [note], "height": 300, "margin": MARGIN, "legend": legend_below(),
    })


def compare_figure(records: Sequence, tr: Translate = english) -> go.Figure:
    """Runs side by side: each run's validation loss (solid, at its evaluations) and training loss
    (dotted), one colour per run. A run's name is plain text, as typed."""
    _ = tr
    data = []
    for i, record in enumerate(records):
        color, name = COLORS[i % len(COLORS)], plain(record.name)
        data.append({"type": "scatter", "mode": "lines+markers", "x": list(record.val_steps), "y": list(record.val_loss),
                     "name": _("{run} · val loss", run=name), "line": {"color": color}})
        data.append({"type": "scatter", "mode": "lines", "x": list(record.steps), "y": list(record.train_loss),
                     "name": _("{run} · train loss", run=name), "line": {"color": color, "dash": "dot", "width": 1}})
    steps = [s for record in records for s in (*record.steps, *record.val_steps)]
    return figure(data, {"height": 380, "xaxis": step_axis(_("step"), steps), "yaxis": axis_title(_("loss (nats)")),
                         "legend": {"orientation": "h", "y": -0.25}, "margin": MARGIN})


BOARD_TYPE = 18  # px: a class board's chart is read from the back of a room
BOARD_POINTS = 200  # points per line on a class board (a run's training loss, the class's band): light to send to every viewer
BOARD_ALL = 15  # a board of up to this many runs draws every run; a larger one draws BOARD_BEST and sums up the class
BOARD_BEST = 10  # on a larger board, the runs drawn for their validation loss: ten colours a projector tells apart
BOARD_BAND = (10, 90)  # percentiles: a larger board's grey band of the class's validation loss, its median between
# one colour per run on a class board, distinct enough for 30 runs on a projector: Plotly's Dark24,
# then its Alphabet palette's darker half for the rest (a colour repeats only past 36 runs)
BOARD_COLORS = ("#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#222A2A", "#B68100", "#750D86", "#EB663B",
                "#511CFB", "#00A08B", "#FB00D1", "#FC0080", "#B2828D", "#6C7C32", "#778AAE", "#862A16", "#A777F1",
                "#620042", "#1616A7", "#DA60CA", "#6C4516", "#0D2A63", "#AF0038", "#0068FF", "#2ED9FF", "#E83C2B",
                "#8F6C00", "#1C8356", "#005C31", "#C075A6", "#5B3F8C", "#FE00FA", "#3283FE", "#85660D", "#782AB6")
BAND_GREY, MEDIAN_GREY = "rgba(117, 117, 117, 0.22)", "#616161"


@dataclass(frozen=True)
class BoardChoice:
    """What a class board's chart draws as curves. `drawn`: the rows, in the legend's order; `best`: how
    many of them lead it for their validation loss; `total`: the board's runs. A board of more than
    BOARD_ALL runs is `summarised`: the rest are only in the class's grey band and median."""

    drawn: tuple
    best: int
    total: int

    @property
    def summarised(self) -> bool:
        return self.total > BOARD_ALL


def board_choice(rows: Sequence, own: Collection[str] = ()) -> BoardChoice:
    """Which of a board's rows its chart draws: every row on a board of up to BOARD_ALL, in the board's
    order; on a larger one the BOARD_BEST best by best validation loss (those that meet the teacher's
    challenge first: no `refusals`), then the pinned run and the viewer's `own` (post ids) among the rest."""
    if len(rows) <= BOARD_ALL:
        return BoardChoice(tuple(rows), len(rows), len(rows))
    best = sorted(rows, key=_merit)[:BOARD_BEST]  # stable: equal results keep the board's order
    chosen = {row.post_id for row in best}
    extra = [row for row in rows if (row.pinned or row.post_id in own) and row.post_id not in chosen]
    return BoardChoice((*best, *extra), len(best), len(rows))


def _merit(row) -> tuple:
    # a run refused by the challenge after every run that meets it; one not yet evaluated last
    best = min(row.record.val_loss, default=None)
    return bool(getattr(row, "refusals", ())), best is None, best or 0.0


def board_figure(rows: Sequence, tr: Translate = english, *, titled: bool = True, own: Collection[str] = (),
                 band: tuple[list[int], np.ndarray] | None = None) -> go.Figure:
    """A class board's runs on one chart for a projector: each drawn run's validation loss (solid, at
    its evaluations) and training loss (dotted), one colour and one legend entry per run, in large type.
    A pinned run's lines are drawn thicker. `rows` are board rows (serve.classes.board.BoardRow): post_id,
    label, record, pinned and refusals, read by attribute; a label is plain text, shown as typed (`plain`).
    A board of more than BOARD_ALL runs draws `board_choice`'s runs, best first, the viewer's `own`
    (post ids) thicker and named theirs, over the class's validation loss in grey: `band`, board_band(rows),
    which every viewer's figure shares. titled=False leaves the title to the page, which wraps it on a phone (Plotly cuts it off)."""
    _ = tr
    choice = board_choice(rows, own)
    data = band_traces(band or board_band(rows), tr) if choice.summarised else []
    for i, row in enumerate(choice.drawn):
        data += run_traces(row, BOARD_COLORS[i % len(BOARD_COLORS)], tr, mine=choice.summarised and row.post_id in own)

    def axis(title: str) -> dict:
        return {"title": {"text": title, "font": {"size": BOARD_TYPE + 2}}, "tickfont": {"size": BOARD_TYPE}}
    return figure(data, {
        "height": 720, "font": {"size": BOARD_TYPE},
        "title": {"text": board_title(tr) if titled else "", "font": {"size": BOARD_TYPE + 4}},
        "xaxis": {**step_axis(_("step"), [s for trace in data for s in trace["x"]]), **axis(_("step"))},
        "yaxis": axis(_("loss (nats)")),
        # below the chart, in rows across its width: 30 runs' names all in sight, none scrolled away
        "legend": {**legend_below(-0.14), "font": {"size": BOARD_TYPE}, "itemclick": "toggle",
                   "itemdoubleclick": "toggleothers"},
        "margin": {"l": 80, "r": 20, "t": 70 if titled else 20, "b": 70}, "hoverlabel": {"font": {"size": BOARD_TYPE}},
    })


def run_traces(row, color: str, tr: Translate, mine: bool = False) -> list[dict]:
    """One run's two lines on the board: its validation loss, in the legend, and its training loss."""
    _ = tr
    width = 5 if row.pinned or mine else 2.5
    name = plain(row.label)
    if mine:
        name = _("{run} (yours)", run=name)
    record = row.record
    train = downsample(list(zip(record.steps, record.train_loss)), BOARD_POINTS)
    return [{"type": "scatter", "mode": "lines+markers", "x": list(record.val_steps), "y": list(record.val_loss),
             "name": name, "legendgroup": row.post_id, "line": {"color": color, "width": width},
             "marker": {"size": 7}, "hovertemplate": _("{run}: val loss %{{y:.3f}} at step %{{x}}",
                                                      run=TRACE_NAME) + "<extra></extra>"},
            {"type": "scatter", "mode": "lines", "x": [s for s, _loss in train], "y": [v for _s, v in train],
             "name": name, "legendgroup": row.post_id, "showlegend": False, "opacity": 0.55,
             "line": {"color": color, "dash": "dot", "width": width * 0.6},
             "hovertemplate": _("{run}: train loss %{{y:.3f}} at step %{{x}}", run=TRACE_NAME) + "<extra></extra>"}]


def band_traces(band: tuple[list[int], np.ndarray], tr: Translate) -> list[dict]:
    """The class's validation loss in grey (board_band's), under the drawn runs: the band between the
    BOARD_BAND percentiles (one legend entry) and the median, a dashed line."""
    _ = tr
    steps, (low, median, high) = band
    if not steps:
        return []
    class_rank = {"legendrank": 2000}  # after the runs in the legend (plotly's default rank: 1000)
    edge = {"type": "scatter", "mode": "lines", "x": steps, "legendgroup": "class band", "line": {"width": 0},
            **class_rank}
    low_pct, high_pct = BOARD_BAND
    return [
        {**edge, "y": low.tolist(), "showlegend": False, "hoverinfo": "skip"},
        {**edge, "y": high.tolist(), "fill": "tonexty", "fillcolor": BAND_GREY, "hoverinfo": "skip",
         "name": _("the class's middle {share}% ({low}th–{high}th percentile)", share=high_pct - low_pct,
                   low=low_pct, high=high_pct)},
        {"type": "scatter", "mode": "lines", "x": steps, "y": median.tolist(), "name": _("the class's median"),
         "line": {"color": MEDIAN_GREY, "width": 4, "dash": "dash"}, **class_rank,
         "hovertemplate": _("{run}: val loss %{{y:.3f}} at step %{{x}}", run=TRACE_NAME) + "<extra></extra>"},
    ]


def board_band(rows: Sequence) -> tuple[list[int], np.ndarray]:
    """The class's validation loss at each step where a run was evaluated (at most BOARD_POINTS of
    them): its BOARD_BAND low percentile, median and high percentile across the runs, each run's curve
    read between its own evaluations (straight between two) and never beyond its first or last. An
    array of those three rows, one column per step; no steps where no run has been evaluated."""
    curves = [(np.asarray(row.record.val_steps, dtype=float), np.asarray(row.record.val_loss, dtype=float))
              for row in rows if row.record.val_loss]
    if not curves:
        return [], np.empty((3, 0))
    grid = np.asarray(downsample(np.unique(np.concatenate([steps for steps, _loss in curves])), BOARD_POINTS))
    losses = np.full((len(curves), len(grid)), np.nan)  # (runs, steps)
    for i, (steps, loss) in enumerate(curves):
        inside = (grid >= steps[0]) & (grid <= steps[-1])
        losses[i, inside] = np.interp(grid[inside], steps, loss)
    return grid.astype(int).tolist(), percentiles(losses, [BOARD_BAND[0], 50, BOARD_BAND[1]])


def percentiles(values: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """np.nanpercentile(values, qs, axis=0), linear between ranks, for columns of at least one value:
    every column at once, where numpy's applies itself to one column after another."""
    ordered = np.sort(values, axis=0)  # NaN last
    n = np.count_nonzero(~np.isnan(values), axis=0)  # (columns,)
    rank = (n - 1) * np.asarray(qs, dtype=float)[:, None] / 100  # (qs, columns)
    below = np.floor(rank).astype(int)
    above = np.minimum(below + 1, n - 1)
    columns = np.arange(values.shape[1])
    low, high = ordered[below, columns], ordered[above, columns]
    return low + (rank - below) * (high - low)


def board_title(tr: Translate = english) -> str:
    _ = tr
    return _("Validation loss (solid) and training loss (dotted), one colour per run")
