"""The Experiments page's knock-outs: a copy of the loaded model with parts taken out (heads,
the positions, context, the tied head), its loss, sample and attention beside the whole model's,
and the importance of every head."""
from __future__ import annotations

import streamlit as st

from minigpt import SamplingError, Windows
from minigpt.lab.knockout import Knockout, KnockoutError
from minigpt.viz import attention_panels, importance_figure

from app.chrome import charts
from app.chrome.i18n import _, error_text, number
from app.parts import heatmaps, prompts
from app.state import loaded_model, shared_results
from app.state.loaded_model import LoadedModel

IMPORTANCE_KEY = "head_importance_shown"  # session_state: the last importance grid, with the model it is of


def choose(loaded: LoadedModel) -> Knockout:
    """The knock-out the learner chose: heads, the positions, the tied head, a shorter context."""
    config = loaded.model.config
    cells = [(layer, head) for layer in range(config.num_layers) for head in range(config.num_heads)]
    heads = st.multiselect(_("Zero these heads (layer · head)"), cells,
                           format_func=lambda c: f"{c[0] + 1} · {c[1] + 1}",
                           key=f"knockout_heads:{config.num_layers}x{config.num_heads}", placeholder=_("Choose heads"),
                           help=_("A zeroed head still computes its attention, but adds nothing to what the layer "
                                  "passes on: its columns of W_O are set to 0."))
    left, right = st.columns(2)
    positions = left.checkbox(_("Remove the positional encoding"), key="knockout_positions",
                              help=_("Without it, nothing tells the model where a character stands: only which "
                                     "characters came before."))
    shuffled = right.checkbox(_("Untie the LM head and shuffle its rows"), key="knockout_shuffled",
                              help=_("The head becomes a copy of the embedding in a random order: the model still "
                                     "reads characters the same way, but scores each one with another's vector."))
    window = st.slider(_("Each character sees only its last n characters, itself included"), 1, loaded.block_size,
                       loaded.block_size, key=f"knockout_window:{loaded.block_size}",
                       help=_("At {block}, the context the model was trained on, nothing is cut.",
                              block=loaded.block_size))
    return Knockout(heads=frozenset(heads), positions=positions,
                    window=window if window < loaded.block_size else None, shuffled_head=shuffled)


def knockout_section(loaded: LoadedModel, windows: Windows | None) -> None:
    """The knocked-out copy beside the whole model: loss, sample, and where the copy looks."""
    st.subheader(_("Knock-outs"))
    knockout = choose(loaded)
    try:
        knockout.check(loaded.model.config)
    except KnockoutError as err:
        st.error(error_text(err))
        return
    if knockout.empty:
        st.info(_("Nothing is knocked out yet: choose heads, the positions, a shorter window or the shuffled head "
                  "above, and the loss, the sample and the attention of the knocked-out copy appear beside the whole "
                  "model's."))
    if windows is None:
        st.info(_("This model's corpus is not known here, so there is no validation text to measure its loss on; "
                  "the samples and the attention below still show what the knock-out changed."))
    # the same for every learner who asks: the seed is fixed, and the windows are the model's own
    prompt = loaded_model.first_prompt(loaded)
    whole = shared_results.measured(loaded, Knockout(), prompt, windows)
    knocked = None if knockout.empty else shared_results.measured(loaded, knockout, prompt, windows)
    if windows is not None:
        base = whole[0]
        whole_col, knocked_col = st.columns(2)
        whole_col.metric(_("Val loss, whole model"), number(base, ".3f"),
                         help=loaded_model.windows_said(loaded, windows))
        if knocked is not None:
            after = knocked[0]
            knocked_col.metric(_("Val loss, knocked out"), number(after, ".3f"), delta=f"{after - base:+.3f}",
                               delta_color="inverse")
    st.markdown(_("**The same prompt and seed** (temperature {temperature:g}), before and after:",
                  temperature=shared_results.SAMPLE_TEMPERATURE))
    shown = [(whole[1], _("Whole model"))] + ([] if knocked is None else [(knocked[1], _("Knocked out"))])
    for col, (sample, label) in zip(st.columns(2), shown):
        col.caption(label)
        if isinstance(sample, SamplingError):
            col.warning(error_text(sample))
        else:
            col.code(sample, language=None, wrap_lines=True)
    st.markdown(_("**Where the knocked-out model looks** (each layer's mean over its heads):"))
    text, text_key = prompts.attention_text(loaded)
    text = prompts.readable(text, loaded, text_key)
    if text:
        span = heatmaps.pick_page(len(text), key=f"knockout_page:{len(text)}")
        attention = shared_results.attention_maps(loaded, text, knockout=knockout)
        heatmaps.draw_panels(attention_panels(attention, view="layers", tr=_), text, span, key="knockout_attention")


def importance_section(loaded: LoadedModel, windows: Windows | None) -> None:
    """Each head zeroed alone, in turn: how much the validation loss rises."""
    cells = loaded.model.config.num_layers * loaded.model.config.num_heads
    identity = loaded.identity
    st.subheader(_("The importance of every head"))
    st.markdown(_("Zero each head alone, in turn, and measure how much the validation loss rises: the heads the model "
                  "leans on stand out."))
    if windows is not None and st.button(_("Measure every head"), key="measure_heads"):
        with st.spinner(_("Zeroing each of the {count} heads in turn…", count=cells)):
            st.session_state[IMPORTANCE_KEY] = (identity, shared_results.importance(loaded, windows))
    shown = st.session_state.get(IMPORTANCE_KEY)
    if shown is not None and shown[0] == identity:
        rise = shown[1]
        figure = importance_figure(rise, tr=_)
        st.plotly_chart(figure, key="head_importance", config=charts.config())
        charts.html_button([figure], _("The importance of every head"), "importance")
        layer, head = divmod(int(rise.argmax()), rise.shape[1])
        st.caption(_("Zeroing layer {layer}'s head {head} costs the most: the loss rises by {rise:.3f} nats.",
                     layer=layer + 1, head=head + 1, rise=float(rise.max())))
