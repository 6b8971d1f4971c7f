"""The comparison, as Train and Experiments draw it: the Train page's Keep button, and the Experiments
page's comparison of the kept runs and the session's current run, live while it trains (curves, the
settings that differ, the results), a read-only link that shows the same comparison elsewhere, and
"duplicate and change one thing" back on Train. What is kept is state.kept_runs'."""
from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from minigpt.lab.run_records import RunRecord, csv_text, differing_settings, results_table
from minigpt.serve import RunEntry

from app.chrome import fields, url
from app.chrome.charts import config as chart_config
from app.chrome.charts import html_button, swipe_hint
from app.chrome.i18n import _
from app.chrome.site import TRAIN
from app.chrome.text import md
from app.state import runs, train_settings
from app.state.kept_runs import (COUNT_KEY, KEPT_KEY, LIVE, MAX_NAME, MINE_KEY, NOTICE_KEY, keep_run, live_record, shelf,
                                 unique)
from app.state.train_settings import SETTING_LABELS, setting_text

if TYPE_CHECKING:  # pandas is heavy to import: the pages that draw no comparison never wait for it
    import pandas as pd


def keep_button(entry: RunEntry) -> None:
    """On Train: keep this run's curve and settings, under a name, for the Experiments page."""
    name_col, button_col = st.columns([3, 1], vertical_alignment="bottom")
    name = fields.short_text(_("Name for the comparison"), MAX_NAME, where=name_col, key="keep_name",
                             value=_("run {n}", n=st.session_state.get(COUNT_KEY, 0) + 1),
                             help=_("A name already kept gets a number after it."))
    if button_col.button(_("Keep for comparison"), key="keep_run",
                         help=_("Its loss curves, settings and speed go to Experiments, to set beside other runs. "
                                "A run that Start replaces is kept on its own.")):
        if entry.run.snapshot().step == 0:  # pressed just after Start or Reset: no curve yet to compare
            st.warning(_("Run `{run}` has not trained a step yet, so there is no curve to keep: press Keep again "
                         "once it has.", run=entry.run_id))
            return
        record = keep_run(entry, unique(name.strip()))
        st.toast(_("Kept “{name}”: compare it on Experiments.", name=md(record.name)))


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
        st.code(url.link(**{url.COMPARE: ",".join(shared)}), language=None)  # no language: the reader's own
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
        name = fields.short_text(_("New name"), MAX_NAME, where=name_col, key="rename_name")
        if button_col.button(_("Rename"), key="rename_run", disabled=not name.strip()):
            shelf().rename(source, unique(name.strip()) if name.strip() != by_id[source].name else name.strip())
            st.rerun()


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
        train_settings.fill(record.model, record.train)
        st.switch_page(TRAIN.script)
