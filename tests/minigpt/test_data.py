"""minigpt/data.py: the built-in corpora, uploaded text and its checks (UTF-8, UTF-16, GBK), the
split, and batches of shifted windows.

    pytest tests/minigpt/test_data.py
"""
import pytest
import torch

from minigpt import CorpusError, decode_corpus_as, load_corpus
from minigpt.data import decode_corpus, get_batch
from minigpt.data import MAX_CORPUS_BYTES, split_tokens


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


def test_split_refuses_a_corpus_shorter_than_a_block():
    ids = torch.arange(40)
    train, val = split_tokens(ids, 0.25, 8)
    assert torch.equal(torch.cat([train, val]), ids) and len(val) == 10
    with pytest.raises(CorpusError, match="block_size"):
        split_tokens(ids, 0.1, 8)


def test_batches_are_shifted_windows_of_the_token_tensor():
    data = torch.arange(100)
    x, y = get_batch(data, 5, 7, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (5, 7)
    assert torch.equal(y, x + 1)  # next-token targets
    assert torch.equal(x[:, 1:], x[:, :-1] + 1)  # contiguous windows


def test_batches_are_reproducible_from_the_generator():
    data = torch.arange(1000)
    a = get_batch(data, 4, 8, torch.Generator().manual_seed(3))
    b = get_batch(data, 4, 8, torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0])


@pytest.mark.parametrize("length, block_size, batch_size, message",
                         [(40, 8, 4, "validation split has 4"), (8, 8, 1, "training split has 8 tokens"),
                          (100, 8, 83, "83 is more than the 82 distinct windows")])
def test_corpus_fit_from_its_length_matches_the_checks_on_its_tokens(length, block_size, batch_size, message):
    from minigpt import check_corpus_fits
    from minigpt.data import check_batch_fits

    with pytest.raises(CorpusError, match=message) as by_length:
        check_corpus_fits(length, 0.1, block_size, batch_size)
    with pytest.raises(CorpusError) as by_tokens:
        train, _ = split_tokens(torch.arange(length), 0.1, block_size)
        check_batch_fits(train, batch_size, block_size)
    assert str(by_length.value) == str(by_tokens.value)
    check_corpus_fits(100, 0.1, 8, 82)
