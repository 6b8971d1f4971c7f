"""Inside the model: the position encodings, the character embeddings and the tied head, and
the prediction read out after every layer (the logit lens)."""
import streamlit as st

from minigpt import N_
from minigpt.lab.embeddings import nearest_rows
from minigpt.viz import embeddings_figure, positions_figure, similarity_figure

from app import navigation
from app.chrome import charts, site
from app.chrome.i18n import _
from app.chrome.text import md, shown_char
from app.parts import lens, prompts
from app.state import shared_results

NEIGHBOURS = 5  # the nearest characters labelled beside the chosen one

loaded = navigation.open_model_page(site.MODEL, N_(
    "Attention is one part of the model. Here are the others, on your model: the positional encoding that tells it "
    "where each character stands, the embeddings that turn characters into vectors and, through weight tying, "
    "vectors back into scores, and the prediction as it forms layer by layer."), lesson_steps=(3, 8, 9))

config = loaded.model.config

st.subheader(_("Positional encoding"))
pe, similarity = shared_results.positions(loaded)
pe_col, sim_col = st.columns(2)
with pe_col:
    st.plotly_chart(charts.shared_figure(positions_figure, pe), key="model_pe", config=charts.config())
with sim_col:
    st.plotly_chart(charts.shared_figure(similarity_figure, similarity), key="model_pe_similarity",
                    config=charts.config())
st.caption(_("Left: PE[pos, 2i] = sin(pos / 10000^(2i/d_model)) and PE[pos, 2i+1] = cos(…), for the {block} positions "
             "the model was trained on. Right: how alike two positions' vectors are. Each entry depends only on the "
             "distance between the positions, and nearby positions look alike, so the model can tell near from "
             "far.", block=loaded.block_size))

st.subheader(_("Embeddings and the tied head"))
table, coords, share = shared_results.embedding_map(loaded)
chars = loaded.tokenizer.chars
own = st.session_state.get(prompts.text_key(loaded), loaded.sample_text)  # the Text box below, shared with Attention
in_text = list(dict.fromkeys(loaded.tokenizer.stoi[c] for c in own if c in loaded.tokenizer.stoi))  # in reading order
chosen = st.selectbox(_("Find a character, and the characters whose vectors are nearest to it"), range(len(chars)),
                      index=in_text[0] if in_text else 0, format_func=lambda i: shown_char(chars[i]),
                      key=f"embedding_pick:{loaded.vocab_id}", help=_("Type to search the vocabulary."))
near = nearest_rows(table, chosen, NEIGHBOURS)
st.plotly_chart(charts.shared_figure(embeddings_figure, coords, chars, share, labelled=in_text, chosen=chosen,
                                     neighbours=near),
                key="model_embeddings", config=charts.config())
st.caption(_("Every one of the {vocab} characters' embedding vectors (d_model = {d_model} numbers) is a dot, drawn on "
             "the two directions along which they differ most (principal components); hover to name one. Labelled: "
             "the characters of your text (the Text box below), and in red {char} with, in orange, the {k} whose "
             "vectors point most the same way in all {d_model} numbers: {near}. With weight tying the same table E "
             "works both ways: a character's row of E is its vector on the way in, and on the way out the logits are "
             "h · Eᵀ, the final vector's dot product with every character's row.", vocab=loaded.tokenizer.vocab_size,
             d_model=config.d_model, char=md(shown_char(chars[chosen])), k=len(near),
             near=md(" ".join(shown_char(chars[i]) for i in near))))

st.subheader(_("The prediction, layer by layer (logit lens)"))
text, text_key = prompts.attention_text(loaded)
text = prompts.readable(text, loaded, text_key)
if text:
    lens.logit_lens_view(loaded, text, key="model_lens")
