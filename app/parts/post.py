"""Posting a run to the class board, on Train and Experiments: under a name the learner chooses,
and under the button, for as long as the run is on the board, the name it is there under. And the
class's challenge as a learner reads it: on the board, and on Train before Start, whether a run of
the form's settings would meet it."""
from __future__ import annotations

import streamlit as st

from minigpt import GPTConfig, TrainConfig
from minigpt.serve import CLASS_CORPUS, MAX_NAME, BoardError, Challenge, ClassCorpus

from app.chrome import fields
from app.chrome.i18n import _, error_text
from app.chrome.text import md, word_list
from app.state import runs
from app.state.classroom import CLASS_KEY, POSTS_KEY, board_view, classes, learner

NAME_KEY = "board_post_name"       # the name box's key


def post_button(entry, owner: bool) -> None:
    """On Train and Experiments, for a session in a class that owns a run: post it under a name."""
    code = st.session_state.get(CLASS_KEY)
    if not code or entry is None or not owner:
        return
    name_col, button_col = st.columns([3, 1], vertical_alignment="bottom")
    name = fields.short_text(_("Name on the class board"), MAX_NAME, key=NAME_KEY, where=name_col,
                             help=_("Only this name, the run's settings, curves and samples are shown."))
    if button_col.button(_("Post to the class board"), key="board_post",
                         help=_("Class {code}: your run joins everyone's chart. Withdraw it there at any time.",
                                code=code)):
        own = st.session_state.get(runs.OWN_RUN_KEY)
        facts = entry.facts
        try:
            post_id, post_key = classes().post(code, entry, own[1] if own else None, name, learner=learner(),
                                               corpus=facts.corpus if facts is not None else "")
        except BoardError as err:
            st.error(md(error_text(err)))
            return
        mine = st.session_state.setdefault(POSTS_KEY, {})
        mine[post_id] = post_key or mine.get(post_id)  # a renamed post's key was given out when it was posted
        st.toast(_("Posted to the board of class {code}.", code=code))
    posted(code, entry)


def posted(code: str, entry) -> None:
    """Under the post button, for as long as the run is on the board: under which name. A toast alone
    goes after a few seconds, or sooner when the page draws itself again (the run has just finished)."""
    try:
        rows = board_view(code).rows
    except BoardError:  # the class has ended: the board page says so
        return
    # only its owner posts a run: any post of it is this session's, from this visit or an earlier one
    names = [row.label for row in rows if row.run_id == entry.run_id]
    if names:
        st.caption(_("Your run is on the board of class {code} as {name}.", code=code, name=md(names[0])))


def challenge_text(challenge: Challenge, class_corpus: ClassCorpus | None = None) -> str:
    """The challenge's constraints in a phrase: "on course-zh, within 300 steps"."""
    parts = []
    if challenge.corpus == CLASS_CORPUS:
        if class_corpus is not None:  # while the class has no text of its own, the challenge asks for none
            parts.append(_("on the class's text {name}", name=md(class_corpus.label)))
    elif challenge.corpus is not None:
        parts.append(_("on {corpus}", corpus=challenge.corpus))
    if challenge.max_steps is not None:
        parts.append(_("within {steps:,} steps", steps=challenge.max_steps))
    if challenge.max_params is not None:
        parts.append(_("with at most {params:,} parameters", params=challenge.max_params))
    return word_list(parts) if parts else _("any run")


def challenge_note(corpus_key: str, model: GPTConfig, train: TrainConfig) -> None:
    """On Train, before Start, in a class with a challenge: whether a run of these settings (`model`
    sized for the corpus) would meet it, and if not, what does not fit."""
    code = st.session_state.get(CLASS_KEY)
    if not code:
        return
    try:
        board = classes().find(code)
    except BoardError:  # the class has ended: the board page says so
        return
    challenge, class_corpus = board.challenge, board.corpus
    if challenge is None:
        return
    misfits = challenge.misfits(corpus_key, model, train, class_corpus)
    if misfits:
        st.warning(_("A run of these settings would not meet the class's challenge ({challenge}): {reasons}. Change "
                     "them before Start, or the board lists your run outside the challenge.",
                     challenge=challenge_text(challenge, class_corpus),
                     reasons=md("; ".join(error_text(m) for m in misfits))))
    else:
        st.caption(_("A run of these settings meets the class's challenge ({challenge}).",
                     challenge=challenge_text(challenge, class_corpus)))
