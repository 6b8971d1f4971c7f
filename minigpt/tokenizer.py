"""Character-level tokenizer: one id per distinct character of the corpus.

Unlike the reference demo, which silently maps unknown characters to id 0, the
tokenizer reports them (`UnknownCharactersError`, or `unknown_chars()` to check first).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .config import ConfigError
from .messages import LabError


class UnknownCharactersError(LabError, ValueError):
    """Text contains characters that are not in the vocabulary: `chars`, distinct, in order of appearance."""

    def __init__(self, template: str, /, *, chars: Sequence[str], **params: Any):
        self.chars = list(chars)
        super().__init__(template, **params)

    def __reduce__(self):  # LabError's, plus `chars` as the state a pickled copy gets back
        return (*super().__reduce__(), {"chars": self.chars})


def _unknown_characters(chars: list[str]) -> UnknownCharactersError:
    """The error for these characters, the first 20 of them shown."""
    shown = ", ".join(repr(c) for c in chars[:20])
    if len(chars) > 20:
        return UnknownCharactersError("characters not in the vocabulary: {shown} and {more} more", chars=chars,
                                      shown=shown, more=len(chars) - 20)
    return UnknownCharactersError("characters not in the vocabulary: {shown}", chars=chars, shown=shown)


# a punctuation mark or letter typed in the other width: full-width ！ to ～ and the ideographic
# space are the ASCII ! to ~ and space; 。 is the Chinese full stop for .
_TO_HALF = {**{chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)}, "\u3000": " ", "。": "."}
_TO_FULL = {half: full for full, half in _TO_HALF.items()}


class CharTokenizer:
    """Maps characters to ids in sorted order, like the demo (`sorted(set(text))`); a vocabulary that
    cannot work (empty, not single characters, repeated) is a ConfigError."""

    def __init__(self, chars: Iterable[str]):
        chars = list(chars)
        if not chars:
            raise ConfigError("a tokenizer needs at least one character")
        if any(not isinstance(c, str) or len(c) != 1 for c in chars):
            raise ConfigError("the vocabulary must be a list of single characters")
        if len(set(chars)) != len(chars):
            raise ConfigError("the vocabulary has repeated characters")
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def unknown_chars(self, text: str) -> list[str]:
        """Distinct characters of `text` missing from the vocabulary, in order of appearance."""
        return list(dict.fromkeys(c for c in text if c not in self.stoi))

    def encode(self, text: str) -> list[int]:
        unknown = self.unknown_chars(text)
        if unknown:
            raise _unknown_characters(unknown)
        return [self.stoi[c] for c in text]

    def fit(self, text: str) -> str:
        """`text` with only what this vocabulary can read: a character it lacks becomes its twin in
        the other width when the vocabulary has that (？ for ?, ， for ,), else it is dropped."""
        kept = []
        for c in text:
            twin = _TO_HALF.get(c) or _TO_FULL.get(c)
            if c in self.stoi:
                kept.append(c)
            elif twin in self.stoi:
                kept.append(twin)
        return "".join(kept)

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.chars[i] for i in ids)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and other.chars == self.chars

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"
