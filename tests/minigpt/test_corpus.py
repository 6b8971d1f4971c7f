"""minigpt/corpus.py: the built-in corpora, a text file by path, and uploaded text with its checks
(UTF-8, UTF-16, GBK; empty, binary, oversized).

    pytest tests/minigpt/test_corpus.py
"""
import pytest

from minigpt import CharTokenizer, CorpusError, decode_corpus_as, load_corpus
from minigpt.corpus import MAX_CORPUS_BYTES, decode_corpus


def test_builtin_corpora_need_no_download():
    demo = load_corpus("demo-zh")
    assert len(demo) == 448 and len(set(demo)) == 208 and demo.startswith("\n深度学习")
    english = load_corpus("pydoc-en")
    assert len(english) > 400_000 and "lambda" in english


def test_user_text_file_is_a_corpus(tmp_path):
    path = tmp_path / "poem.txt"
    path.write_text("roses are red\n", encoding="utf-8")
    assert load_corpus(path) == "roses are red\n"
    with pytest.raises(CorpusError, match="no corpus named"):
        load_corpus(tmp_path / "missing.txt")


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"", "empty"),
        (b"   \n\t  ", "whitespace"),
        (b"aaaaaaaaaa", "single distinct character"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        ("héllo wörld, ça va très bien. ".encode("latin-1") * 5, "not valid UTF-8 .*nor Chinese text in GBK"),
        (b"x" * (MAX_CORPUS_BYTES + 1), "limit"),
    ],
)
def test_bad_corpora_are_refused_with_a_reason(raw, message):
    with pytest.raises(CorpusError, match=message):
        decode_corpus(raw)


def test_gbk_text_from_chinese_windows_is_read_as_gbk():
    """Issue B12: GBK was refused as 'not valid UTF-8 (byte 0)'."""
    text = "深度学习是人工智能的重要领域。\n注意力机制让模型学会回头看，English words too.\n" * 5
    assert decode_corpus_as(text.encode("gbk")) == (text, "GBK")
    assert decode_corpus_as(text.encode("utf-8")) == (text, "UTF-8")  # UTF-8 is tried first


def test_utf16_with_bom_and_emoji_are_accepted():
    assert decode_corpus("héllo 😀 wörld".encode("utf-16")) == "héllo 😀 wörld"
    assert decode_corpus("mixed 中文 and emoji 🎉".encode("utf-8")) == "mixed 中文 and emoji 🎉"


def test_a_utf8_file_saved_with_a_byte_order_mark_keeps_no_bom_in_its_text_or_vocabulary(tmp_path):
    """Notepad saves UTF-8 with the bytes EF BB BF in front. They mark the encoding; they are not
    a character the model should learn, so U+FEFF is neither the text's first character nor in
    its vocabulary. The bytes and the vocabulary are written out by hand."""
    raw = b"\xef\xbb\xbf" + "注意力 ab\n".encode("utf-8") * 3
    expected = "注意力 ab\n" * 3
    assert decode_corpus_as(raw) == (expected, "UTF-8")
    path = tmp_path / "notepad.txt"
    path.write_bytes(raw)
    text = load_corpus(path)
    assert text == expected and text[0] == "注"
    assert CharTokenizer.from_text(text).chars == ["\n", " ", "a", "b", "力", "意", "注"]
