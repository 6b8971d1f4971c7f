"""app/chrome/text.py: streamed text shows as it is, never as markdown.

    pytest tests/app/test_text.py
"""
from app.chrome.text import markdown_stream


def test_streamed_text_is_shown_literally_by_markdown():
    shown = "".join(markdown_stream(["a*b", "\n", "    c_d"]))
    assert shown == "a\\*b  \n\u00a0\u00a0\u00a0\u00a0c\\_d"
