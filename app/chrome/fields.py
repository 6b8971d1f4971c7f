"""Whole-number boxes that say their range in the page's language.

st.number_input with min_value and max_value refuses a number outside them with Streamlit's own
English words, shown only when the pointer rests on a small icon. These boxes take any whole
number, and a value outside the range gets a sentence under the box, in the catalog's words;
the caller treats the setting as missing until it is fixed."""
from __future__ import annotations

import streamlit as st

from app.chrome.i18n import _

REMEMBERED = {"persist_state": "session"}  # a setting keeps its value across pages and reloads


def whole_number(label: str, low: int, high: int, *, key: str, where=st, **kwargs) -> int | None:
    """The box's number, or None (and the reason, said) when it lies outside low..high."""
    value = where.number_input(label, key=key, step=kwargs.pop("step", 1), **kwargs)
    if low <= value <= high:
        return int(value)
    where.error(_("{label} must be a whole number from {low:,} to {high:,}; {value:,} is not.", label=label,
                  low=low, high=high, value=int(value)))
    return None


def short_text(label: str, limit: int, *, key: str, where=st, **kwargs) -> str:
    """A text box for a short name: a longer value (a paste) is cut to `limit` characters, with a
    sentence under the box saying so. No max_chars: a browser drops a paste longer than that whole,
    without a word."""
    value = where.text_input(label, key=key, on_change=_cut, args=(key, limit), **kwargs)
    if st.session_state.get(_cut_key(key)):
        where.caption(_("“{label}” has at most {limit} characters: yours was cut to its first {limit}.",
                        label=label, limit=limit))
    return value


def _cut_key(key: str) -> str:
    return f"{key}:cut"  # session_state: the box's last value was cut (until one fits)


def _cut(key: str, limit: int) -> None:
    value = st.session_state.get(key) or ""
    st.session_state[_cut_key(key)] = len(value) > limit
    if len(value) > limit:
        st.session_state[key] = value[:limit]
