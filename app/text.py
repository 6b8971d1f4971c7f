"""Text for the page: learner text made safe for markdown, and durations."""
from __future__ import annotations

from collections.abc import Iterable, Iterator

_MARKDOWN_SPECIALS = frozenset("\\`*_{}[]()#+-.!|<>~$:")


def md(text: str) -> str:
    """Text from a learner (a file name, a corpus line) that markdown shows as typed."""
    return "".join(markdown_stream([text]))


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
    """'1 h 02 min', '3 min 05 s', '42 s'; an en dash when unknown."""
    if seconds is None:
        return "–"
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds} s"
