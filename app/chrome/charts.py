"""How every chart is drawn: Plotly's own toolbar, on hover, with one button that saves the chart
as a PNG in the browser (no server-side renderer: that would be a heavy dependency), its tooltip
in the page's language through a Plotly locale of our own; under the charts of an experiment,
a button that saves them as an HTML page that stays interactive; and, for a reader who cannot see
them, what every chart and displayed formula needs (`describe_for_readers`): each chart named, in
the page's language, from its own figure, and a formula too wide for its box reachable by keyboard.
A figure a class asks for in every session (one model, one text) is built once per process
(`shared_figure`)."""
from __future__ import annotations

import functools
import hashlib
import json
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import streamlit as st

from minigpt import N_

from app.chrome.i18n import _, language

if TYPE_CHECKING:  # Plotly is heavy to import, and config() is on every page's path
    import plotly.graph_objects as go

SAVE = "Download plot as a PNG"  # Plotly's own words for the button, the key of its locale dictionary
FIGURES_KEPT = 128  # built figures the process keeps: a class's few models × texts × views, in each language


def shared_figure(build: Callable[..., go.Figure], *args: Any, **kwargs: Any) -> go.Figure:
    """`build(*args, **kwargs, tr=_)`, a minigpt.viz figure in the page's language, built once per process
    for the same arguments: a class on one model and text asks every session for the same one. Its key is
    the builder, the language and the arguments themselves (arrays by their contents), so a learner's own
    text, model or choice gets its own figure. Shared by every session that asks: draw it, never change it."""
    # the arguments by their pickle, which writes every value whole; Streamlit's own caches hash each
    # character of a vocabulary one by one, and took longer than building the figure
    digest = hashlib.blake2b(pickle.dumps((args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()
    return _built(_Figure(build, language(), digest, args, kwargs))


@dataclass(frozen=True)
class _Figure:
    """A figure asked for: equal, for the cache, when the builder, language and arguments' digest are."""

    build: Callable[..., go.Figure]
    lang: str
    digest: str
    args: tuple = field(compare=False)
    kwargs: dict = field(compare=False)


@functools.lru_cache(maxsize=FIGURES_KEPT)  # two sessions asking at once may both build it: the same figure
def _built(asked: _Figure) -> go.Figure:
    return asked.build(*asked.args, tr=_, **asked.kwargs)  # `_` speaks asked.lang: the session asking builds it


def config() -> dict:
    """The config every st.plotly_chart gets."""
    lang = language()
    return {
        "displayModeBar": "hover",
        "modeBarButtons": [["toImage"]],
        "displaylogo": False,
        "toImageButtonOptions": {"format": "png", "scale": 2, "filename": "minigpt-lab"},
        "locale": lang,
        "locales": {lang: {"dictionary": {SAVE: _("Download plot as a PNG")}}},
    }


def html_button(figures: Sequence[go.Figure], name: str, key: str) -> None:
    """Save these charts as one HTML page (plotly.js inside, so it opens offline), built only when
    the button is clicked."""
    from minigpt.viz import figures_html
    title = f"MiniGPT Lab · {name}"
    st.download_button(_("Save as HTML"), data=lambda: figures_html(figures, title), file_name=f"minigpt-{key}.html",
                       mime="text/html", on_click="ignore", key=f"html_{key}", type="tertiary",
                       icon=":material/download:",
                       help=_("One page with these charts that opens in any browser, offline, and stays "
                              "interactive: hover, zoom, and the PNG button."))


SWIPE = "swipe_hint"  # the key prefix of the hints a phone shows over a table wider than itself


def swipe_hint(key: str) -> None:
    """Over a table with more columns than a phone is wide: a line saying it scrolls sideways, shown
    on narrow screens only (the page's CSS), where a phone draws no scrollbar and just cuts it off."""
    with st.container(key=f"{SWIPE}_{key}"):
        st.caption(_("⇆ Swipe the table sideways: it has more columns than this screen is wide."))


READER_KEY = "chart_reader"  # the hidden container the readers' script is drawn in
KINDS = {"heatmap": N_("Heatmap"), "line": N_("Line chart"), "bar": N_("Bar chart"), "scatter": N_("Scatter plot"),
         "chart": N_("Chart")}
# how a chart's name is put together from its figure: kind and title, its axes' titles, its legend's names
PHRASES = {"titled": N_("{kind}: {title}"), "grid": N_("{y} down, {x} across"), "axes": N_("{y} against {x}"),
           "across": N_("{x} across"), "down": N_("{y} down"), "along": N_("along the bottom: {x}"),
           "height": N_("height: {y}"), "series": N_("{n} series: {names}"), "join": N_("{first}; {rest}"),
           "list": N_("{first}, {rest}")}
MOST_NAMES = 8  # a board's legend may list a whole class: the name says how many, and the first few
# Every Plotly chart of a page (Plotly keeps its figure on the chart's element: layout, data) gets role
# "figure" and a name made from that figure: "Line chart: loss (nats) against step; 2 series: train
# loss, val loss". Its titles are already in the page's language (minigpt.viz's figures take tr=_);
# a Chinese y title that minigpt.viz._layout set level is an annotation over its axis, and a stacked
# figure's parts are titled by annotations placed on the paper (minigpt.viz._layout.stack). And a displayed
# formula wider than its box (it scrolls sideways) gets tabindex 0, so that a keyboard can reach it and
# scroll it (axe: scrollable-region-focusable). Redone as React and Plotly redraw (a MutationObserver),
# and as the window's width changes what scrolls; idempotent, as streamlit_words' script is.
READER_SCRIPT = """(() => {
const lab = window.minigptReader ||= {};
lab.words = WORDS;
const fill = (t, f) => t.replace(/\\{(\\w+)\\}/g, (_, k) => f[k] ?? '');
const plain = html => { const box = document.createElement('textarea');
  box.innerHTML = String(html || '').replace(/\\x3cbr\\s*\\/?>/gi, ' ').replace(/\\x3c[^>]*>/g, '');
  return box.value.replace(/\\s+/g, ' ').trim(); };
const list = items => items.reduce((a, b) => a === null ? b : fill(lab.words.list, {first: a, rest: b}), null) || '';
const unique = items => [...new Set(items.filter(Boolean))];
const titles = (layout, letter) => unique(Object.keys(layout)
  .filter(k => new RegExp(`^${letter}axis\\\\d*$`).test(k)).sort()
  .map(k => plain(layout[k]?.title?.text) || (letter === 'y' ? plain((layout.annotations || []).find(a =>
    a.yref === `y${k.slice(5)} domain` && a.y === 1 && a.yanchor === 'bottom')?.text) : '')));
const kind = data => { const types = data.map(t => t.type || 'scatter');
  if (types.includes('heatmap')) return 'heatmap';
  if (types.includes('bar')) return 'bar';
  if (types.every(t => t === 'scatter'))
    return data.some(t => (t.mode || 'lines').includes('lines')) ? 'line' : 'scatter';
  return 'chart'; };
const parts = layout => list(unique((layout.annotations || []).filter(a => a.xref === 'paper' && a.yref === 'paper'
  && !a.showarrow).map(a => plain(a.text))));
const axes = (shape, x, y) => { const w = lab.words, grid = shape === 'heatmap';
  if (x && y) return fill(grid ? w.grid : w.axes, {x, y});
  if (x) return fill(grid ? w.across : w.along, {x});
  return y ? fill(grid ? w.down : w.height, {y}) : ''; };
const named = plot => {
  const layout = plot.layout || {}, data = plot.data || [], w = lab.words, shape = kind(data);
  const title = plain(layout.title?.text) || parts(layout), what = w.kinds[shape];
  const x = list(titles(layout, 'x')), y = list(titles(layout, 'y'));
  let names = shape === 'heatmap' ? [] : unique(data.filter(t => t.showlegend !== false).map(t => plain(t.name)));
  const count = names.length;
  if (count > MOST) names = [...names.slice(0, MOST), '…'];
  const series = count ? fill(w.series, {n: count.toLocaleString(w.lang), names: list(names)}) : '';
  return [title ? fill(w.titled, {kind: what, title}) : what, axes(shape, x, y), series].filter(Boolean)
    .reduce((a, b) => fill(w.join, {first: a, rest: b}));
};
const apply = () => {
  lab.queued = false;
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const chart = plot.closest('[data-testid=stPlotlyChart]') || plot;
    const name = named(plot);
    if (chart.getAttribute('aria-label') !== name) chart.setAttribute('aria-label', name);
    if (chart.getAttribute('role') !== 'figure') chart.setAttribute('role', 'figure');
  }
  for (const formula of document.querySelectorAll('.katex-display')) {
    const scrolls = formula.scrollWidth > formula.clientWidth
      && /auto|scroll/.test(getComputedStyle(formula).overflowX);
    if (scrolls && !formula.hasAttribute('tabindex')) formula.setAttribute('tabindex', '0');
    if (!scrolls && formula.getAttribute('tabindex') === '0') formula.removeAttribute('tabindex');
  }
};
const queue = () => { if (!lab.queued) { lab.queued = true; requestAnimationFrame(apply); } };
if (!lab.observer) {
  lab.observer = new MutationObserver(queue);
  lab.observer.observe(document.body, {subtree: true, childList: true});
  window.addEventListener('resize', queue);
}
apply();
})();"""


def reader_words() -> dict:
    """The words the readers' script puts together, in the page's language, unfilled."""
    return {"lang": language(), "kinds": {shape: _(word) for shape, word in KINDS.items()},
            **{name: _(phrase) for name, phrase in PHRASES.items()}}


def reader_script() -> str:
    return _reader_script(language())


@functools.cache  # per language: the catalogs do not change while the process runs
def _reader_script(lang: str) -> str:
    # as streamlit_words.script: JSON with every "<" escaped, and no "<" in the code (its patterns write \x3c),
    # as st.html's sanitizer drops a script whose text holds "<" before a letter, "/" or "!"
    words = json.dumps(reader_words(), ensure_ascii=False).replace("<", "\\u003c")
    return READER_SCRIPT.replace("MOST", str(MOST_NAMES)).replace("WORDS", words)


def describe_for_readers() -> None:
    """On every page (navigation draws it): the readers' script, in a container that takes no room."""
    with st.container(key=READER_KEY):
        st.html(f"<style>.st-key-{READER_KEY} {{ display: none }}</style><script>{reader_script()}</script>",
                unsafe_allow_javascript=True)
