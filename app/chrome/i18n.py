"""The language the app speaks: the learner's choice, gettext catalogs, and numbers for the language.

Every word a page shows passes through `_`, which translates an English template through the
chosen language's catalog and then fills its fields, numbers written the language's way:

    _("Step {step:,} of {total:,}", step=120, total=2000)

English is the source language: its messages are the templates themselves. Every other language
is a folder `app/locales/<code>/LC_MESSAGES/messages.po` (and its compiled `.mo`), found at start:
adding one needs no code. The choice: `?lang=` in the URL on a session's first page, else the
browser's language (`st.context.locale`), else English; then the sidebar's switch, kept in the
session and mirrored in the URL, so that a copied link opens in the same language.
"""
from __future__ import annotations

import functools
import gettext
import json
import re
import string
import threading
from pathlib import Path
from typing import Any

import streamlit as st
from babel import Locale, UnknownLocaleError, negotiate_locale
from babel.numbers import get_decimal_symbol, get_group_symbol
from streamlit.runtime.scriptrunner import get_script_run_ctx

from minigpt import LabError, Message

from app.chrome import url

LOCALES = Path(__file__).parents[1] / "locales"  # app/locales: the catalogs are the whole app's
DOMAIN = "messages"
SOURCE = "en"
LANG_KEY, LANG_WIDGET_KEY = "lang", "lang_choice"  # session_state: the language, and the switch's own key
_NUMBER = re.compile(r"[+\- ]?,?(?:\.\d+)?[fdg%]?")   # the specs whose '.' and ',' the language rewrites
# (session id, language) as this script thread last set them (choose_language, the switch): `_` asks for the
# language some eighty times a page run, and each read of session_state costs more than the translation
_held = threading.local()


@functools.cache
def languages() -> tuple[str, ...]:
    """English first, then every language with a compiled catalog."""
    found = sorted(p.parents[1].name for p in LOCALES.glob(f"*/LC_MESSAGES/{DOMAIN}.mo"))
    return (SOURCE, *(code for code in found if code != SOURCE))


@functools.cache
def catalog(lang: str) -> gettext.NullTranslations:
    if lang == SOURCE:
        return gettext.NullTranslations()
    return gettext.translation(DOMAIN, LOCALES, languages=[lang])


@functools.cache
def display_name(lang: str) -> str:
    """A language's name in that language: what a learner who reads only it looks for."""
    return Locale.parse(lang).get_display_name(lang)


def language() -> str:
    held, ctx = getattr(_held, "lang", None), get_script_run_ctx(suppress_warning=True)
    if held is not None and ctx is not None and held[0] == ctx.session_id:
        return held[1]
    lang = st.session_state.get(LANG_KEY)
    return lang if lang in languages() else SOURCE


def _hold() -> str:
    """Read the session's language afresh, after a write to it, and keep it for this thread's further reads
    in this session (a fragment's run, in another thread or another session, reads session_state)."""
    _held.lang = None
    lang, ctx = language(), get_script_run_ctx(suppress_warning=True)
    _held.lang = (ctx.session_id, lang) if ctx is not None else None
    return lang


def from_code(code: str | None) -> str | None:
    """The available language a code such as 'zh', 'zh-CN' or 'en_US' asks for, if any."""
    if not code:
        return None
    try:
        found = negotiate_locale([code.replace("-", "_")], list(languages()), sep="_")
    except (ValueError, UnknownLocaleError):
        return None
    return {lang.lower(): lang for lang in languages()}.get((found or "").lower())  # ?lang=ZH is zh


def choose_language() -> str:
    """On a session's first page: the URL's ?lang=, else the browser's; then the session's choice."""
    ss = st.session_state
    if LANG_KEY not in ss:
        ss[LANG_KEY] = from_code(st.query_params.get(url.LANG)) or from_code(st.context.locale) or SOURCE
    lang = _hold()  # a page's run begins here
    if st.query_params.get(url.LANG) != lang:
        st.query_params[url.LANG] = lang
    return lang


def language_switch() -> None:
    """The sidebar's switch; the callback runs before the rerun, so the whole page turns at once."""
    st.session_state[LANG_WIDGET_KEY] = language()
    st.radio("🌐 " + _("Language"), languages(), format_func=display_name, key=LANG_WIDGET_KEY, horizontal=True,
             on_change=_switched)


def streamlit_chrome_css() -> str:
    """Outside English, CSS that paints words Streamlit 1.67 writes in English over in the catalog's:
    the hints under a focused text box ("Press Enter to apply", "… to submit form") and a
    multiselect's "Select all"."""
    if language() == SOURCE:
        return ""
    hint = "[data-testid=InputInstructions]"
    apply, submit = _("Press Enter to apply"), _("Press Enter to submit")
    select_all = '[role=option][data-key="__select_all__"] > div'  # a multiselect's first line, "Select all"
    return (painted_css(hint, apply, "0.75rem") + painted_css(f"[data-testid=stForm] {hint}", submit, "0.75rem")
            + painted_css(select_all, _("Select all"), "1rem"))


def painted_css(selector: str, text: str, size: str) -> str:
    """CSS that hides an element's own words and shows `text` (quoted for CSS) in their place."""
    return (f"{selector} {{ font-size: 0 }} "
            f"{selector}::after {{ content: {json.dumps(text, ensure_ascii=False)}; font-size: {size} }} ")


def _switched() -> None:
    """The switch's callback: the session takes the new language (choose_language then mirrors it in the URL)."""
    st.session_state[LANG_KEY] = st.session_state[LANG_WIDGET_KEY]
    _hold()


def _(message: str, /, **params: Any) -> str:
    """`message` in the session's language, its fields filled when there are parameters."""
    lang = language()
    text = catalog(lang).gettext(message)
    return _fill(lang, text, params) if params else text


def n_(singular: str, plural: str, n: int, /, **params: Any) -> str:
    """The singular or plural message for n, as the language counts; `n` is a field too."""
    lang = language()
    text = catalog(lang).ngettext(singular, plural, n)
    return _fill(lang, text, {"n": n, **params})


def _fill(lang: str, text: str, params: dict[str, Any]) -> str:
    """`text`'s fields filled, numbers written the language's way: where it writes them as Python does
    (English, Chinese), by str.format itself, ten times quicker than a Formatter written in Python."""
    if _symbols(lang) == (".", ","):
        return text.format(**params)
    return _NumberFormatter(lang).vformat(text, (), params)


def number(value: float, spec: str = ",") -> str:
    """A number on its own, as `_` writes one: number(1234.5, ",.1f") is '1,234.5' in English."""
    lang = language()
    return format(value, spec) if _symbols(lang) == (".", ",") else _NumberFormatter(lang).format_field(value, spec)


SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def textbook(value: float, digits: int = 2) -> str:
    """A number as a textbook prints it: 0 as 0, 0.0004 as 0.0004, 3.2e-08 as 3.2 × 10⁻⁸; in the
    language's decimal symbol."""
    if value == 0:
        return "0"
    if 1e-4 <= abs(value) < 1e5:
        return number(value, f".{digits}g")  # plain in this range: .g writes no exponent here
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    return f"{number(float(mantissa), f'.{digits - 1}f')} × 10{str(int(exponent)).translate(SUPERSCRIPT)}"


def error_text(error: BaseException | Message) -> str:
    """A library error or message in the session's language. Inside it, a nested LabError is
    translated too, and so is a parameter that is itself a Message (Message("the upload"));
    any other exception inside shows its own words."""
    if isinstance(error, (LabError, Message)):
        return _(error.template, **{name: _parameter(value) for name, value in error.params.items()})
    return _("Unexpected error: {detail}", detail=str(error))


def _parameter(value: Any) -> Any:
    """A message's parameter as shown: nested messages translated, an exception's own words, and
    anything else (a file name, a number) as it is."""
    if isinstance(value, (LabError, Message)):
        return error_text(value)
    if isinstance(value, BaseException):
        return str(value)
    return value


class _NumberFormatter(string.Formatter):
    """str.format with the language's decimal and group symbols for the number specs pages use
    (',', '.2f', '+.2f', ',.0f', 'd', 'g', '.0%'); any other spec, and any other value, is Python's own."""

    def __init__(self, lang: str):
        self.lang = lang

    def format_field(self, value: Any, spec: str) -> str:
        match = _NUMBER.fullmatch(spec)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not match:
            return super().format_field(value, spec)
        text = super().format_field(value, spec)
        decimal, group = _symbols(self.lang)
        return text.translate(str.maketrans({".": decimal, ",": group}))


@functools.cache
def _symbols(lang: str) -> tuple[str, str]:
    return get_decimal_symbol(lang), get_group_symbol(lang)
