"""Text a learner types for a model (the prompt, the attention text): the characters the model
does not know, highlighted where they are, and a button that removes them in one click; the
attention text that Attention and Inside attention share."""
from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from minigpt import CharTokenizer

from app.chrome.fields import REMEMBERED
from app.chrome.i18n import _, n_
from app.chrome.text import md

if TYPE_CHECKING:
    from app.state.loaded_model import LoadedModel


def highlighted(text: str, unknown: set[str]) -> str:
    """Markdown of `text` with every unknown character on a red background (a space as ␣)."""
    out = []
    for c in text:
        if c in unknown:
            shown = "␣" if c == " " else "⏎" if c == "\n" else md(c)
            out.append(f":red-background[**{shown}**]")
        else:
            out.append(md(c))
    return "".join(out)


def known_or_explain(text: str, tokenizer: CharTokenizer, key: str, where=st) -> bool:
    """True when the model knows every character of `text`; else say which ones it does not, in
    place, and offer to remove them from the widget under `key`."""
    unknown = tokenizer.unknown_chars(text)
    if not unknown:
        return True
    box = where.container()
    box.warning(n_("This model has never seen this character, so it cannot read the text: {chars}. It is "
                   "marked in red below.",
                   "This model has never seen these {n} characters, so it cannot read the text: {chars}. They are "
                   "marked in red below.", len(unknown), chars=md(", ".join(repr(c) for c in unknown))))
    box.markdown(highlighted(text, set(unknown)))
    box.button(_("Remove the characters this model does not know"), key=f"fit:{key}", on_click=_fit,
               args=(key, tokenizer), help=_("Punctuation the model knows in the other width (？ for ?, ， for ,) is swapped in instead "
                      "of removed."))
    return False


def _fit(key: str, tokenizer: CharTokenizer) -> None:
    st.session_state[key] = tokenizer.fit(st.session_state.get(key, ""))


def text_key(loaded: "LoadedModel") -> str:
    """The session key of the attention pages' text: one text per vocabulary, shared by the pages."""
    return f"attention_text:{loaded.vocab_id}"


def attention_text(loaded: "LoadedModel") -> tuple[str, str]:
    """The text box of the attention pages, one text per vocabulary, kept across both pages;
    returns the text and the widget's key."""
    key = text_key(loaded)
    st.session_state.setdefault(key, loaded.sample_text)  # no value=: the removal button sets it too
    text = st.text_input(_("Text"), key=key, **REMEMBERED,
                         help=_("Any text the model knows the characters of: Chinese, Latin letters, spaces and "
                                "full-width punctuation alike."))
    return text, key


def readable(text: str, loaded: "LoadedModel", key: str) -> str | None:
    """The text cut to the positions the model was trained on, or None once the page has said
    why it cannot read it (empty, or characters it does not know)."""
    if not text:
        st.info(_("Type some text to see where the model looks."))
        return None
    if not known_or_explain(text, loaded.tokenizer, key):
        return None
    if len(text) > loaded.block_size:
        st.warning(_("The model was trained on {block} positions: showing the first {block} of your {length} "
                     "characters.", block=loaded.block_size, length=len(text)))
    return text[: loaded.block_size]
