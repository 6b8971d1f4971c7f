"""Corpora: the texts a model learns from, by name or from a file, and the checks on them.

Built-in corpora need no download; each is registered by name (`register_corpus`) with a
description that states its size, counted from the text: a Chinese text on deep learning and
attention written for MiniGPT Lab (the default: enough for a small model to learn the style
rather than recite the text), the reference demo's own paragraph (which a model can only
memorise) and the standard library's documentation (`pydoc_data.topics`, in English). The
instruments register more (minigpt.lab.tasks: three generated tasks whose right answers are
known). Any UTF-8 or GBK text file works too; bytes that are not text are refused with a
`CorpusError` saying why.

This module imports no torch: Home lists the corpora and checks an upload before torch has loaded.
Token tensors and their batches are minigpt.data's.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .messages import N_, LabError, Message
from .tokenizer import CharTokenizer

DEFAULT_CORPUS = "course-zh"
DEMO_SENTENCE = "深度学习是人工智能的重要领域"   # the reference demo's attention example
DEMO_PROMPTS = ("深度", "自然", "注意", "计算")      # the reference demo's generation prompts
MAX_CORPUS_BYTES = 20 * 1024 * 1024



@dataclass(frozen=True)
class BuiltinCorpus:
    name: str
    load: Callable[[], str] = field(repr=False)  # the text, made or read on each call
    description: str  # a template marked for the catalogs; {chars} is its length, corpus_chars(name)


BUILTIN_CORPORA: dict[str, BuiltinCorpus] = {}  # in the order they were registered: Home lists them so


def register_corpus(name: str, load: Callable[[], str], description: str) -> None:
    """Make a corpus loadable by name (`load_corpus(name)`), shown on Home with `description`. A
    task's line length is not the corpus's business: the caller passes it to the trainer
    (`minigpt.lab.tasks.training_hooks`)."""
    BUILTIN_CORPORA[name] = BuiltinCorpus(name, load, description)


@functools.cache
def corpus_chars(name: str) -> int:
    """A built-in corpus's length in characters (counted once per process)."""
    return len(BUILTIN_CORPORA[name].load())


def _packaged(name: str) -> Callable[[], str]:
    return lambda: resources.files("minigpt.corpora").joinpath(name.replace("-", "_") + ".txt").read_text("utf-8")


def _python_docs() -> str:
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key].strip() for key in sorted(topics)) + "\n"


register_corpus("course-zh", _packaged("course-zh"), N_(
    "A Chinese text on deep learning and attention, written for this lab ({chars:,} characters): large enough "
    "for a small model to learn its style instead of reciting it."))
register_corpus("demo-zh", _packaged("demo-zh"), N_(
    "The reference demo's Chinese paragraph ({chars:,} characters): a model can only memorise it."))
register_corpus("pydoc-en", _python_docs, N_(
    "Python's own documentation topics from the standard library ({chars:,} characters, English)."))


class CorpusError(LabError, ValueError):
    """Text that cannot serve as a training corpus."""


def load_corpus(name_or_path: str | Path) -> str:
    """A built-in corpus by name, or a UTF-8 text file by path."""
    name = str(name_or_path)
    if name in BUILTIN_CORPORA:
        return BUILTIN_CORPORA[name].load()
    path = Path(name)
    if not path.is_file():
        known = ", ".join(BUILTIN_CORPORA)
        raise CorpusError("no corpus named {name!r}: use one of {known} or a path to a text file.", name=name,
                          known=known)
    size = path.stat().st_size
    if size > MAX_CORPUS_BYTES:
        raise _too_large(size)
    return decode_corpus(path.read_bytes(), source=path.name)


def decode_corpus(raw: bytes, source: str | Message = Message("the upload")) -> str:
    """Decode uploaded bytes as text, refusing empty, binary, oversized or undecodable data."""
    return decode_corpus_as(raw, source)[0]


def decode_corpus_as(raw: bytes, source: str | Message = Message("the upload")) -> tuple[str, str]:
    """The text and the encoding it was read in: UTF-16 with a byte-order mark, UTF-8, or GBK
    (as Chinese Windows saves text, read as its superset GB18030) when UTF-8 fails and GBK gives
    Chinese text."""
    if len(raw) > MAX_CORPUS_BYTES:
        raise _too_large(len(raw))
    if not raw:
        raise CorpusError("{source} is empty.", source=source)
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        text, encoding = _decode(raw, "utf-16", source), "UTF-16"
    else:
        if b"\x00" in raw[:8192]:
            raise CorpusError("{source} looks like a binary file (it contains NUL bytes), not text.", source=source)
        try:
            text, encoding = raw.decode("utf-8-sig"), "UTF-8"
        except UnicodeDecodeError as err:
            text, encoding = _gbk_or_refuse(raw, source, err.start), "GBK"
    check_corpus_text(text, source)
    return text, encoding


def _gbk_or_refuse(raw: bytes, source: str, bad_byte: int) -> str:
    try:
        text = raw.decode("gb18030")
    except UnicodeDecodeError:
        text = ""
    chinese = sum(1 for c in text if "\u4e00" <= c <= "\u9fff" or "\u3000" <= c <= "\u303f" or "\uff00" <= c <= "\uffef")
    plain = sum(1 for c in text if c.isascii() and (c.isprintable() or c in "\n\r\t"))
    visible = sum(1 for c in text if not c.isspace())
    if text and chinese >= 0.5 * visible and chinese + plain >= 0.95 * len(text):
        return text
    raise CorpusError(
        "{source} is not valid UTF-8 text (byte {byte}), nor Chinese text in GBK; save it as UTF-8 "
        "and upload it again.", source=source, byte=bad_byte,
    )


def check_corpus_text(text: str, source: str | Message = Message("the corpus")) -> None:
    if not text.strip():
        raise CorpusError("{source} holds only whitespace.", source=source)
    controls = sum(1 for c in text if ord(c) < 32 and c not in "\n\r\t")
    if controls > 0.01 * len(text):
        raise CorpusError("{source} looks like a binary file ({controls} control characters).", source=source,
                          controls=controls)
    if len(set(text)) < 2:
        raise CorpusError("{source} uses a single distinct character: there is nothing to predict.", source=source)


def _decode(raw: bytes, encoding: str, source: str) -> str:
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as err:
        raise CorpusError(
            "{source} is not valid {encoding} text (byte {byte}); save it as UTF-8 and upload it again.",
            source=source, encoding=encoding.split("-sig")[0].upper(), byte=err.start,
        ) from None


def _too_large(size: int) -> CorpusError:
    return CorpusError("the corpus is {size:.1f} MB; the limit is {limit:.0f} MB.", size=size / 2**20,
                       limit=MAX_CORPUS_BYTES / 2**20)



def split_sizes(num_tokens: int, val_fraction: float, block_size: int) -> tuple[int, int]:
    """Token counts of the training and validation splits; CorpusError if one cannot hold a block."""
    n_val = int(num_tokens * val_fraction)
    sizes = (num_tokens - n_val, n_val)
    for size, split in zip(sizes, ("training", "validation")):
        if size >= block_size + 1:
            continue
        if split == "training":
            raise CorpusError(
                "the training split has {size} tokens, fewer than block_size + 1 = {needed}: use a longer "
                "corpus or a smaller block_size.", size=size, needed=block_size + 1,
            )
        raise CorpusError(
            "the validation split has {size} tokens, fewer than block_size + 1 = {needed}: use a longer "
            "corpus or a smaller block_size.", size=size, needed=block_size + 1,
        )
    return sizes


def check_corpus_fits(num_tokens: int, val_fraction: float, block_size: int, batch_size: int) -> None:
    """Trainer's checks of a corpus from its length alone, so a form can refuse settings before
    anything is built (a character-level corpus has one token per character)."""
    n_train, _ = split_sizes(num_tokens, val_fraction, block_size)
    check_windows(n_train, batch_size, block_size)


def check_windows(num_tokens: int, batch_size: int, block_size: int) -> None:
    windows = num_tokens - block_size
    if batch_size > windows:
        raise CorpusError(
            "batch_size {batch_size} is more than the {windows} distinct windows of {block_size} tokens "
            "in the training split: use a smaller batch or block, or a longer corpus.",
            batch_size=batch_size, windows=windows, block_size=block_size,
        )


def probe_text(tokenizer: CharTokenizer, corpus_text: str = "", limit: int = 40) -> str:
    """A text to show attention on, in the vocabulary only: the demo's sentence when the vocabulary
    has it, else the corpus's first full line, else the first visible characters of the vocabulary."""
    if not tokenizer.unknown_chars(DEMO_SENTENCE):
        return DEMO_SENTENCE
    for line in corpus_text.splitlines():
        line = line.strip()
        if len(line) >= 8 and not tokenizer.unknown_chars(line):
            return line[:limit]
    visible = [c for c in tokenizer.chars if c.isprintable() and not c.isspace()]
    return "".join(visible[:16]) or tokenizer.chars[0]


def demo_prompts(tokenizer: CharTokenizer) -> list[str]:
    """The demo's four prompts, when this vocabulary can spell all of them."""
    return list(DEMO_PROMPTS) if not tokenizer.unknown_chars("".join(DEMO_PROMPTS)) else []
