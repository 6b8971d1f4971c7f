"""Attention: interactive heatmaps of the loaded model's attention, and a time-lapse of a run's."""
import math

import streamlit as st

from minigpt import N_
from minigpt.lab.diagnosis import top_key_changes
from minigpt.lab.run_records import attention_npz
from minigpt.viz import attention_panels

from app import navigation
from app.chrome import site
from app.chrome.fields import REMEMBERED
from app.chrome.i18n import _
from app.parts import heatmaps, prompts
from app.state import runs, shared_results
from app.state.loaded_model import LoadedModel
from app.views import timelapse

loaded = navigation.open_model_page(site.ATTENTION, N_(
    "Each heatmap row is a character of your text asking *where should I look?* (the query); each column is an "
    "earlier character it can look at (the key). A row's weights add up to 1, and the grey upper triangle is the "
    "future, hidden by the causal mask so that the model cannot peek. The first row is always 1.0: the first "
    "character has nothing before it, so all its attention goes to itself. Hover a cell to read the pair and its "
    "weight."), lesson_steps=(6, 7))

config = loaded.model.config
st.caption(_("This model has positions for max_len = {max_len} characters, but it was trained on windows of "
             "block_size = {block}: positions after {block} were never trained, so this page (and Generate) keep to "
             "the first {block} characters.", max_len=config.max_len, block=loaded.block_size))

text, text_key = prompts.attention_text(loaded)
VIEWS = {"layers": N_("Each layer (mean of its heads)"), "heads": N_("One layer's heads"),
         "grid": N_("Every layer × head")}


@st.fragment  # the view, a layer, the scaling and a page of positions redraw these, not the page around them
def heatmaps_part(loaded: LoadedModel, text: str, text_key: str) -> None:
    if st.session_state.get(text_key) != text:  # the text box above changed (the button that fits it, below)
        st.rerun(scope="app")
    config = loaded.model.config
    view_col, layer_col, scale_col = st.columns([3, 1, 1.4])
    view = view_col.radio(_("View"), list(VIEWS), format_func={v: _(label) for v, label in VIEWS.items()}.get,
                          horizontal=True,
                          key="attention_view", **REMEMBERED)
    # numbers, not "layer 2": a selectbox keeps showing its chosen option's old words after a language switch
    layer = layer_col.selectbox(_("Layer"), range(config.num_layers), format_func=lambda i: str(i + 1),
                                index=config.num_layers - 1, key=f"attention_layer:{config.num_layers}",
                                disabled=view != "heads", **REMEMBERED)
    unscaled = scale_col.checkbox(_("Without 1/√d_k scaling"), key="attention_unscaled", **REMEMBERED,
                                  help=_("Recompute the same model's attention with the scores left undivided."))

    text = prompts.readable(text, loaded, text_key)
    if text:
        attention = shared_results.attention_maps(loaded, text, scaled=False if unscaled else None)
        span = heatmaps.pick_page(len(text), key=f"attention_page:{len(text)}")
        line = heatmaps.task_line(text)
        heatmaps.draw_panels(attention_panels(attention, view=view, layer=layer, tr=_), text, span,
                             key="attention", expected=line.mask if line else None)
        if line is not None:
            heatmaps.right_key_note(line, line.scores(attention))
        st.download_button(_("Download these attention weights (.npz)"), key="download_attention",
                           on_click="ignore",
                           data=lambda: attention_npz(attention, text, scaled=not unscaled and config.scale_attention),
                           file_name="attention.npz", mime="application/octet-stream",
                           help=_("Every layer and head, shaped (layers, heads, T, T), with the text's characters: "
                                  "numpy.load reads it."))
        if unscaled and config.scale_attention:
            scaled = shared_results.attention_maps(loaded, text)
            moved = _("; ").join(_("layer {layer}: {moved} of {rows}", layer=i + 1, moved=n, rows=rows)
                                 for i, (n, rows) in enumerate(top_key_changes(scaled, attention)))
            st.caption(_("Every score is now √d_k = {root:.1f} times larger than the model was trained with, so each "
                         "softmax is more peaked. In layer 1 that cannot change which key a row ranks first, but the "
                         "later layers receive different inputs, so there it can. Rows (over all heads) whose "
                         "most-attended key changed: {moved}. See the √d_k page for why the scaling matters.",
                         root=math.sqrt(config.d_k), moved=moved))
        elif unscaled:
            st.caption(_("This model was trained without the scaling, so this is its own attention."))

    entry, _owner = runs.session_run()
    timelapse.timelapse_section(entry, view, layer)


heatmaps_part(loaded, text, text_key)
