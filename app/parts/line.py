"""The line for a training slot, as a learner sees it: the server's slots and how many wait, a
waiting run's place and estimated start (kept up to date without a click), Cancel, a training run
slowed by a busy server, and the sidebar's note on every page, which is also the owner's sign of
life while they read elsewhere."""
from __future__ import annotations

import streamlit as st

from minigpt.serve import RunEntry, RunSnapshot, slowdown

from app.chrome.i18n import _, n_
from app.chrome.text import format_duration, ordinal
from app.state import runs, serving

HEARTBEAT_SECONDS = 30.0  # any other page of the owner's looks this often, or thrice within the absence limit


def server_line() -> str:
    """"N training slots on this server · M in use · K runs waiting", or "on a cluster of M machines"."""
    registry = runs.registry()
    size = serving.placement().size
    if size is not None:  # "12 training slots on a cluster of 3 machines"
        where = _("{slots} on a cluster of {machines}", slots=n_("{n} training slot", "{n} training slots",
                                                                 registry.max_runs),
                  machines=n_("{n} machine", "{n} machines", size.machines))
    else:
        where = n_("{n} training slot on this server", "{n} training slots on this server", registry.max_runs)
    return " · ".join([where,
                       n_("{n} in use", "{n} in use", registry.active_count()),
                       n_("{n} run waiting", "{n} runs waiting", registry.waiting_count())])


def place_text(entry: RunEntry) -> str | None:
    """"3rd in line: it starts in about 2 min 10 s" for a waiting run; None once it is not waiting."""
    standing = runs.registry().standing(entry)
    if standing is None:
        return None
    place, found = standing
    if found is None:
        when = _("no run has trained on this server yet, so it cannot tell when yours starts")
    elif found.rough:
        when = _("it starts in about {wait} (a rough estimate: no run of this size has trained here yet, or a run "
                 "ahead is paused)", wait=format_duration(found.seconds))
    else:
        when = _("it starts in about {wait}", wait=format_duration(found.seconds))
    return _("**{place} in line**: {when}.", place=ordinal(place), when=when)


def waiting_view(entry: RunEntry, owner: bool) -> None:
    """What a waiting run's page shows: its place, the slots, the estimate, and Cancel for its owner."""
    text = place_text(entry)
    if text is None:  # it left the line between two looks
        return
    registry = runs.registry()
    slots = n_("The server's one training slot is in use; your run starts by itself when its turn comes: keep any "
               "page of the app open (or come back within {minutes}) to keep your place.",
               "All {n} training slots are in use; your run starts by itself when its turn comes: keep any page of "
               "the app open (or come back within {minutes}) to keep your place.",
               registry.max_runs, minutes=format_duration(registry.waiting_idle_seconds))
    st.info(_("{place} {slots}", place=text, slots=slots))  # Chinese runs one sentence on into the next, no space
    st.caption(server_line())
    if owner and st.button(_("Cancel my place"), key="cancel_waiting",
                           help=_("Take your run out of the line; nothing else changes.")):
        runs.cancel_own_run()
        st.rerun()


def paused_note(entry: RunEntry, owner: bool) -> None:
    """A paused run holds a slot: while others wait, its owner is told it will be stopped, and why it was."""
    registry = runs.registry()
    grace = format_duration(registry.paused_grace_seconds)
    if entry.stopped_for_line:
        st.info(_("Your run was stopped after {wait} paused while others waited for a training slot; its model stays "
                  "loaded. Start a new run to train again.", wait=grace))
    elif owner and entry.run.state == "paused" and registry.waiting_count():
        st.warning(n_("{n} run waits for a training slot, and a paused run holds one: after {wait} paused, yours is "
                      "stopped (its model stays loaded).",
                      "{n} runs wait for a training slot, and a paused run holds one: after {wait} paused, yours is "
                      "stopped (its model stays loaded).", registry.waiting_count(), wait=grace))


def busy_note(entry: RunEntry, snap: RunSnapshot) -> None:
    """A training run much slower now than runs of its size were here: the server is busy, and when the
    run finishes at its pace now (minigpt.serve.slowdown decides)."""
    if entry.spec is None:
        return
    slow = slowdown(snap.history, snap.max_steps, runs.registry().speeds.pace(entry.spec.shape))
    if slow is not None:
        st.info(_("**The server is busy**: this run now trains at {share:.0%} of the speed runs of its size have "
                  "had on this server. At this speed it finishes in about {time}.", share=slow.share,
                  time=format_duration(slow.seconds_left)))


def sidebar_note() -> None:
    """On every page, in the sidebar: where the session's own waiting run stands. Polling it is the
    owner's sign of life, so reading the Glossary keeps the place in line."""
    own = st.session_state.get(runs.OWN_RUN_KEY)
    if own is None:
        return
    entry = runs.registry().get(*own)
    if entry is None or not entry.is_waiting():
        return

    @st.fragment(run_every=min(HEARTBEAT_SECONDS, runs.registry().waiting_idle_seconds / 3))
    def note() -> None:
        current = runs.registry().get(*own)
        text = place_text(current) if current is not None else None
        if text is None:
            st.rerun()  # it started, or left the line: the page draws it as it is now
        st.caption(_("Your training run: {place}", place=text))

    with st.sidebar:
        note()
