"""minigpt/viz/: a run's name is plain text in a chart, as typed: in the legend and in the hover label,
a `"` stays a `"` (Plotly knows no &quot;), markup stays characters, and a name that looks like a hover
template is not one. The figures' specs here; the same names as plotly.js draws them, in the browser
test at the end.

    pytest tests/minigpt/viz/test_viz_names.py
"""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from helpers.browser import plotly_page
from minigpt.viz import board_figure, compare_figure

NAMES = ['=HYPERLINK("http://e.example","click")', "<b>bold</b> & co", "%{y} it's", "a &quot; b"]
STEPS, LOSSES = [0, 10, 20], [4.0, 3.5, 3.0]


def record(name: str, lower: float = 0.0):
    losses = [loss - lower for loss in LOSSES]
    return SimpleNamespace(name=name, steps=STEPS, train_loss=losses, val_steps=STEPS, val_loss=losses)


def board(names=NAMES):  # each run's curve apart from the others': each hover finds its own
    return board_figure([SimpleNamespace(label=name, post_id=f"p{i}", pinned=False, record=record(name, i / 2))
                         for i, name in enumerate(names)])


def test_the_boards_legend_escapes_markup_and_nothing_else():
    legend = [trace.name for trace in board().data if trace.showlegend is not False]
    assert legend == ['=HYPERLINK("http://e.example","click")', "&lt;b&gt;bold&lt;/b&gt; &amp; co", "%{y} it's",
                      "a &amp;quot; b"]


def test_no_name_is_written_into_a_hover_template():
    for trace in board().data:  # the template reads the trace's name: "%{y}" typed as a name stays text
        assert trace.hovertemplate.startswith("%{fullData.name}: ") and "%{y} it" not in trace.hovertemplate


def test_the_comparisons_legend_escapes_markup():
    names = [trace.name for trace in compare_figure([record("<i>x</i>"), record('"q"')]).data]
    assert names == ["&lt;i&gt;x&lt;/i&gt; · val loss", "&lt;i&gt;x&lt;/i&gt; · train loss", '"q" · val loss',
                     '"q" · train loss']


@pytest.fixture(scope="module")
def plot(browser):
    """One page with the plotly.js that plotly ships, loaded once; each test draws on it afresh."""
    with plotly_page(browser, 900, 800) as page:
        yield page


@pytest.mark.browser
def test_the_names_read_as_typed_in_the_drawn_legend_and_hover(plot):
    drawn = plot.evaluate("""async (figure) => { const div = document.getElementById('figure'); Plotly.purge(div);
        await Plotly.newPlot(div, figure.data, figure.layout);
        const legend = [...div.querySelectorAll('.legendtext')].map(t => t.textContent);
        const hovers = [];
        const shown = () => [...div.querySelectorAll('.hoverlayer .hovertext')].map(t => t.textContent).join(' ');
        for (let i = 0; i < figure.data.length; i += 2) {  // each run's solid line; Plotly throttles a hover: wait
          const before = shown();
          Plotly.Fx.hover(div, [{curveNumber: i, pointNumber: 1}]);
          while (!shown() || shown() === before) await new Promise(frame => requestAnimationFrame(frame));
          hovers.push(shown());
        }
        return {legend, hovers, bold: div.querySelectorAll('svg [style*="bold"]').length,
                anchors: div.querySelectorAll('svg a').length}; }""", json.loads(board().to_json()))
    assert drawn["legend"] == NAMES
    assert [hover.split(": val loss")[0] for hover in drawn["hovers"]] == NAMES, drawn["hovers"]
    assert drawn["bold"] == 0 and drawn["anchors"] == 0
