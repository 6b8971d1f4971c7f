"""The address: every query parameter the app reads or writes, named once, and the links it builds.

    ?lang=zh                  the page's language (app.chrome.i18n)
    ?run=<id>&key=<secret>    the session's run; a watcher's link has the id alone (app.state.runs)
    ?train=d_model:64,…       a link that fills the Train form: "train this" (app.parts.train_form)
    ?compare=<id>,<id>        the runs kept for comparison (app.parts.compare)
    ?lesson=N                 the lesson's step, from 1 (app.parts.lesson_links)
    ?class=K7Q2               the class this session joined (app.views.board); &teacher=<secret> only in a
                              teacher's own link, taken out of the address once read
"""
from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

LANG = "lang"
RUN, KEY = "run", "key"
TRAIN = "train"
COMPARE = "compare"
LESSON = "lesson"
CLASS, TEACHER = "class", "teacher"


def link(**params: str) -> str:
    """This page's address with only `params` as its query: a link to share or to keep."""
    base = (st.context.url or "").split("?")[0]  # the address the browser used: right behind a proxy too
    return f"{base}?{urlencode(params, safe=':,')}"
