"""The √d_k race on the Experiments page: two fresh models, one with and one without 1/√d_k,
the same seed, data and batches, trained step for step in this session's thread while one of
the server's training slots is held, and drawn as they go. The race waits for its slot in the
same line as every run (minigpt.serve.line.registry.request_slot), its place shown as it moves."""
from __future__ import annotations

from dataclasses import replace

import streamlit as st

from minigpt import CharTokenizer, CorpusError, GPTConfig, TrainConfig
from minigpt.lab.scaling_race import race_configs, scaling_race
from minigpt.serve import HeldSlot, RunLimitError, RunSpec
from minigpt.viz import race_figure

from app.chrome.charts import config as chart_config
from app.chrome.charts import html_button
from app.chrome.i18n import _, error_text
from app.chrome.text import md
from app.parts.line import place_text
from app.state.choices import current_device
from app.state.corpora import current_corpus
from app.state.runs import registry

D_KS, D_K = (16, 32, 64, 128), 64       # the choices, and the one the page starts at
LAYERS, LAYER = (1, 2), 1
STEPS, STEP = (100, 200, 400), 200
LRS = (1e-3, 3e-3, 1e-2, 3e-2)          # starting at TrainConfig.lr
POINTS = 10              # measurements per race
CLOSE = 0.05             # a loss gap below this share of the scaled model's loss: the note on why they agree
RACE_SHOWN_KEY = "race_shown"     # session_state: the last race's points
RACE_TICKET_KEY = "race_ticket"   # session_state: ((run id, key), settings) of the race waiting for or holding a slot
CHARTS = ("loss", "entropy", "jacobian")


def race_section() -> None:
    st.subheader(_("√d_k on a real model: the race"))
    st.markdown(_(
        "The √d_k page shows what the scaling does to random vectors. Here it is on a model that learns: two "
        "copies of one model, the same starting weights, text and batches, one dividing the scores by √d_k and "
        "one not, trained side by side on your corpus. Without the division the rows of softmax saturate, and "
        "a saturated softmax passes almost no change in the scores back to W_Q and W_K."))
    d_k_col, layers_col, steps_col, lr_col = st.columns(4)
    d_k = d_k_col.select_slider(_("d_k (one head, so d_model = d_k)"), D_KS, value=D_K, key="race_d_k",
                                help=_("The larger d_k, the larger q·k grows without the division."))
    layers = layers_col.select_slider(_("Layers"), LAYERS, value=LAYER, key="race_layers")
    steps = steps_col.select_slider(_("Steps"), STEPS, value=STEP, key="race_steps")
    lr = lr_col.select_slider(_("Learning rate"), LRS, value=TrainConfig.lr, format_func=lambda v: f"{v:g}",
                              key="race_lr", help=_("Larger steps make the weights, and so the scores, grow sooner."))
    st.caption(_("Watch the entropy and the signal charts first: on a model this size the two losses often stay "
                 "close, and the note under the race says why."))
    if st.button(_("Race"), key="race", type="primary"):
        join_the_line(d_k, layers, steps, lr)
    ticket = st.session_state.get(RACE_TICKET_KEY)
    if ticket is not None and race_turn(ticket):
        try:
            run_race(*ticket[1])  # drawn as it goes
        finally:
            st.session_state.pop(RACE_TICKET_KEY, None)
            entry = registry().get(*ticket[0])
            if entry is not None:
                registry().give_back(entry)
    elif st.session_state.get(RACE_SHOWN_KEY):
        points = st.session_state[RACE_SHOWN_KEY]
        figures = draw(points, [st.empty() for _chart in CHARTS])
        said(points)
        html_button(figures, _("√d_k on a real model: the race"), "race")


def settings(d_k: int, layers: int, steps: int, lr: float) -> tuple[CharTokenizer, GPTConfig, TrainConfig]:
    """The race's tokenizer and the configs of its two models, on the session's corpus."""
    tokenizer = CharTokenizer.from_text(current_corpus().text)
    return (tokenizer, *race_configs(tokenizer.vocab_size, d_k, layers, steps, lr, device=current_device()))


def join_the_line(d_k: int, layers: int, steps: int, lr: float) -> None:
    """Put this session's race in line for a training slot (in place of its earlier one, if it waits)."""
    tokenizer, config, train = settings(d_k, layers, steps, lr)
    spec = RunSpec("", config, replace(train, max_steps=2 * steps), tuple(tokenizer.chars), current_corpus().text)  # two models
    ss = st.session_state
    old = ss.get(RACE_TICKET_KEY)
    try:
        entry = registry().request_slot(spec, replace=old[0] if old else None)
    except RunLimitError as err:
        st.warning(md(error_text(err)))
        return
    ss[RACE_TICKET_KEY] = ((entry.run_id, entry.key), (d_k, layers, steps, lr))


def race_turn(ticket: tuple) -> bool:
    """True when the race's slot is held: race now. While it waits, its place, kept up to date."""
    entry = registry().get(*ticket[0])
    if entry is None:  # dropped from the line while the page was away
        st.session_state.pop(RACE_TICKET_KEY, None)
        return False
    if isinstance(entry.run, HeldSlot):
        return registry().claim(entry)

    @st.fragment(run_every=1.0)
    def waiting() -> None:
        now = registry().get(*ticket[0])
        text = place_text(now) if now is not None else None
        if text is None:
            st.rerun()  # its turn has come (or it left the line)
        st.info(_("The race waits for a training slot, in the same line as everyone's runs: {place}", place=text))
        if st.button(_("Cancel the race"), key="race_cancel"):
            registry().give_back(now)
            st.session_state.pop(RACE_TICKET_KEY, None)
            st.rerun()

    waiting()
    return False


def run_race(d_k: int, layers: int, steps: int, lr: float) -> None:
    """Train both models step for step in this thread, which holds a training slot, and draw them as they go."""
    corpus = current_corpus()
    tokenizer, config, train = settings(d_k, layers, steps, lr)
    places, points, figures = [st.empty() for _chart in CHARTS], [], []
    try:
        with st.spinner(_("Training both models, step for step…")):
            for point in scaling_race(config, train, tokenizer, corpus.text, every=steps // POINTS):
                points.append(point)
                figures = draw(points, places)
    except CorpusError as err:
        st.warning(md(error_text(err)))
        return
    st.session_state[RACE_SHOWN_KEY] = points
    said(points)
    html_button(figures, _("√d_k on a real model: the race"), "race")


def said(points: list) -> None:
    """The verdict in numbers, and, when the two losses agree, why they do and what would part them."""
    st.markdown(verdict(points))
    last = points[-1]
    gap = last.unscaled.loss - last.scaled.loss
    if abs(gap) < CLOSE * last.scaled.loss:
        st.info(_("**Why the two losses agree** (within {gap:.3f} nats): a model this small, after {steps} steps, has "
                  "learnt mostly which character tends to follow which, and for that it hardly needs attention, so a "
                  "saturated softmax costs it little loss yet. The scaling shows first in the attention itself: the "
                  "rows' entropy and the signal the softmax passes back. The losses part once the model leans on "
                  "attention: more layers and steps, a larger learning rate (try {lr:g} here), or a task whose answer "
                  "sits elsewhere in the line. On the Train page, train the Task preset on task-sort twice, once "
                  "with “Divide attention scores by √d_k” unticked, and compare the two runs below.",
                  gap=abs(gap), steps=last.step, lr=LRS[-1]))


def draw(points: list, places: list) -> list:
    """The three charts in their places; returns their figures."""
    figures = [race_figure(points, metric, tr=_) for metric in CHARTS]
    for place, metric, figure in zip(places, CHARTS, figures):
        place.plotly_chart(figure, key=f"race_{metric}:{len(points)}", config=chart_config())
    return figures


def verdict(points: list) -> str:
    """What happened, in numbers: the layer where scaling mattered most, at the last step."""
    last = points[-1]
    scaled, unscaled = last.scaled, last.unscaled
    layer = int((scaled.jacobian / unscaled.jacobian.clip(min=1e-12)).argmax())
    ratio = float(scaled.jacobian[layer] / max(unscaled.jacobian[layer], 1e-12))
    numbers = dict(steps=last.step, layer=layer + 1, max_u=float(unscaled.max_weight[layer]),
                   max_s=float(scaled.max_weight[layer]), h_u=float(unscaled.entropy[layer]),
                   h_s=float(scaled.entropy[layer]), loss_u=unscaled.loss, loss_s=scaled.loss)
    if ratio >= 1:
        return _("After {steps} steps without the scaling, layer {layer}'s rows had a mean max weight of {max_u:.2f} "
                 "(with it: {max_s:.2f}) and an entropy of {h_u:.2f} nats ({h_s:.2f}); its softmax passed {ratio:.1f}× "
                 "less of a change in the scores back. The loss on the validation batch: {loss_u:.3f} without, "
                 "{loss_s:.3f} with.", ratio=ratio, **numbers)
    return _("After {steps} steps without the scaling, layer {layer}'s rows had a mean max weight of {max_u:.2f} "
             "(with it: {max_s:.2f}) and an entropy of {h_u:.2f} nats ({h_s:.2f}); its softmax still passed "
             "{ratio:.1f}× more of a change in the scores back: at this size the scores have not grown large. The "
             "loss on the validation batch: {loss_u:.3f} without, {loss_s:.3f} with.", ratio=1 / ratio, **numbers)
