"""app/chrome/text.py: streamed text shows as it is, never as markdown.

    pytest tests/app/test_text.py
"""
from app.chrome.text import markdown_stream


def test_streamed_text_is_shown_literally_by_markdown():
    shown = "".join(markdown_stream(["a*b", "\n", "    c_d"]))
    assert shown == "a\\*b  \n\u00a0\u00a0\u00a0\u00a0c\\_d"


# GFM's literal links as remark-gfm finds them in the text it has parsed (mdast-util-gfm-autolink-literal,
# the version Streamlit's markdown bundles): escapes are gone by then, so only a split text stops them
import re  # noqa: E402

from app.chrome.text import LINK_BREAK, md  # noqa: E402

GFM_LINKS = (re.compile(r"(https?://|www(?=\.))([-.\w]+)([^ \t\r\n]*)", re.I),
             re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)"))
NAMES = ['=HYPERLINK("http://e.example","click")', "www.example.com", "a@b.example", "HTTPS://x.y/z",
         "WWW.x.y", 'say "hi" <b>bold</b> & co', "mailto:a@b.example", "a::b :smile: :red[x]"]


def shown_as_text(markdown: str) -> list[str]:
    """What markdown's parser keeps of `markdown` as text, in the pieces LINK_BREAK splits it into."""
    return [re.sub(r"\\(.)", r"\1", piece) for piece in markdown.split(LINK_BREAK)]


def test_a_name_reads_as_typed_and_no_piece_of_it_is_a_link():
    for name in NAMES:
        pieces = shown_as_text(md(name))
        assert "".join(pieces) == name  # nothing added to what is shown or copied
        assert not [p for p in pieces for link in GFM_LINKS if link.search(p)], (name, pieces)


def test_streamed_text_makes_no_link_across_its_pieces():
    pieces = shown_as_text("".join(markdown_stream(["see htt", "p", ":", "//e.example or ww", "w.x.y"])))
    assert "".join(pieces) == "see http://e.example or www.x.y"
    assert not [p for p in pieces for link in GFM_LINKS if link.search(p)], pieces


def test_text_that_cannot_make_a_link_is_left_as_it_was():
    assert md("poem.txt: 3 lines") == "poem\\.txt\\: 3 lines"
