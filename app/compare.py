"""Runs kept for comparison: the Train page's Keep button (and the run Start replaces, kept on its
own), and the Experiments page's comparison of the kept runs and the session's current run, live
while it trains (curves, the settings that differ, the results), a read-only link that shows the
same comparison elsewhere, and "duplicate and change one thing" back on Train."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

import streamlit as st

from minigpt import N_, ConfigError, CorpusError, GPTConfig, TrainConfig
from minigpt.lab.run_records import RunRecord, RunShelf, csv_text, differing_settings, results_table
from minigpt.serve.registry import RunEntry, RunLimitError

from . import runs, train_form, url
from .charts import config as chart_config
from .charts import html_button, swipe_hint
from .corpora import Corpus
from .i18n import _, error_text, language
from .navigation import on_every_page
from .site import TRAIN
from .text import md

if TYPE_CHECKING:  # pandas is heavy to import, and every page reads ?compare= through this module
    import pandas as pd

KEPT_KEY = "kept_runs"          # session_state: the ids this session kept, oldest first
NOTICE_KEY = "kept_runs_notice"  # session_state: a kept run let go to make room, said once
MINE_KEY = "kept_runs_mine"      # session_state: {record id: (run id, step)} for the runs this session kept itself
COUNT_KEY = "kept_runs_count"    # session_state: how many this session kept, for the default names
LIVE = "live"                # the id, in the choice of runs, of the session's current run, compared as it trains
MAX_KEPT = 6                # per session; the server keeps at most RunShelf.max_records in all
URL_READ_KEY = "compare_url_read"  # session_state: ?compare= was read on this session's first page
ID = re.compile(r"^[A-Za-z0-9_-]{12}$")
SETTING_LABELS = {  # a setting's row in the table: the Train form's label where it has one
    "corpus": N_("Corpus"), "d_model": N_("d_model (width)"), "num_heads": N_("num_heads (heads)"),
    "num_layers": N_("num_layers (layers)"), "d_ff": N_("d_ff (feed-forward width)"),
    "max_len": N_("max_len (positions)"), "dropout": N_("dropout (rate)"),
    "scale_attention": N_("Divide attention scores by √d_k"), "max_steps": N_("Steps"), "batch_size": N_("Batch size"),
    "block_size": N_("block_size (characters per window)"), "lr": N_("Learning rate"),
    "min_lr": N_("Lowest learning rate"), "warmup_steps": N_("Warmup steps"),
    "eval_interval": N_("Evaluate every … steps"), "seed": N_("Seed"),
    "early_stop_patience": N_("Evaluations without improvement before stopping early (0: never)"),
    "weight_decay": N_("Weight decay"), "betas": N_("AdamW betas"), "schedule": N_("Learning-rate schedule"),
    "eval_iters": N_("Batches per evaluation"), "grad_clip": N_("Gradient clipping (0: none)"),
    "val_fraction": N_("Validation share of the corpus"), "grad_accum": N_("Micro-batches per step"),
}


@st.cache_resource(show_spinner=False)
def shelf() -> RunShelf:
    """Every session's kept runs, one shelf per server process."""
    return RunShelf()


def keep_run(entry: RunEntry, name: str = "") -> RunRecord:
    """Put the run as it is now on the shelf, as one of this session's kept runs (the oldest let go
    past MAX_KEPT, with a notice)."""
    ss = st.session_state
    kept = ss.setdefault(KEPT_KEY, [])
    model, train = runs.run_settings(entry)
    snap = entry.run.snapshot()
    record = RunRecord.of_run(name or next_name(), entry.corpus, model, train, snap)
    kept.append(shelf().put(record))
    ss.setdefault(MINE_KEY, {})[record.record_id] = (entry.run_id, snap.step)
    if len(kept) > MAX_KEPT:
        ss[NOTICE_KEY] = _("The oldest kept run was let go to make room: a session keeps {n}.", n=MAX_KEPT)
        del kept[0]
    return record


def next_name() -> str:
    """"run N" for the next kept run, N one past the highest this session's comparison shows."""
    ss = st.session_state
    taken = {r.name for r in shelf().get(ss.get(KEPT_KEY, []))}
    n = ss.get(COUNT_KEY, 0) + 1
    while _("run {n}", n=n) in taken:
        n += 1
    ss[COUNT_KEY] = n
    return _("run {n}", n=n)


def start_run_keeping_the_last(corpus: Corpus, model: GPTConfig, train: TrainConfig, paused: bool = False) -> bool:
    """Start this session's run (Train's Start and Reset, the lesson's button) and keep the run it
    replaces for the comparison. Settings that cannot train, or a full line, are said on the page
    and change nothing. True when the run started or joined the line."""
    entry, owner = runs.session_run()
    try:
        runs.start_run(corpus, model, train, paused=paused)
    except (ConfigError, CorpusError, RunLimitError) as err:
        st.error(md(error_text(err)))
        return False
    keep_before_replacing(entry if owner else None)
    return True


def keep_before_replacing(entry: RunEntry | None) -> None:
    """The session's run was replaced (pass the old one, once the new one has started): keep it,
    unless it never trained a step or was kept as it is now."""
    if entry is None:
        return
    step = entry.run.snapshot().step
    if step > 0 and (entry.run_id, step) not in st.session_state.get(MINE_KEY, {}).values():
        keep_run(entry)


def keep_button(entry: RunEntry) -> None:
    """On Train: keep this run's curve and settings, under a name, for the Experiments page."""
    name_col, button_col = st.columns([3, 1], vertical_alignment="bottom")
    name = name_col.text_input(_("Name for the comparison"), value=_("run {n}", n=st.session_state.get(COUNT_KEY, 0) + 1),
                               key="keep_name", max_chars=40, help=_("A name already kept gets a number after it."))
    if button_col.button(_("Keep for comparison"), key="keep_run",
                         help=_("Its loss curves, settings and speed go to Experiments, to set beside other runs. "
                                "A run that Start replaces is kept on its own.")):
        if entry.run.snapshot().step == 0:  # pressed just after Start or Reset: no curve yet to compare
            st.warning(_("Run `{run}` has not trained a step yet, so there is no curve to keep: press Keep again "
                         "once it has.", run=entry.run_id))
            return
        record = keep_run(entry, unique(name.strip()))
        st.toast(_("Kept “{name}”: compare it on Experiments.", name=md(record.name)))


def unique(name: str) -> str:
    """`name`, or "name (2)", "name (3)"…: not one of this session's kept runs' names."""
    taken = {r.name for r in shelf().get(st.session_state.get(KEPT_KEY, []))}
    if name and name not in taken:
        return name
    n = 2
    while f"{name} ({n})" in taken:
        n += 1
    return f"{name} ({n})" if name else next_name()


def live_record(entry: RunEntry | None) -> RunRecord | None:
    """The session's current run as a record, as it is now (no curve yet before its first
    logged step)."""
    if entry is None:
        return None
    snap = entry.run.snapshot()
    model, train = runs.run_settings(entry)
    name = _("this run (training)") if snap.state == "running" else _("this run")
    return replace(RunRecord.of_run(name, entry.corpus, model, train, snap), record_id=LIVE)


@on_every_page
def read_and_sync_url() -> None:
    """Every page: on a session's first page run adopt ?compare=id,id (a refresh, or a link someone
    shared: the records are read-only either way), then keep the session's kept runs in the address."""
    ss = st.session_state
    if URL_READ_KEY not in ss:
        ss[URL_READ_KEY] = True
        linked = [i for i in st.query_params.get(url.COMPARE, "").split(",") if ID.match(i)][:MAX_KEPT]
        found = [r.record_id for r in shelf().get(linked)]
        if len(found) < len(linked):
            ss[NOTICE_KEY] = _("Some runs of this comparison are no longer on this server (it keeps a limited number).")
        if found:
            ss[KEPT_KEY] = list(dict.fromkeys(ss.get(KEPT_KEY, []) + found))[-MAX_KEPT:]
    kept = ",".join(ss.get(KEPT_KEY, []))
    if kept and st.query_params.get(url.COMPARE) != kept:
        st.query_params[url.COMPARE] = kept
    elif not kept and url.COMPARE in st.query_params:
        del st.query_params[url.COMPARE]


def compare_section() -> None:
    st.subheader(_("Compare runs"))
    notice = st.session_state.pop(NOTICE_KEY, None)
    if notice:
        st.warning(notice)
    records = shelf().get(st.session_state.get(KEPT_KEY, []))
    entry, _owner = runs.session_run()
    live = live_record(entry)
    if not records and live is None:
        st.info(_("Train a run on the Train page and it appears here, live. Start another one, with one thing "
                  "changed, and the first is kept: the two curves and the one setting that differs, side by side."))
        return
    by_id = {r.record_id: r for r in records} | ({LIVE: live} if live is not None else {})
    kept_as_is = live is not None and (entry.run_id, entry.run.snapshot().step) in st.session_state.get(MINE_KEY, {}).values()
    default = [i for i in by_id if i != LIVE][-4:] + ([LIVE] if live is not None and not kept_as_is else [])
    chosen = st.multiselect(_("Runs to compare"), list(by_id), default=default,
                            format_func=lambda i: by_id[i].name, key="compare_chosen", placeholder=_("Choose runs"),
                            help=_("“This run” is the one on the Train page, as it is now; the others were kept."))
    if not chosen:
        return
    training = LIVE in chosen and entry.run.state == "running"

    from minigpt.viz import compare_figure

    @st.fragment(run_every=2.0 if training else None)
    def side_by_side() -> None:
        current, _owner = runs.session_run()
        now = live_record(current) if LIVE in chosen else None
        picked = [now if i == LIVE else by_id[i] for i in chosen if i != LIVE or now is not None]
        figure = compare_figure(picked, tr=_)
        st.plotly_chart(figure, key="compare_curves", config=chart_config())
        html_button([figure], _("Compare runs"), "compare")
        settings_table(picked)
        swipe_hint("compare_results")
        table = results_table(picked)
        st.dataframe(table, hide_index=True, key="compare_results", column_config={
            "run": st.column_config.TextColumn(_("run"), pinned=True), "steps": st.column_config.NumberColumn(_("steps")),
            "train_loss": st.column_config.NumberColumn(_("last train loss"), format="%.3f"),
            "val_loss": st.column_config.NumberColumn(_("last val loss"), format="%.3f"),
            "best_val": st.column_config.NumberColumn(_("best val loss"), format="%.3f"),
            "seconds": st.column_config.NumberColumn(_("time (s)"), format="%.1f"),
            "tokens_per_sec": st.column_config.NumberColumn(_("characters/s"), format="%.0f"),
        })
        st.download_button(_("Download the table (.csv)"), data=lambda: csv_text(table),  # names safe in a spreadsheet
                           file_name="minigpt-comparison.csv", mime="text/csv", on_click="ignore", key="compare_csv",
                           type="tertiary", icon=":material/download:")
        if training and (now is None or now.name != live.name):
            st.rerun()  # the run finished or was replaced: a full rerun stops the polling

    side_by_side()
    shared = [i for i in chosen if i != LIVE]
    if shared:
        st.markdown(_("**A read-only link to this comparison** (it shows these runs' numbers, nothing else; the "
                      "address bar keeps them too, so a refresh brings them back):"))
        st.code(url.link(**{url.COMPARE: ",".join(shared), url.LANG: language()}), language=None)
    if LIVE in chosen:
        st.caption(_("The link leaves out “this run”, which changes as it trains: keep it on the Train page to "
                     "share it as it is."))
    rename([r for r in records if r.record_id in st.session_state.get(MINE_KEY, {})])
    duplicate([by_id[i] for i in chosen])


def rename(records: list[RunRecord]) -> None:
    """Name a run this session kept (a run kept from someone's link is theirs to name)."""
    if not records:
        return
    by_id = {r.record_id: r for r in records}
    with st.expander(_("Rename a kept run")):
        pick_col, name_col, button_col = st.columns([1.5, 2, 1], vertical_alignment="bottom")
        source = pick_col.selectbox(_("Run"), list(by_id), format_func=lambda i: by_id[i].name, key="rename_source")
        name = name_col.text_input(_("New name"), max_chars=40, key="rename_name")
        if button_col.button(_("Rename"), key="rename_run", disabled=not name.strip()):
            shelf().rename(source, unique(name.strip()) if name.strip() != by_id[source].name else name.strip())
            st.rerun()


def setting_text(value) -> str:
    """A setting's value in a table cell: ✓ or ✗ for a switch, a float as short as it goes."""
    return "✓" if value is True else "✗" if value is False else f"{value:g}" if isinstance(value, float) else str(value)


def settings_table(records: list[RunRecord]) -> None:
    """The settings that differ, each cell that differs from the first run's highlighted."""
    table = differing_settings(records)
    if table.empty:
        st.caption(_("Every setting is the same in these runs: any difference comes from chance alone."))
        return
    st.markdown(_("**The settings that differ** (highlighted where a run differs from the first):"))
    shown = table.map(setting_text)
    shown.index = [_(SETTING_LABELS.get(name, name)) for name in shown.index]

    def highlight(row: pd.Series) -> list[str]:
        return [""] + ["background-color: #FFF3C4" if value != row.iloc[0] else "" for value in row.iloc[1:]]
    swipe_hint("compare_settings")
    st.dataframe(shown.style.apply(highlight, axis=1), key="compare_settings")


def duplicate(records: list[RunRecord]) -> None:
    """Fill the Train form with one run's settings and go there: change one thing and start."""
    by_id = {r.record_id: r for r in records}
    pick_col, button_col = st.columns([2, 1.2], vertical_alignment="bottom")
    source = pick_col.selectbox(_("Start from the settings of"), list(by_id), format_func=lambda i: by_id[i].name,
                                key="duplicate_source")
    if button_col.button(_("Duplicate and change one thing"), key="duplicate_run"):
        record = by_id[source]
        train_form.fill(record.model, record.train)
        st.switch_page(TRAIN.script)
