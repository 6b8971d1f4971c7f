"""Inside the model: the position encodings, the character embeddings and the tied head, and
the prediction read out after every layer (the logit lens)."""
import streamlit as st

from app import charts, lesson_links, models, navigation, prompts
from app.i18n import _
from minigpt import (embedding_pca, embeddings_figure, logit_lens, logit_lens_figure, position_similarity,
                     positions_figure, similarity_figure)

navigation.setup_page(__file__)

st.title(_("Inside the model"))
lesson_links.link(3, 8, 9)
st.markdown(_("Attention is one part of the model. Here are the others, on your model: the positional encoding "
              "that tells it where each character stands, the embeddings that turn characters into vectors and, "
              "through weight tying, vectors back into scores, and the prediction as it forms layer by layer."))

lm = models.require_model()
config = lm.model.config
st.caption(lm.summary())

st.subheader(_("Positional encoding"))
pe = lm.model.pos_encoding[: lm.block_size].cpu().numpy()
pe_col, sim_col = st.columns(2)
with pe_col:
    st.plotly_chart(positions_figure(pe, tr=_), key="model_pe", config=charts.config())
with sim_col:
    st.plotly_chart(similarity_figure(position_similarity(pe), tr=_), key="model_pe_similarity",
                    config=charts.config())
st.caption(_("Left: PE[pos, 2i] = sin(pos / 10000^(2i/d_model)) and PE[pos, 2i+1] = cos(…), for the {block} positions "
             "the model was trained on. Right: how alike two positions' vectors are. Each entry depends only on the "
             "distance between the positions, and nearby positions look alike, so the model can tell near from "
             "far.", block=lm.block_size))

st.subheader(_("Embeddings and the tied head"))
coords, share = embedding_pca(lm.model.token_embed.weight.detach().cpu().numpy())
st.plotly_chart(embeddings_figure(coords, lm.tokenizer.chars, share, tr=_), key="model_embeddings",
                config=charts.config())
st.caption(_("Every one of the {vocab} characters' embedding vectors (d_model = {d_model} numbers) drawn on the two "
             "directions along which they differ most (principal components). With weight tying the same table E "
             "works both ways: a character's row of E is its vector on the way in, and on the way out the logits "
             "are h · Eᵀ, the final vector's dot product with every character's row.", vocab=lm.tokenizer.vocab_size,
             d_model=config.d_model))

st.subheader(_("The prediction, layer by layer (logit lens)"))
text, text_key = prompts.attention_text(lm)
text = prompts.readable(text, lm, text_key)
if text:
    lens = logit_lens(lm.model, lm.tokenizer.encode(text))
    st.plotly_chart(logit_lens_figure(lens, text, lm.tokenizer.chars, tr=_), key="model_lens",
                    config=charts.config())
    st.caption(_("Each cell is the likeliest next character after that position, read out of the residual stream "
                 "after the embedding and after each layer through the final LayerNorm and the tied head; its colour "
                 "is that character's probability. The last row is the model's own prediction."))
