"""Secret keys as the server keeps them: salted digests, never the keys themselves.

A teacher's key, a run's owner key and a post's key are random tokens handed out once, to one
browser. The server (its memory and its database) keeps `hashed(key)`: a random salt and the
SHA-256 of salt + key. A stolen database file then gives no one the controls, and `matches`
compares in constant time, so how long a wrong key takes to refuse tells nothing of how close it
came. A learner's id, which only keeps one answer and a few posts per learner, is kept as a digest
under its class's salt (`tag`): the same learner gives the same tag in one class, and another in
the next.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets

SALT_BYTES = 16
HASHED_BYTES = SALT_BYTES + hashlib.sha256().digest_size


def new_key() -> str:
    """A fresh secret: 128 random bits, URL-safe."""
    return secrets.token_urlsafe(16)


def hashed(key: str) -> bytes:
    """What the server keeps of `key`: a fresh salt and the digest of salt + key."""
    salt = secrets.token_bytes(SALT_BYTES)
    return salt + hashlib.sha256(salt + key.encode()).digest()


def matches(key: object, kept: bytes | None) -> bool:
    """Whether `key` is the key `kept` was made from (hashed), in constant time. Anything that is not
    a string (a missing key, a forged value) is simply a wrong key."""
    if not isinstance(key, str) or not isinstance(kept, (bytes, bytearray)) or len(kept) != HASHED_BYTES:
        return False
    salt = bytes(kept[:SALT_BYTES])
    return hmac.compare_digest(hashlib.sha256(salt + key.encode()).digest(), bytes(kept[SALT_BYTES:]))


def tag(salt: bytes, value: str) -> bytes:
    """A digest of `value` under `salt`: equal for equal values, so it can be counted and compared."""
    return hashlib.sha256(salt + value.encode()).digest()
