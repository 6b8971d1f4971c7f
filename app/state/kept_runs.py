"""Runs kept for comparison: what this session kept (with Keep on Train, or the run Start replaced,
kept on its own), on a shelf the server shares, named and in the address (?compare=id,id), so that a
refresh keeps the comparison and a link shows it elsewhere, read-only. parts.compare draws it."""
from __future__ import annotations

import re
from dataclasses import replace

import streamlit as st

from minigpt import ConfigError, CorpusError, GPTConfig, TrainConfig
from minigpt.lab.run_records import RunRecord, RunShelf
from minigpt.serve import RunEntry, RunLimitError

from app.chrome import url
from app.chrome.i18n import _, error_text
from app.chrome.text import md
from app.state import classroom, runs, serving
from app.state.corpora import Corpus

KEPT_KEY = "kept_runs"          # session_state: the ids this session kept, oldest first
NOTICE_KEY = "kept_runs_notice"  # session_state: a kept run let go to make room, said once
MINE_KEY = "kept_runs_mine"      # session_state: {record id: (run id, step)} for the runs this session kept itself
COUNT_KEY = "kept_runs_count"    # session_state: how many this session kept, for the default names
LIVE = "live"                # the id, in the choice of runs, of the session's current run, compared as it trains
MAX_NAME = 40               # characters of a kept run's name
MAX_KEPT = 6                # per session; the server keeps at most RunShelf.max_records in all
URL_READ_KEY = "compare_url_read"  # session_state: ?compare= was read on this session's first page
ID = re.compile(r"^[A-Za-z0-9_-]{12}$")


@st.cache_resource(show_spinner=False)
def shelf() -> RunShelf:
    """Every session's kept runs, one shelf per server process, written to the store (state.serving)."""
    return RunShelf(store=serving.store())


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
    in_class = classroom.class_run_key()  # a learner in a class: a key they can derive again next week
    try:
        started = runs.start_run(corpus, model, train, paused=paused, key=in_class and in_class[0])
    except (ConfigError, CorpusError, RunLimitError) as err:
        st.error(md(error_text(err)))
        return False
    if in_class is not None:
        classroom.note_run(started.run_id, in_class[1])
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
