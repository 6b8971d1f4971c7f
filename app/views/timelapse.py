"""The Attention page's time-lapse: a run's attention on its probe text and its sample at each of its
evaluations, stepped through by hand or played from the first to the last."""
from __future__ import annotations

import numpy as np
import streamlit as st

from minigpt.serve import RunEntry
from minigpt.viz import attention_panels, right_key_figure

from app.chrome import charts
from app.chrome.i18n import _
from app.chrome.text import md
from app.parts import heatmaps

STEP_KEY = "timelapse_step"        # session_state: the evaluation shown (the slider's key)
PLAYING_KEY = "timelapse_playing"  # session_state: the run id being played
FRAME_SECONDS = 1.2            # how long each evaluation stays on screen while playing


def timelapse_section(entry: RunEntry | None, view: str, layer: int) -> None:
    st.subheader(_("Time-lapse: how attention formed during training"))
    evals = [r for r in entry.run.snapshot().evals if r.attention is not None] if entry is not None else []
    if not evals:
        st.info(_("Start a run on the Train page. At each evaluation it keeps the attention on a probe text and a "
                  "sample of its writing; replay them here, step by step, to watch heads go from uniform to sharp "
                  "and the text from noise to the corpus' style."))
        return
    st.markdown(_("Run `{run}` on “{probe}”, at each of its {count} evaluations so far.", run=entry.run_id,
                  probe=md(entry.probe_text), count=len(evals)))
    steps = [r.step for r in evals]
    if len(steps) > 1 and st.button(_("▶ Play from the first evaluation"), key="timelapse_play",
                                    help=_("Shows each evaluation in turn, {seconds:g} s each.",
                                           seconds=FRAME_SECONDS)):
        st.session_state[PLAYING_KEY] = entry.run_id
        st.session_state[STEP_KEY] = steps[0]
    playing = st.session_state.get(PLAYING_KEY) == entry.run_id

    @st.fragment(run_every=FRAME_SECONDS if playing else None)
    def frames() -> None:
        ss = st.session_state
        if ss.get(PLAYING_KEY) == entry.run_id and ss.get(STEP_KEY) in steps:
            here = steps.index(ss[STEP_KEY])
            if ss.pop("timelapse_drawn", None) == ss[STEP_KEY]:  # shown once already: on to the next
                if here + 1 < len(steps):
                    ss[STEP_KEY] = steps[here + 1]
                else:
                    del ss[PLAYING_KEY]
                    st.rerun()  # the last frame: a full rerun stops the timer
        show(entry, evals, view, layer)
        ss["timelapse_drawn"] = ss.get(STEP_KEY)

    frames()


def show(entry: RunEntry, evals: list, view: str, layer: int) -> None:
    """One evaluation: its val loss, the right-key scores of a task, the heatmaps and the sample."""
    steps = [r.step for r in evals]
    if st.session_state.get(STEP_KEY) not in steps:
        st.session_state[STEP_KEY] = steps[-1]
    chosen = (st.select_slider(_("Evaluation step"), steps, key=STEP_KEY) if len(steps) > 1 else steps[0])
    record = evals[steps.index(chosen)]
    st.markdown(_("**Step {step:,}** · val loss {loss:.3f}", step=record.step, loss=record.val_loss))
    probe = entry.probe_text[: record.attention.shape[-1]]
    probe_line = heatmaps.task_line(probe)
    if probe_line is not None:
        scores = np.stack([probe_line.scores(r.attention) for r in evals])
        st.markdown(_("How much weight the best head of each layer puts on the right keys, at each evaluation:"))
        st.plotly_chart(right_key_figure(steps, scores, probe_line.chance, chosen=record.step, tr=_),
                        key="right_key_chart", config=charts.config())
    span = heatmaps.pick_page(len(probe), key=f"timelapse_page:{len(probe)}")
    panels = attention_panels(record.attention, view=view, layer=min(layer, record.attention.shape[0] - 1), tr=_)
    heatmaps.draw_panels(panels, probe, span, key="timelapse", expected=probe_line.mask if probe_line else None)
    st.markdown(_("**Sample at step {step:,}**", step=record.step))
    st.code(record.sample, language=None, wrap_lines=True)
