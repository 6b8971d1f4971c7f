"""What every figure builder shares: the style they are written in, the translation convention,
and the helpers that lay figures out. Private to minigpt.viz.

One style. A builder is a pure function from plain data (numpy arrays, lists, the library's
records read by attribute) to a Plotly figure. It writes the figure's traces and layout as plain
dicts and returns `figure(data, layout)`, which builds the figure without validating it: the
views that redraw as a learner moves a slider were measured much faster so than through
graph_objects' setters and make_subplots (bench/RESULTS.md), and tests/minigpt/viz validates
every builder's output through plotly.
Reference lines are `hline` and `vline`, plotly's add_hline and add_vline written out as dicts.

One translation convention. Every builder takes `tr: Translate = english` and begins
`_ = tr`, then wraps each title, axis, legend and hover text in `_()`: the catalogs' extractor
finds the English strings by that name, and the app passes its own `tr` (a gettext lookup, then
the same filling) to get them in the learner's language. Plotly's own %{...} fields stay as
they are.
"""
from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence

import numpy as np
import plotly.graph_objects as go

MAX_POINTS = 2000  # points per line: a long run's history is thinned to this many
MASK_COLOR = "#d9d9d9"
LR_TICKS = "~g"  # learning rates as a textbook writes them: 0.0004, not 4.0e-4
COLORS = ("#1E88E5", "#E53935", "#43A047", "#FB8C00", "#8E24AA", "#00ACC1", "#6D4C41", "#546E7A")
REFERENCE = "#757575"  # the grey of a reference line



def english(message: str, /, **params) -> str:
    """The default `tr` of every builder: the English message, its fields filled."""
    return message.format(**params) if params else message


Translate = Callable[..., str]
Spec = tuple[list[dict], dict]  # a figure's traces and layout as plain dicts


def figure(data: list[dict], layout: dict) -> go.Figure:
    """A figure from plain trace and layout dicts, unvalidated (see the module's docstring), its
    Chinese (or other CJK) y-axis titles set level."""
    return go.Figure({"data": data, "layout": level_y_titles(layout)}, _validate=False)  # numpy arrays as typed arrays


def level_y_titles(layout: dict) -> dict:
    """The layout with each y-axis title written in CJK moved above its axis, level, as an annotation:
    Plotly turns a y title 90°, and Chinese on its side is read with the head tilted. Its axis's end
    of the plot (left, or right for a right-hand axis), the top margin grown to hold it, and a
    figure's title pinned to the top edge above it. Other titles stay where Plotly puts them."""
    moved = [key for key, axis in layout.items() if key.startswith("yaxis") and is_cjk(axis_text(axis))]
    if not moved:
        return layout
    layout, notes, room = dict(layout), list(layout.get("annotations", [])), 0
    for key in moved:
        axis = layout[key]
        font, anchor = {"size": 14, **axis["title"].get("font", {})}, axis.get("anchor", "x")  # 14: plotly's title size
        right = axis.get("side") == "right"
        notes.append({"text": axis["title"]["text"], "font": font, "showarrow": False,
                      "xref": f"{anchor} domain" if anchor.startswith("x") else "paper",
                      "x": 1 if right else 0, "xanchor": "right" if right else "left",
                      "yref": f"y{key[5:]} domain", "y": 1, "yanchor": "bottom", "yshift": LEVEL_GAP_PX})
        layout[key] = {**axis, "title": {**axis["title"], "text": ""}}
        if axis.get("domain", [0, 1])[1] >= 1:  # at the top of the figure: above it is the margin
            room = max(room, round(1.4 * font["size"]) + LEVEL_GAP_PX)
    layout["annotations"] = notes
    if "margin" in layout:  # else plotly's own top margin, 100 px, holds it
        layout["margin"] = {**layout["margin"], "t": layout["margin"].get("t", 100) + room}
    if layout.get("title", {}).get("text") and "y" not in layout["title"]:
        layout["title"] = {"y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 10}, **layout["title"]}
    return layout


LEVEL_GAP_PX = 6  # between the plot's top edge and a level y title


def axis_text(axis: dict) -> str:
    title = axis.get("title", {})
    return title.get("text", "") if isinstance(title, dict) else ""


def is_cjk(text: str) -> bool:
    """Whether `text` has a Chinese, Japanese or Korean character, which reads only upright."""
    return any(unicodedata.name(c, "").startswith(("CJK ", "HIRAGANA", "KATAKANA", "HANGUL")) for c in text)


def hline(y: float, text: str, *, position: str = "top right", color: str = REFERENCE, dash: str = "dash",
          yref: str = "y") -> tuple[dict, dict]:
    """A horizontal line across the plot at `y` and its label at the right end, above the line
    ("top right") or under it ("bottom right"): a shape and an annotation."""
    shape = {"type": "line", "xref": "x domain", "x0": 0, "x1": 1, "yref": yref, "y0": y, "y1": y,
             "line": {"color": color, "dash": dash, "width": 1}}
    note = {"text": text, "xref": "x domain", "x": 1, "xanchor": "right", "yref": yref, "y": y,
            "yanchor": "bottom" if position.startswith("top") else "top", "showarrow": False}
    return shape, note


def vline(x: float, text: str = "", *, color: str = REFERENCE, dash: str = "dash") -> tuple[dict, dict | None]:
    """A vertical line through the plot at `x`, and its label (if any) at the line's foot, to its right."""
    shape = {"type": "line", "xref": "x", "x0": x, "x1": x, "yref": "y domain", "y0": 0, "y1": 1,
             "line": {"color": color, "dash": dash, "width": 1}}
    note = ({"text": text, "xref": "x", "x": x, "xanchor": "left", "yref": "y domain", "y": 0, "yanchor": "bottom",
             "showarrow": False} if text else None)
    return shape, note


def axis_title(text: str) -> dict:
    return {"title": {"text": text}}


WHOLE_STEPS = 10  # below this many steps on a step axis, Plotly would tick 0.2, 0.4 …: tick every step instead


def step_axis(text: str, steps: Sequence[int]) -> dict:
    """An axis of training steps: from step 0, never below it (Plotly pads an axis of one point, or
    of none, to either side: step -1), and in whole steps while a run is young."""
    axis = {**axis_title(text), "rangemode": "nonnegative"}
    if max(steps, default=0) < WHOLE_STEPS:
        axis["dtick"] = 1
    return axis


def legend_below(y: float = -0.25) -> dict:
    return {"orientation": "h", "yanchor": "top", "y": y, "x": 0}


MARGIN = {"l": 10, "r": 10, "t": 20, "b": 10}  # a lone figure's margins, which its axes may grow


HEADING_PX = 40  # the height of a stacked part's heading
COLORBAR_PX = 80  # the right margin of a stacked figure: a colour bar, its ticks and their numbers
AXIS_PX = 50  # room under a stacked part for its bottom axis's ticks and title, which a lone figure's margin grows to
_OWN = ("height", "margin", "title", "annotations", "shapes", "showlegend")  # what a part's layout keeps to itself



def stack(parts: Sequence[tuple[str, Spec]]) -> Spec:
    """Figure specs one above the other in one spec, each under a heading, keeping its own axes,
    height (px) and title: each part's axes are renumbered and its paper y mapped into its band.

    The margins are fixed (wide enough for the longest y tick label, and for the colour bars) and
    no axis grows them: a margin that grows makes plotly draw the figure a second time, and
    Streamlit already draws a changed chart twice (once before it knows the width)."""
    total = sum(HEADING_PX + layout["height"] + AXIS_PX for _, (_, layout) in parts)
    ticks = [t for _, (_, part) in parts for k, axis in part.items() if k.startswith("yaxis")
             for t in axis.get("ticktext", [])]
    data, layout = [], {"height": total, "showlegend": False, "annotations": [], "shapes": [],
                        "margin": {"l": 10 + max(map(text_px, ticks), default=30), "r": COLORBAR_PX, "t": 0, "b": 0}}
    top, count, edge = 0, {"x": 0, "y": 0}, 4 - layout["margin"]["l"]  # edge: xshift from the plot to the figure's left
    for heading, (part_data, part) in parts:
        margin = {"t": 0, "b": 0, **part.get("margin", {})}
        band = (top + HEADING_PX + margin["t"], top + HEADING_PX + part["height"] - margin["b"])  # px from the top
        paper = lambda y, band=band: 1 - (band[1] - y * (band[1] - band[0])) / total  # noqa: E731
        rename = renamer(part_data, part, count)
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


def text_px(text: str, size: int = 12) -> int:
    """About how wide plotly draws `text` (px): a Chinese or other full-width character is as wide
    as the font size, others about 0.6 of it."""
    return round(sum(size if unicodedata.east_asian_width(c) in "WF" else 0.6 * size for c in text)) + 8


def renamer(part_data: list[dict], part: dict, count: dict[str, int]) -> Callable[[str], str]:
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


def downsample(rows: Sequence, limit: int = MAX_POINTS) -> list:
    if len(rows) <= limit:
        return list(rows)
    stride = -(-len(rows) // limit)
    return list(rows[::stride]) + ([rows[-1]] if (len(rows) - 1) % stride else [])


def masked(weights: np.ndarray) -> np.ndarray:
    """float32 copy with the future (upper) triangle set to NaN, drawn as the grey background."""
    z = np.array(weights, dtype=np.float32, copy=True)
    z[np.triu_indices(z.shape[-1], k=1)] = np.nan
    return z


def sign(c: str) -> str:
    """A character in a list of characters: a space or a line break drawn as a sign, not lost."""
    return {" ": "␣", "\n": "⏎", "\t": "⇥"}.get(c, tick(c))


def tick(c: str) -> str:
    return c if c.isprintable() and not c.isspace() else repr(c)[1:-1] or "·"
