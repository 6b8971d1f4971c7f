"""What the library says to a learner: messages as English templates with named parameters.

`str(error)` is the English sentence, which the CLI prints. An app in another language
translates `error.template` through its gettext catalog and formats the result with
`error.params`, so a message is written once, here, and translated once, in the catalogs.
A template is formatted only when it has parameters, as the app's `_` does, so a sentence
without any keeps its braces as written.
Babel's extractor finds the templates because every error class below is one of its
keywords (pyproject.toml, [tool.babel]); a template is therefore always a string literal,
never an f-string, with `{name}` fields that `str.format` fills.
"""
from __future__ import annotations

from typing import Any


def N_(message: str) -> str:
    """Mark a message for the catalogs without translating it (gettext's `gettext_noop`)."""
    return message


class LabError(Exception):
    """An error with a sentence for the learner: a template and the parameters it names."""

    def __init__(self, template: str, /, **params: Any):
        self.template, self.params = template, params
        super().__init__(template.format(**params) if params else template)

    def __reduce__(self):  # pickles (a DDP worker's error) keep the template and parameters
        return _rebuild, (type(self), self.template, self.params)


def _rebuild(cls: type[LabError], template: str, params: dict[str, Any]) -> LabError:
    error = cls.__new__(cls)
    LabError.__init__(error, template, **params)
    return error


class Message:
    """A sentence for the learner that is not an error (a note on a prompt, why a run stopped):
    a template and its parameters, like LabError; `str()` is the English sentence."""

    __slots__ = ("template", "params")

    def __init__(self, template: str, /, **params: Any):
        self.template, self.params = template, params

    @classmethod
    def restored(cls, template: str, params: dict[str, Any]) -> Message:
        """A message read back from where it was kept (the store keeps a run's error so): its template
        was a literal where the message was first made, so the catalogs hold it already."""
        message = cls.__new__(cls)
        message.template, message.params = template, dict(params)
        return message

    def __str__(self) -> str:
        return self.template.format(**self.params) if self.params else self.template

    def __repr__(self) -> str:
        return f"Message({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Message) and (other.template, other.params) == (self.template, self.params)

    def __hash__(self) -> int:
        return hash((self.template, tuple(sorted(self.params))))
