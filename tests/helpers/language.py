"""What a page shows, as words, and the check that a page in Chinese shows no English.

`shown_texts` reads every text an AppTest page shows (prose, labels, help, options, metrics,
table headers, the figures' titles, axes, legends and hovers); `english_words` finds the Latin
words in a text that are neither agreed symbols (d_model, softmax, course-zh) nor an English term
in brackets after its Chinese name, as the glossary gives it.
"""
from __future__ import annotations

import json
import re

from app.views import glossary

# Latin symbols a Chinese page may show: the maths' names, devices, encodings, the corpora's names
SYMBOLS = ("MiniGPT Lab", "MiniGPT", "d_model", "d_k", "d_ff", "num_heads", "num_layers", "max_len", "block_size",
           "batch_size", "seq_len", "vocab_size", "softmax", "top-k", "top-p", "Top-k", "Top-p", "AdamW", "GELU",
           "Pre-LN", "KV", "GPT", "ln", "exp", "std", "Var", "lr", "cpu", "cuda", "mps", "UTF-8", "UTF-16",
           "GB18030", "GBK", "HTML", "PNG", ".txt", ".zip", "TXT", "ZIP", ".csv", ".npz", "numpy.load", "course-zh", "demo-zh", "pydoc-en", "task-reverse", "task-copy", "task-sort", "minGPT", "QKᵀ", "Transformer", "Python", "Ray", "MB", "JSON", "logits", "W_O", "e^H", "PE", "pos", "sin", "cos", "logit", "LayerNorm", "English")  # English: the language switch names itself
_TEXT_FIELDS = {"label", "body", "help", "options", "placeholder", "text", "delta", "caption"}
_FIGURE_KEYS = {"text", "name", "hovertemplate", "title"}


def shown_texts(at) -> list[str]:
    """Every text the page's elements show: titles, prose, labels, help, options, metrics, table
    headers, and the figures' titles, axes, legends, annotations and hover templates. Not what
    the learner typed, nor code blocks (samples, links)."""
    texts: list[str] = []

    def from_proto(message) -> None:
        for field, value in message.ListFields():
            if field.name in ("spec", "code_text", "value", "default", "id", "form_id", "query_string"):
                continue
            repeated = not isinstance(value, (str, bytes)) and hasattr(value, "__len__") and not hasattr(value, "ListFields")
            if field.type == field.TYPE_MESSAGE:
                for item in (value if repeated else [value]):
                    from_proto(item)
            elif field.name in _TEXT_FIELDS:
                texts.extend(value if repeated else [value])

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "ListFields"):
            from_proto(proto)
            if getattr(proto, "spec", None) and type(node).__name__ == "UnknownElement":
                texts.extend(_figure_texts(json.loads(proto.spec)))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    for frame in at.dataframe:  # the headers the browser shows: a column_config label, else the name
        config = json.loads(frame.proto.columns or "{}")
        texts.extend(config.get(str(c), {}).get("label") or str(c) for c in frame.value.columns)
    return [t for t in texts if isinstance(t, str) and t.strip()]


def _figure_texts(spec) -> list[str]:
    found = []
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key in _FIGURE_KEYS and isinstance(value, str):
                found.append(value)
            elif key not in ("ticktext", "x", "y", "z", "tickvals", "customdata"):
                found.extend(_figure_texts(value))
    elif isinstance(spec, list):
        for item in spec:
            found.extend(_figure_texts(item))
    return found


def english_words(text: str, glossed: set[str]) -> list[str]:
    """Latin words of `text` that are neither agreed symbols nor an English term in brackets
    after its Chinese name (`glossed`: the glossary's English terms, lower case)."""
    text = re.sub(r"<style>.*?</style>", " ", text, flags=re.S)         # css
    text = re.sub(r"<script>.*?</script>", " ", text, flags=re.S)       # a script runs, it is not read
    text = re.sub(r"%\{[^}]*\}|<[^>]+>", " ", text)                  # plotly fields, html tags
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " ", text, flags=re.S)    # formulas
    text = re.sub(r"`[^`]*`", " ", text)                              # code spans (run ids)
    text = re.sub(r":\w+-background\[[^\]]*\]", " ", text)             # generated text, coloured
    text = text.replace("\\", "")
    for gloss in re.findall(r"（([^（）]*)）", text):
        if gloss.strip().lower() in glossed:
            text = text.replace(f"（{gloss}）", " ")
    for symbol in sorted(SYMBOLS, key=len, reverse=True):
        text = re.sub(rf"(?<![A-Za-z]){re.escape(symbol)}(?![A-Za-z])", " ", text)
    return re.findall(r"[A-Za-z]{2,}", text)


GLOSSED = {english.lower() for english, _meaning in glossary.TERMS}


def assert_chinese(at, where: str, besides: list[str] = ()) -> None:
    """No English word on the page outside the symbols and the glossary's bracketed English;
    `besides`: data the page quotes (a task line), left out."""
    assert not at.exception, [e.value for e in at.exception]
    texts = shown_texts(at)
    for data in besides:
        texts = [t.replace("\\", "").replace(data, " ") for t in texts]
    leaks = {text: words for text in texts if (words := english_words(text, GLOSSED))}
    assert not leaks, f"{where} shows English: " + "\n".join(f"{w} in {t!r}" for t, w in leaks.items())
