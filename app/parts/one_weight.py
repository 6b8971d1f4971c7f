"""How one attention weight is made, on the loaded model: a layer, a head and a query character
picked, then q · k, ÷ √d_k, the mask and softmax, and the values mixed, drawn as one figure.
Inside attention shows it, and so does the lesson's step on queries, keys and values."""
from __future__ import annotations

import streamlit as st

from minigpt.viz import position_labels, weight_figure

from app.chrome.charts import config as chart_config
from app.chrome.charts import shared_figure
from app.chrome.fields import REMEMBERED
from app.chrome.i18n import _
from app.state import shared_results
from app.state.loaded_model import LoadedModel


def weight_view(loaded: LoadedModel, text: str, unscaled: bool, prefix: str = "inside") -> None:
    """The pickers and the figure; `prefix` keeps each page's picks apart."""
    config = loaded.model.config
    labels = position_labels(text)
    layer_col, head_col = st.columns(2)
    # numbers, not "layer 2": a selectbox keeps showing its chosen option's old words after a language switch
    layer = layer_col.selectbox(_("Layer"), range(config.num_layers), format_func=lambda i: str(i + 1),
                                key=f"{prefix}_layer:{config.num_layers}", **REMEMBERED)
    head = head_col.selectbox(_("Head"), range(config.num_heads), format_func=lambda h: str(h + 1),
                              key=f"{prefix}_head:{config.num_heads}", **REMEMBERED)
    query = st.select_slider(_("Query character"), range(len(text)), value=len(text) - 1,
                             format_func=labels.__getitem__, key=f"{prefix}_query:{len(text)}")
    row = shared_results.attention_row(loaded, text, layer, head, query, unscaled)
    top = int(row.weights.argmax())
    st.latex(rf"\begin{{gathered}} q \cdot k_{{{top}}} = {row.scores[top]:.3f} \\ "  # one step a line: fits a phone
             rf"\frac{{q \cdot k_{{{top}}}}}{{{row.divisor:.2f}}} = {row.scaled[top]:.3f} \\ "
             rf"\mathrm{{softmax}} \rightarrow {row.weights[top]:.3f} \end{{gathered}}")
    st.caption(_("The key that gets the most weight, {key}: its score, the score divided by {divisor:.2f}, and its "
                 "weight. √d_k = √{d_k} = {root:.2f}; without the scaling the divisor is 1.",
                 key=labels[top], divisor=row.divisor, d_k=config.d_k, root=config.d_k ** 0.5))
    # one chart for the three steps: Streamlit draws a changed chart from scratch, a visible wait each in the browser
    st.plotly_chart(shared_figure(weight_figure, row, text), key=f"{prefix}_weight", config=chart_config())
    st.caption(_("These weights are row {query} of this head's heatmap on the Attention page; the output joins the "
                 "other heads' and goes through W_O.", query=labels[query]))

