"""Every link the app draws for someone else carries no language: the class's link, the Train form's
link to its settings, a run's read-only link, the comparison's link and the teacher's copied link.
Whoever opens one reads the page in their own browser's language (or their own choice), never the
sender's. Links a person follows themselves (the sidebar, Back and Next) may keep theirs.

    pytest tests/app/test_shared_links.py
"""
from __future__ import annotations

import re

import pytest

from helpers.apptest import home, page, tiny_settings, wait_finished
from app.chrome.site import BOARD, EXPERIMENTS, TRAIN
from app.state import classroom

pytestmark = [pytest.mark.trains, pytest.mark.slow]
LINK = re.compile(r"\?[a-z]+=")  # what a drawn link to this app looks like: its query


def shared_links(at) -> list[str]:
    """The links a page draws to be copied and sent: its code blocks holding an address of the app,
    and the addresses its copy buttons build."""
    links = [c.value for c in at.code if LINK.search(c.value)]
    for element in at.get("html"):  # a copy button's script: location.pathname + "?class=" + code + "&teacher=" + …
        for built in re.findall(r"location\.pathname \+ ([^;:]*)", element.proto.body):
            links.append("".join(re.findall(r'"([^"]*)"', built)))
    return links


def test_no_link_for_someone_else_carries_the_language():
    teacher = page(home("zh"), BOARD.script)  # a teacher and a learner who read the app in Chinese
    teacher.button(key="board_start").click().run()
    code = teacher.session_state[classroom.CLASS_KEY]
    teacher.session_state["board_tab"] = "教师控制"  # the controls tab, with the copy button
    teacher.run()
    links = shared_links(page(teacher, BOARD.script)) + shared_links(teacher)

    learner = tiny_settings(page(home("zh", **{"class": code}), TRAIN.script), max_steps=20)
    learner.button(key="start").click().run()
    wait_finished(learner)
    learner.run()
    links += shared_links(learner)
    learner.button(key="keep_run").click().run()  # kept for the comparison, whose link Experiments draws
    links += shared_links(page(learner, EXPERIMENTS.script)) + shared_links(page(learner, BOARD.script))

    kinds = {kind for link in links for kind in ("class", "teacher", "train", "run", "compare")
             if re.search(rf"[?&]{kind}=", link)}
    assert kinds == {"class", "teacher", "train", "run", "compare"}, links  # every kind of shared link was read
    assert not [link for link in links if "lang" in link], links
