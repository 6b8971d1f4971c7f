"""Text for the page: learner text made safe for markdown, durations, places in a line and lists."""
from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator
from functools import reduce

from app.chrome.i18n import SOURCE, _, language

_MARKDOWN_SPECIALS = frozenset("\\`*_{}[]()#+-.!|<>~$:")
# An empty, unstyled <span> in Streamlit's markdown (its colour directive with no colour): it adds no
# character to what is shown or copied, but it splits the text where GFM would make a link.
# Escapes cannot stop that: remark-gfm finds http(s)://, www. and e-mail addresses in the text as
# parsed, after the backslashes are gone (tests/cross/test_browser_names.py reads the drawn page).
LINK_BREAK = ":color[]{}"


def md(text: str) -> str:
    """Text from a learner (a file name, a corpus line, a run's name) that markdown shows as typed:
    never a format, never a link."""
    return "".join(markdown_stream([text]))


def _starts_a_link(before: str, c: str) -> bool:
    """Whether GFM's literal links could match across this point: the `:` of http(s)://, the `.`
    after www, the `@` of an e-mail address (`before`: the characters just before `c`)."""
    before = before.lower()
    return (c == "@" or c == ":" and before.endswith(("http", "https"))
            or c == "." and before.endswith("www"))


def shown_char(c: str) -> str:
    """One character as a learner can see it: a space, a line break or a tab drawn as a sign."""
    return {" ": "␣", "\n": "⏎", "\t": "⇥"}.get(c, c if c.isprintable() else repr(c)[1:-1])


def markdown_stream(pieces: Iterable[str]) -> Iterator[str]:
    """Text pieces made safe for st.write_stream's markdown: specials escaped, no link made
    (LINK_BREAK), line breaks kept, and spaces that start a line made non-breaking (four would
    open a code block)."""
    line_start, before = True, ""  # before: the last characters, across pieces
    for piece in pieces:
        out = []
        for c in piece:
            if c == "\n":
                out.append("  \n")
            elif c == " " and line_start:
                out.append("\u00a0")
                before = (before + c)[-5:]
                continue
            else:
                if _starts_a_link(before, c):
                    out.append(LINK_BREAK)
                out.append("\\" + c if c in _MARKDOWN_SPECIALS else c)
            line_start = c == "\n"
            before = (before + c)[-5:]
        yield "".join(out)


def format_duration(seconds: float | None) -> str:
    """'1 h 02 min', '3 min 05 s', '42 s' in English; an en dash when unknown."""
    if seconds is None:
        return "–"
    seconds = round(seconds)
    if seconds >= 3600:
        return _("{hours} h {minutes:02d} min", hours=seconds // 3600, minutes=seconds % 3600 // 60)
    if seconds >= 60:
        return _("{minutes} min {seconds:02d} s", minutes=seconds // 60, seconds=seconds % 60)
    return _("{seconds} s", seconds=seconds)


def ordinal(n: int) -> str:
    """A place in a line as the language says it: '1st', '22nd', '113th' in English; 第 3 in Chinese."""
    if language() != SOURCE:
        return _("number {n}", n=n)  # each catalog says it its own way
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def word_list(parts: list[str]) -> str:
    """Parts joined as the language lists them ("a, b, c"; 甲，乙，丙)."""
    return reduce(lambda earlier, later: _("{earlier}, {later}", earlier=earlier, later=later), parts)


def file_name(name: str, fallback: str, limit: int) -> str:
    """An uploaded file's name as the page shows it and the server keeps it: no control or direction
    characters, spaces collapsed, at most `limit` characters (`fallback` where nothing is left)."""
    kept = "".join(c if unicodedata.category(c)[0] != "C" else " " for c in name)
    return " ".join(kept.split())[:limit] or fallback
