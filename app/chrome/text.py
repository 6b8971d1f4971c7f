"""Text for the page: learner text made safe for markdown, durations and places in a line."""
from __future__ import annotations

from collections.abc import Iterable, Iterator

from app.chrome.i18n import SOURCE, _, language

_MARKDOWN_SPECIALS = frozenset("\\`*_{}[]()#+-.!|<>~$:")


def md(text: str) -> str:
    """Text from a learner (a file name, a corpus line) that markdown shows as typed."""
    return "".join(markdown_stream([text]))


def shown_char(c: str) -> str:
    """One character as a learner can see it: a space, a line break or a tab drawn as a sign."""
    return {" ": "␣", "\n": "⏎", "\t": "⇥"}.get(c, c if c.isprintable() else repr(c)[1:-1])


def markdown_stream(pieces: Iterable[str]) -> Iterator[str]:
    """Text pieces made safe for st.write_stream's markdown: specials escaped, line breaks
    kept, and spaces that start a line made non-breaking (four would open a code block)."""
    line_start = True
    for piece in pieces:
        out = []
        for c in piece:
            if c == "\n":
                out.append("  \n")
            elif c == " " and line_start:
                out.append("\u00a0")
                continue
            else:
                out.append("\\" + c if c in _MARKDOWN_SPECIALS else c)
            line_start = c == "\n"
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
