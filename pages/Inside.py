"""Inside attention: how one attention weight is made, step by step, and what each head does."""
import streamlit as st

from minigpt import N_
from minigpt.lab.heads import PATTERNS, head_table
from minigpt.viz import attention_heatmap

from app import navigation
from app.chrome import charts, site
from app.chrome.fields import REMEMBERED
from app.chrome.i18n import _
from app.parts import heatmaps, one_weight, prompts
from app.state import shared_results

loaded = navigation.open_model_page(site.INSIDE, N_(
    "The heatmaps show the result of attention; this page shows how it comes about, with your model's own numbers. "
    "Pick a layer, a head and a query character: its query vector q meets every key vector k in a dot product, the "
    "scores are divided by √d_k, the causal mask hides the later keys, softmax turns what is left into the "
    "attention weights, and the head's output is the weighted sum of the value vectors v."), lesson_steps=(4,))

config = loaded.model.config
text, text_key = prompts.attention_text(loaded)
text = prompts.readable(text, loaded, text_key)
if not text:
    st.stop()
if len(text) < 2:
    st.info(_("Type at least two characters: with one, its only key is itself."))
    st.stop()

unscaled = st.checkbox(_("Without 1/√d_k scaling"), key="inside_unscaled", **REMEMBERED,
                       help=_("Recompute the same model without dividing the scores: watch this row's softmax "
                              "saturate, as on the √d_k page."))


@st.fragment  # picking a layer, a head or a query redraws only this part, not the head table below
def one_weight_part() -> None:
    one_weight.weight_view(loaded, text, unscaled)


one_weight_part()

st.subheader(_("What each head does"))
st.markdown(_("Averaged over the queries after the first: the entropy of a row (in nats; low = sharp), its largest "
              "weight, and how much weight lands on the previous character, on the query itself and on the first "
              "character. A head whose weight clearly lands in one place is named for it."))
attention = shared_results.attention_maps(loaded, text, scaled=False if unscaled else None)
table = head_table(attention)
pattern_names = {key: _(name) for key, name in PATTERNS.items()}
table["pattern"] = [pattern_names.get(p, "–") for p in table["pattern"]]
number = {"format": "%.3f"}
charts.swipe_hint("inside_heads")
st.dataframe(table, hide_index=True, key="inside_heads", column_config={
    "layer": st.column_config.NumberColumn(_("layer"), pinned=True),
    "head": st.column_config.NumberColumn(_("head"), pinned=True),
    "entropy": st.column_config.NumberColumn(_("mean entropy"), **number),
    "max_weight": st.column_config.NumberColumn(_("mean max weight"), **number),
    "previous": st.column_config.NumberColumn(_("on the previous character"), **number),
    "same": st.column_config.NumberColumn(_("on itself"), **number),
    "first": st.column_config.NumberColumn(_("on the first character"), **number),
    "pattern": st.column_config.TextColumn(_("pattern")),
})
cells = [(l, h) for l in range(config.num_layers) for h in range(config.num_heads)]
chosen = st.selectbox(_("Expand a head to its full heatmap (layer · head)"), range(len(cells)),
                      format_func=lambda i: f"{cells[i][0] + 1} · {cells[i][1] + 1}", key=f"inside_expand:{len(cells)}")
span = heatmaps.pick_page(len(text), key=f"inside_page:{len(text)}")
l, h = cells[chosen]
title = _("layer {layer} · head {head}", layer=l + 1, head=h + 1)
st.plotly_chart(attention_heatmap(attention[l, h], text, title, *span, tr=_), key="inside_heatmap",
                config=charts.config())
