"""app/chrome/i18n.py keeps the language a script thread last read for its session, so that `_` need not
read session_state at every message: it must stay that session's own, and follow the switch at once.

    pytest tests/app/test_language_held.py
"""
from __future__ import annotations

import threading
from types import SimpleNamespace

from app.chrome import i18n


class Tabs:
    """Two browser tabs' sessions served by one script thread in turn, as a server may."""

    def __init__(self, monkeypatch):
        self.states = {"a": {i18n.LANG_KEY: "zh"}, "b": {i18n.LANG_KEY: "en"}}
        self.now = "a"
        monkeypatch.setattr(i18n, "get_script_run_ctx", lambda suppress_warning=False: SimpleNamespace(
            session_id=self.now))
        monkeypatch.setattr(i18n, "st", SimpleNamespace(session_state=self))
        monkeypatch.setattr(i18n, "_held", threading.local())

    def get(self, key, default=None):
        return self.states[self.now].get(key, default)

    def __getitem__(self, key):
        return self.states[self.now][key]

    def __setitem__(self, key, value):
        self.states[self.now][key] = value


def test_the_language_held_for_one_session_is_never_another_sessions(monkeypatch):
    tabs = Tabs(monkeypatch)
    assert i18n._hold() == "zh" and i18n.language() == "zh"
    tabs.now = "b"  # the same thread runs the other tab's script next
    assert i18n.language() == "en"
    assert i18n._("Home") == "Home"
    tabs.now = "a"
    assert i18n._("Home") == "首页"


def test_the_switch_turns_the_held_language_at_once(monkeypatch):
    tabs = Tabs(monkeypatch)
    i18n._hold()
    tabs[i18n.LANG_WIDGET_KEY] = "en"
    i18n._switched()  # the sidebar's switch, before the page's run
    assert i18n.language() == "en" and i18n._("Home") == "Home"
