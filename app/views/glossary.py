"""The course's terms: each English term and a one-line meaning, both through the catalogs, so the
glossary page, the pages' sentences and a translator's .po file use one word for one idea.

A term's translation in a language is its entry in that language's catalog; the tests check that
every page written in that language uses that word.
"""
from __future__ import annotations

import pandas as pd

from minigpt import N_

from app.chrome.i18n import SOURCE, _, catalog, display_name, language, languages

# (English term, what it means), in the order the course meets them
TERMS = (
    (N_("character-level language model"), N_("A model that predicts the next character from the characters "
                                              "before it.")),
    (N_("vocabulary"), N_("The characters a model knows; V is how many there are.")),
    (N_("embedding"), N_("The vector that stands for a character, looked up in a table and multiplied by "
                         "√d_model.")),
    (N_("positional encoding"), N_("Sine and cosine waves added to each embedding so that the model knows where a "
                                   "character stands.")),
    (N_("attention"), N_("Each position takes a weighted average of the positions it may look at.")),
    (N_("query"), N_("Q: what a position is looking for.")),
    (N_("key"), N_("K: what a position offers to the queries.")),
    (N_("value"), N_("V: what a position passes on when it is attended to.")),
    (N_("attention score"), N_("q·k: how well a query matches a key, before softmax.")),
    (N_("attention weight"), N_("softmax of the scores: how much of each value a query takes; a row sums to 1.")),
    (N_("scaled dot-product attention"), N_("softmax(QKᵀ/√d_k)·V: the scores divided by √d_k so that their "
                                            "spread does not grow with the head size.")),
    (N_("causal mask"), N_("Hides the later positions, so that a character cannot see the text it must "
                           "predict.")),
    (N_("attention head"), N_("One attention with its own Q, K and V of d_k = d_model / num_heads numbers.")),
    (N_("multi-head self-attention"), N_("Several heads attend to the same text at once and their outputs are "
                                         "joined.")),
    (N_("feed-forward network"), N_("Two linear layers with GELU between them, applied to each position on its "
                                    "own.")),
    (N_("residual connection"), N_("Adds a block's input to its output, so that the signal and its gradient "
                                   "pass through deep stacks.")),
    (N_("layer normalization"), N_("Rescales each vector to mean 0 and variance 1; Pre-LN does it before "
                                   "attention and the feed-forward network.")),
    (N_("weight tying"), N_("The output layer reuses the embedding table, which saves parameters.")),
    (N_("logits"), N_("The model's raw scores for every character; softmax turns them into probabilities.")),
    (N_("softmax"), N_("Turns scores into probabilities: exponentiate, then divide by the sum.")),
    (N_("cross-entropy"), N_("The training loss: minus the log-probability the model gave the right next "
                             "character.")),
    (N_("nats"), N_("The unit of a loss measured with the natural logarithm ln.")),
    (N_("perplexity"), N_("exp(loss): the number of characters the model is as unsure between as a uniform "
                          "guess.")),
    (N_("entropy"), N_("How spread out a probability distribution is, in nats: 0 for one sure choice, ln n for "
                       "n equal ones.")),
    (N_("training loss"), N_("The loss on the batches the model learns from.")),
    (N_("validation loss"), N_("The loss on held-out text that training never sees.")),
    (N_("overfitting"), N_("The training loss keeps falling while the validation loss rises: the model "
                           "memorises instead of generalising.")),
    (N_("learning rate"), N_("How far each optimizer step moves the weights.")),
    (N_("warmup"), N_("The first steps, during which the learning rate grows from small to its peak.")),
    (N_("cosine decay"), N_("After warmup, the learning rate falls along a cosine curve.")),
    (N_("gradient clipping"), N_("Scales the gradients down when their norm exceeds a limit, so that one bad "
                                 "batch cannot throw the model off.")),
    (N_("optimizer"), N_("The rule that turns gradients into weight updates; here AdamW.")),
    (N_("batch size"), N_("How many windows of text one step learns from.")),
    (N_("dropout"), N_("Zeroes random activations during training, against overfitting.")),
    (N_("parameters"), N_("The numbers the model learns: its weights.")),
    (N_("checkpoint"), N_("A saved model: its configuration, vocabulary and weights.")),
    (N_("temperature"), N_("Divides the logits before softmax: low is safe and repetitive, high is varied and "
                           "wild.")),
    (N_("greedy decoding"), N_("Always taking the likeliest next character: temperature 0.")),
    (N_("top-k sampling"), N_("Drawing only among the k likeliest characters.")),
    (N_("top-p sampling"), N_("Drawing only among the likeliest characters whose probabilities add up to p.")),
    (N_("autoregressive"), N_("Generating one character at a time, each new one fed back as input.")),
    (N_("residual stream"), N_("The vector of each position that every block reads from and adds its output to.")),
    (N_("logit lens"), N_("Reading the prediction out of the residual stream after each layer, through the final "
                          "LayerNorm and the tied head.")),
    (N_("KV cache"), N_("Keeps the keys and values of earlier positions, so that each new character costs one "
                        "step, not a whole pass.")),
)


def term(english: str, lang: str) -> str:
    """The term in a language (its catalog's word; English is the term itself)."""
    return english if lang == SOURCE else catalog(lang).gettext(english)


def glossary_table() -> pd.DataFrame:
    """One row per term: the page's language first, then every other language, then the meaning."""
    here = language()
    order = [here, *(code for code in languages() if code != here)]
    rows = [{display_name(code): term(english, code) for code in order} | {_("Meaning"): _(meaning)}
            for english, meaning in TERMS]
    return pd.DataFrame(rows)
