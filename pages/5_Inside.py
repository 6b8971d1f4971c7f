"""Inside attention: how one attention weight is made, step by step, and what each head does."""
import streamlit as st

from app import charts, heatmaps, models, navigation, prompts
from app.i18n import _
from minigpt import PATTERNS, attention_heatmap, attention_row, head_table, position_labels, weight_figure

navigation.setup_page(__file__)

st.title(_("Inside attention"))
st.markdown(_(
    "The heatmaps show the result of attention; this page shows how it comes about, with your model's own numbers. "
    "Pick a layer, a head and a query character: its query vector q meets every key vector k in a dot product, the "
    "scores are divided by √d_k, the causal mask hides the later keys, softmax turns what is left into the "
    "attention weights, and the head's output is the weighted sum of the value vectors v."))

lm = models.require_model()
config = lm.model.config
st.caption(lm.summary())
text, text_key = prompts.attention_text(lm)
text = prompts.readable(text, lm, text_key)
if not text:
    st.stop()
if len(text) < 2:
    st.info(_("Type at least two characters: with one, its only key is itself."))
    st.stop()

unscaled = st.checkbox(_("Without 1/√d_k scaling"), key="inside_unscaled", persist_state="session",
                       help=_("Recompute the same model without dividing the scores: watch this row's softmax "
                              "saturate, as on the √d_k page."))
labels = position_labels(text)


@st.fragment  # picking a layer, a head or a query redraws only this part, not the head table below
def one_weight() -> None:
    layer_col, head_col = st.columns(2)
    # numbers, not "layer 2": a selectbox keeps showing its chosen option's old words after a language switch
    layer = layer_col.selectbox(_("Layer"), range(config.num_layers), format_func=lambda i: str(i + 1),
                                key=f"inside_layer:{config.num_layers}", persist_state="session")
    head = head_col.selectbox(_("Head"), range(config.num_heads), format_func=lambda h: str(h + 1),
                              key=f"inside_head:{config.num_heads}", persist_state="session")
    query = st.select_slider(_("Query character"), range(len(text)), value=len(text) - 1,
                             format_func=labels.__getitem__, key=f"inside_query:{len(text)}")
    row = attention_row(lm.model, lm.tokenizer.encode(text), layer, head, query,
                        scale_attention=False if unscaled else None)
    top = int(row.weights.argmax())
    st.latex(rf"\begin{{gathered}} q \cdot k_{{{top}}} = {row.scores[top]:.3f} \\ "  # one step a line: fits a phone
             rf"\frac{{q \cdot k_{{{top}}}}}{{{row.divisor:.2f}}} = {row.scaled[top]:.3f} \\ "
             rf"\mathrm{{softmax}} \rightarrow {row.weights[top]:.3f} \end{{gathered}}")
    st.caption(_("The key that gets the most weight, {key}: its score, the score divided by {divisor:.2f}, and its "
                 "weight. √d_k = √{d_k} = {root:.2f}; without the scaling the divisor is 1.",
                 key=labels[top], divisor=row.divisor, d_k=config.d_k, root=config.d_k ** 0.5))
    # one chart for the three steps: Streamlit draws a changed chart from scratch, ~0.1 s each in the browser
    st.plotly_chart(weight_figure(row, text, tr=_), key="inside_weight", config=charts.config())
    st.caption(_("These weights are row {query} of this head's heatmap on the Attention page; the output joins the "
                 "other heads' and goes through W_O.", query=labels[query]))


one_weight()

st.subheader(_("What each head does"))
st.markdown(_("Averaged over the queries after the first: the entropy of a row (in nats; low = sharp), its largest "
              "weight, and how much weight lands on the previous character, on the query itself and on the first "
              "character. A head whose weight clearly lands in one place is named for it."))
attention = models.attention_maps(lm.model, lm.tokenizer, text, scaled=False if unscaled else None)
table = head_table(attention)
pattern_names = {key: _(name) for key, name in PATTERNS.items()}
table["pattern"] = [pattern_names.get(p, "–") for p in table["pattern"]]
number = {"format": "%.3f"}
st.dataframe(table, hide_index=True, key="inside_heads", column_config={
    "layer": st.column_config.NumberColumn(_("layer")), "head": st.column_config.NumberColumn(_("head")),
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
