"""minigpt/tokenizer.py: round trips, unknown characters named (never mapped to id 0), and prompts
fitted to the vocabulary.

    pytest tests/minigpt/test_tokenizer.py
"""
import pytest

from minigpt import CharTokenizer
from minigpt.tokenizer import UnknownCharactersError


def test_tokenizer_round_trip_and_sorted_vocabulary():
    text = "深度学习 is fun!\n"
    tok = CharTokenizer.from_text(text)
    assert tok.chars == sorted(set(text))
    assert tok.decode(tok.encode(text)) == text


def test_unknown_characters_are_reported_not_mapped_to_zero():
    tok = CharTokenizer.from_text("abc")
    assert tok.unknown_chars("abxcyx") == ["x", "y"]
    with pytest.raises(UnknownCharactersError) as err:
        tok.encode("abz")
    assert err.value.chars == ["z"] and "'z'" in str(err.value)


def test_fit_swaps_punctuation_for_the_width_the_vocabulary_has_and_drops_the_rest():
    tok = CharTokenizer("什么是注意力？，！ ab")
    assert tok.fit("什么是注意力?") == "什么是注意力？"           # half-width ? → the vocabulary's ？
    assert tok.fit("注意力,是!") == "注意力，是！"
    assert tok.fit("Ａｂ 注意😀力") == "b 注意力"                 # full-width b → b; Ａ (A) and 😀 unknown
    assert tok.fit("注意\u3000力") == "注意 力"                   # the ideographic space → the space it knows
    half = CharTokenizer("注意力?. ")
    assert half.fit("注意力？。") == "注意力?."                    # and the other way round
    assert tok.fit("") == "" and tok.fit("😀") == ""
