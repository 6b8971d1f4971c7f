"""The sampling settings' widgets, written once for Generate and the lesson: the temperature, top-k
and top-p, made into the one record the library draws with (`minigpt.Sampling`). A new setting
is a field of that record and a widget here; every page that draws them follows."""
from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from minigpt import Sampling, SamplingError

from app.chrome.fields import REMEMBERED
from app.chrome.i18n import _, error_text
from app.chrome.text import md

COLUMNS = 3  # the widgets `sliders` draws, one in each of the first COLUMNS columns it is given


def sliders(columns: Sequence, vocab_size: int, *, prefix: str = "", remember: bool = False) -> Sampling | None:
    """Draw the settings' widgets in the first COLUMNS of `columns`, keyed `prefix` + the setting's
    name, and return them as one Sampling; None when one is out of its range, with the reason in an
    error under the widgets. vocab_size: the characters the model knows (top-k's help says it).
    remember: the values are kept across pages and reloads."""
    kept = REMEMBERED if remember else {}
    temperature = columns[0].slider(_("Temperature"), 0.0, 2.0, value=0.8, step=0.05, key=prefix + "temperature",
                                    **kept, help=_("The scores are divided by the temperature before softmax: below "
                                                   "1 the likeliest characters win more often, above 1 the choice "
                                                   "spreads out. 0 = greedy: always the likeliest character."))
    top_k = columns[1].number_input(_("Top-k (0 = off)"), value=0, step=1, key=prefix + "top_k", **kept,
                                    help=_("Draw only among the k likeliest characters. At or above the {vocab} "
                                           "this model knows, every character stays in.", vocab=vocab_size))
    top_p = columns[2].slider(_("Top-p"), 0.05, 1.0, value=1.0, step=0.05, key=prefix + "top_p", **kept,
                              help=_("Draw only among the likeliest characters whose probabilities add up to p (1 = "
                                     "off)."))
    try:
        return Sampling(temperature=temperature, top_k=int(top_k), top_p=top_p)
    except SamplingError as err:  # a negative top-k: the boxes above take any whole number
        st.error(md(error_text(err)))
        return None
