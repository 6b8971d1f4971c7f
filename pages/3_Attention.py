"""Attention: interactive heatmaps of the loaded model's attention, and a time-lapse of a run's."""
import math

import streamlit as st

from app import heatmaps, models, navigation, runs
from app.text import md
from minigpt import attention_panels, top_key_changes

navigation.setup_page(__file__)

st.title("Attention")
st.markdown(
    "Each heatmap row is a character of your text asking *where should I look?* (the query); each column is "
    "an earlier character it can look at (the key). A row's weights add up to 1, and the grey upper triangle "
    "is the future, masked so that the model cannot peek. The first row is always 1.0: the first character "
    "has nothing before it, so all its attention goes to itself. Hover a cell to read the pair and its weight."
)

lm = models.require_model()
config = lm.model.config
st.caption(lm.summary())
st.caption(f"This model has positions for max_len = {config.max_len} characters, but it was trained on windows "
           f"of block_size = {lm.block_size}: positions after {lm.block_size} were never trained, so this page "
           f"(and Generate) keep to the first {lm.block_size} characters.")

text = st.text_input("Text", value=lm.sample_text, key=f"attention_text:{lm.vocab_id}", persist_state="session")
VIEWS = {"layers": "Each layer (mean of its heads)", "heads": "One layer's heads", "grid": "Every layer × head"}
view_col, layer_col, scale_col = st.columns([3, 1, 1.4])
view = view_col.radio("View", list(VIEWS), format_func=VIEWS.get, horizontal=True, key="attention_view",
                      persist_state="session")
layer = layer_col.selectbox("Layer", range(config.num_layers), format_func=lambda i: f"layer {i + 1}",
                            index=config.num_layers - 1, key=f"attention_layer:{config.num_layers}",
                            disabled=view != "heads", persist_state="session")
unscaled = scale_col.checkbox("Without 1/√d_k scaling", key="attention_unscaled", persist_state="session",
                              help="Recompute the same model's attention with the scores left undivided.")

unknown = lm.tokenizer.unknown_chars(text)
if not text:
    st.info("Type some text to see where the model looks.")
elif unknown:
    st.warning("This model has never seen these characters, so it cannot read the text: "
               + ", ".join(repr(c) for c in unknown) + ". Remove them to see the attention.")
else:
    if len(text) > lm.block_size:
        st.warning(f"The model was trained on {lm.block_size} positions: showing the first {lm.block_size} of "
                   f"your {len(text)} characters.")
        text = text[: lm.block_size]
    attention = models.attention_maps(lm.model, lm.tokenizer, text, scaled=False if unscaled else None)
    span = heatmaps.pick_page(len(text), key=f"attention_page:{len(text)}")
    heatmaps.draw_panels(attention_panels(attention, view=view, layer=layer), text, span, key="attention")
    if unscaled and config.scale_attention:
        scaled = models.attention_maps(lm.model, lm.tokenizer, text)
        moved = "; ".join(f"layer {i + 1}: {n} of {rows}" for i, (n, rows) in enumerate(top_key_changes(scaled,
                                                                                                        attention)))
        st.caption(f"Every score is now √d_k = {math.sqrt(config.d_k):.1f} times larger than the model was trained "
                   f"with, so each softmax is more peaked. In layer 1 that cannot change which key a row ranks "
                   f"first, but the later layers receive different inputs, so there it can. Rows (over all heads) "
                   f"whose most-attended key changed: {moved}. See the √d_k page for why the scaling matters.")
    elif unscaled:
        st.caption("This model was trained without the scaling, so this is its own attention.")

st.subheader("Time-lapse: how attention formed during training")
entry, _ = runs.session_run()
evals = [r for r in entry.run.snapshot().evals if r.attention is not None] if entry is not None else []
if not evals:
    st.info("Start a run on the Train page. At each evaluation it keeps the attention on a probe text and a "
            "sample of its writing; replay them here, step by step, to watch heads go from uniform to sharp "
            "and the text from noise to the corpus' style.")
else:
    st.markdown(f"Run `{entry.run_id}` on “{md(entry.probe_text)}”, at each of its {len(evals)} evaluations so far.")
    steps = [r.step for r in evals]
    chosen = (st.select_slider("Evaluation step", steps, value=steps[-1], key="timelapse_step")
              if len(steps) > 1 else steps[0])
    record = evals[steps.index(chosen)]
    st.markdown(f"**Step {record.step:,}** · val loss {record.val_loss:.3f}")
    probe = entry.probe_text[: record.attention.shape[-1]]
    span = heatmaps.pick_page(len(probe), key=f"timelapse_page:{len(probe)}")
    panels = attention_panels(record.attention, view=view, layer=min(layer, record.attention.shape[0] - 1))
    heatmaps.draw_panels(panels, probe, span, key="timelapse")
    st.markdown(f"**Sample at step {record.step:,}**")
    st.code(record.sample, language=None, wrap_lines=True)
