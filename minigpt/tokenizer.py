"""Character-level tokenizer: one id per distinct character of the corpus.

Unlike the reference demo, which silently maps unknown characters to id 0, the
tokenizer reports them (`UnknownCharactersError`, or `unknown_chars()` to check first).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence


class UnknownCharactersError(ValueError):
    """Text contains characters that are not in the vocabulary."""

    def __init__(self, chars: Sequence[str]):
        self.chars = list(chars)
        shown = ", ".join(repr(c) for c in self.chars[:20])
        more = f" and {len(self.chars) - 20} more" if len(self.chars) > 20 else ""
        super().__init__(f"characters not in the vocabulary: {shown}{more}")


class CharTokenizer:
    """Maps characters to ids in sorted order, like the demo (`sorted(set(text))`)."""

    def __init__(self, chars: Iterable[str]):
        chars = list(chars)
        if not chars:
            raise ValueError("a tokenizer needs at least one character")
        if any(not isinstance(c, str) or len(c) != 1 for c in chars):
            raise ValueError("the vocabulary must be a list of single characters")
        if len(set(chars)) != len(chars):
            raise ValueError("the vocabulary has repeated characters")
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
            raise UnknownCharactersError(unknown)
        return [self.stoi[c] for c in text]

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.chars[i] for i in ids)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and other.chars == self.chars

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"
