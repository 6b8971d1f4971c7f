"""pages/Model.py: positions, the embeddings and the tied head, and the logit lens, on the loaded model.

    pytest tests/app/test_model_page.py
"""
import json

import numpy as np

from helpers.apptest import home, page
from helpers.figures import plotly_array
from minigpt import DEFAULT_CORPUS, load_pretrained
from app.chrome.site import MODEL


def embeddings_spec(at) -> dict:
    return json.loads(next(c.proto.spec for c in at.get("plotly_chart") if c.proto.id.endswith("model_embeddings")))


def test_the_embedding_scatter_names_the_texts_characters_and_a_chosen_ones_nearest():
    """Issue: all 689 characters were labelled, one solid cloud. Now: a dot each, labels only on the
    learner's text and on a character the learner picks, with its five nearest by cosine (by hand)."""
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    table = checkpoint.model.token_embed.weight.detach().double().numpy()
    at = page(home(), MODEL.script)
    text = set(at.text_input[0].value)
    spec = embeddings_spec(at)
    assert len(plotly_array(spec["data"][0]["x"])) == checkpoint.tokenizer.vocab_size  # a dot each
    assert "text" not in spec["data"][0]["mode"]  # unlabelled
    picked = checkpoint.tokenizer.stoi["力"]
    at.selectbox(key=next(s.key for s in at.selectbox if s.key.startswith("embedding_pick"))).set_value(picked).run()
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    cosine = unit @ unit[picked]
    cosine[picked] = -2
    nearest = [checkpoint.tokenizer.chars[i] for i in np.argsort(-cosine)[:5]]
    named = embeddings_spec(at)["data"][1]["text"]
    assert set(named) == text | {"力"} | set(nearest) and len(named) < 40
    assert any(" ".join(nearest) in c.value for c in at.caption)
