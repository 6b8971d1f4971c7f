"""A class's code: what the class types or clicks to join (?class=K7Q2), read off a projector.

A code is no secret: it lets anyone watch the board, post and answer. What only the teacher may do
is guarded by the teacher's key (roster.py), never by the code.
"""
from __future__ import annotations

import secrets
from collections.abc import Callable

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I: read off a projector, typed on a phone
# 32 ** 4 codes, about a million: enough that a mistyped code rarely lands in another open class
CODE_LENGTH = 4


def new_code(taken: Callable[[str], bool]) -> str:
    """A random code that `taken` does not refuse."""
    while True:
        # secrets, not random: a code that follows from the last one would let a visitor guess the next class
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        if not taken(code):
            return code


def is_code(text: str) -> bool:
    """Whether `text` has a code's shape: what tells "no such class" from "not a code" apart."""
    return len(text) == CODE_LENGTH and all(c in CODE_ALPHABET for c in text)
