"""The runs posted to a class's board: a learner posts a run of their own under a name and withdraws
it; the teacher hides a post or pins it to the top, and starts a new round ("week 3"), which archives
the posts so far under their round: the board of a term-long class stays readable, and nothing is lost.

A learner posts a run of their own (the run's owner key proves it is theirs) under a name, and gets
the post's own key back: only that key, or the run's, withdraws it. A post shows the run's name,
settings, curves and latest sample, nothing else. Posts are bounded: `max_posts` runs on one board,
`max_per_learner` posts by one learner on one board. With a store, each post is a row written behind.
"""
from __future__ import annotations

import secrets
import unicodedata
from dataclasses import asdict
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...lab.run_records import RunRecord
from ..store import keys
from .board import Post, Round
from .roster import BoardError, ClassBoard, Roster, wall

if TYPE_CHECKING:
    from ..line.entry import RunEntry

MAX_NAME = 40  # characters of a post's name
EMOJI_JOINERS = {"\u200d", "\ufe0f"} | {chr(c) for c in range(0xE0020, 0xE0080)}  # ZWJ, emoji style, flag tags


def plain_name(name: str) -> str:
    """A post's name as plain text: control and format characters out (bidi overrides and
    isolates among them), spaces collapsed, at most MAX_NAME characters. The joiners inside an
    emoji sequence stay (the zero-width joiner of 👩‍👩‍👧‍👦, the emoji-style selector of ❤️, a
    flag's tags): each only after a symbol or another joiner. Markup stays as typed characters:
    every place that shows it escapes it."""
    kept: list[str] = []
    for c in name:
        if unicodedata.category(c)[0] != "C":
            kept.append(c)
        # a joiner is kept only where it joins (a keycap's digit counts: 1️⃣): alone, it would let two names
        # that look the same differ
        elif c in EMOJI_JOINERS and kept and (unicodedata.category(kept[-1]) in ("So", "Sk")
                                              or kept[-1] in EMOJI_JOINERS or kept[-1] in "#*0123456789"):
            kept.append(c)
        else:
            kept.append(" ")  # a space, not nothing: "a\nb" reads as two words, not one
    return " ".join("".join(kept).split())[:MAX_NAME].strip()


def read_run(entry: RunEntry, name: str, snap=None) -> tuple[RunRecord, str, str, int]:
    """A run's record (as the comparison keeps it), latest sample, state and step, read now."""
    snap = snap if snap is not None else entry.run.snapshot()
    trainer = entry.run.trainer
    record = RunRecord.of_run(name, entry.corpus, trainer.model_config, trainer.cfg, snap)
    return record, snap.evals[-1].sample if snap.evals else "", snap.state, snap.step


class Posting(Roster):
    """The posts' part of Classes: learners post and withdraw runs, the teacher hides and pins them."""

    max_posts: int          # runs on one board, at most (set by Classes)
    max_per_learner: int    # posts by one learner on one board, at most
    _positions: Iterator[int]  # posting order across classes: what the store sorts posts by

    # -- the teacher --------------------------------------------------------------------------
    def hide(self, code: str, teacher_key: str | None, post_id: str, hidden: bool = True) -> None:
        board = self._as_teacher(code, teacher_key)
        with board._lock:
            if post_id in board.posts:
                board.posts[post_id].hidden = hidden
                board.version += 1
        if self.store is not None and post_id in board.posts:  # a post withdrawn meanwhile has no row left
            self.store.classes.update_post(post_id, hidden=hidden, wait=True)

    def pin(self, code: str, teacher_key: str | None, post_id: str | None) -> None:
        """Pin one post to the top of the board (None: unpin)."""
        board = self._as_teacher(code, teacher_key)
        with board._lock:
            board.pinned = post_id if post_id in board.posts else None  # a post withdrawn meanwhile unpins
            board.version += 1
        self._save(board, pinned=board.pinned)

    def new_round(self, code: str, teacher_key: str | None, name: str) -> Round:
        """Start the board's next round under `name` (plain text, as a post's name): the posts so far
        are archived under their round, the board starts empty, and the limits count afresh."""
        board = self._as_teacher(code, teacher_key)
        now = self._clock()
        with board._lock:
            board.archive[board.rounds[-1].number] = list(board.posts.values())
            board.posts.clear()
            board.pinned = None
            started = Round(board.rounds[-1].number + 1, plain_name(name), wall(now, now))
            board.rounds.append(started)
            board.version += 1
        if self.store is not None:
            self.store.classes.save_round(board.code, asdict(started))
        self._save(board, round=started.number, pinned=None)
        return started

    def rounds(self, code: str) -> tuple[Round, ...]:
        """The board's rounds, oldest first: the last one is the board shown now."""
        board = self.find(code)
        with board._lock:
            return tuple(board.rounds)

    # -- learners -----------------------------------------------------------------------------
    def post(self, code: str, entry: RunEntry, run_key: str | None, name: str, *, learner: str,
             corpus: str) -> tuple[str, str]:
        """Post the run `entry` (its owner's key proves it is the poster's) under `name`; returns
        the post's id and its key, which alone withdraws it (None where the run was posted already:
        posting it again renames its post, from this visit or a later one with the run's key)."""
        board = self.find(code)
        if not entry.is_owner(run_key):
            raise BoardError("Only the browser session that started a run can post it to the class board.")
        name = plain_name(name) or entry.run_id  # an empty name, or one of control characters only: the run's id
        tag = board.learner_tag(learner)
        with board._lock:
            for post in board.posts.values():
                # posted already, by this learner or by a later visit that holds the run's key: a rename
                if post.run_id == entry.run_id and (post.learner == tag or keys.matches(run_key, post.run_key)):
                    post.name = plain_name(name)
                    board.version += 1
                    board.last_active = self._clock()
                    break
            else:
                if len(board.posts) >= self.max_posts:
                    raise BoardError("This class board already shows {limit} runs, its limit.", limit=self.max_posts)
                # counted by the learner's tag, not their session: a refresh gives no one more posts
                if sum(p.learner == tag for p in board.posts.values()) >= self.max_per_learner:
                    raise BoardError("You have posted {limit} runs to this board, the most one learner may: "
                                     "withdraw one to post another.", limit=self.max_per_learner)
                post_key = keys.new_key()  # handed back this once: the board keeps only its digest
                # the id goes in page addresses and widget keys, no secret: the post's key is what withdraws it
                post = Post(secrets.token_urlsafe(9), name, entry.run_id, keys.hashed(post_key), keys.hashed(run_key),
                            tag, corpus, *read_run(entry, name), round=board.rounds[-1].number)
                board.posts[post.post_id] = post
                board.version += 1
                board.last_active = self._clock()
                self._save_post(board, post)
                return post.post_id, post_key
        if self.store is not None:  # a rename: only the name's column changes
            self.store.classes.update_post(post.post_id, name=post.name, wait=True)
        return post.post_id, None

    def withdraw(self, code: str, post_id: str, key: str | None, *, learner: str | None = None) -> None:
        """Take a post off the board: `key` is the post's own key, or the posted run's owner key
        (which a learner's address keeps across a refresh); or `learner` is the token of who posted it
        (next week, in the same browser or one their personal code moved)."""
        board = self.find(code)
        tag = board.learner_tag(learner) if learner else None
        with board._lock:
            post = board.posts.get(post_id)
            if post is None:
                return  # withdrawn already (a second click, another tab): nothing to refuse
            if not (keys.matches(key, post.key) or keys.matches(key, post.run_key) or post.learner == tag):
                raise BoardError("Only the learner who posted a run can withdraw it.")
            del board.posts[post_id]
            if board.pinned == post_id:
                board.pinned = None
            board.version += 1
            board.last_active = self._clock()
        if self.store is not None:
            self.store.classes.delete_post(post_id)

    def posts_of(self, code: str, learner: str) -> list[str]:
        """The ids of this learner's posts on the board's current round."""
        board = self.find(code)
        tag = board.learner_tag(learner)
        with board._lock:
            return [post.post_id for post in board.posts.values() if post.learner == tag]

    def _save_post(self, board: ClassBoard, post: Post, wait: bool = True) -> None:
        """A new post's whole row (`wait`), or what a read of its run changed (not waited for)."""
        if self.store is None:
            return
        from ..store.codecs import record_json

        self.store.classes.save_post(board.code, {
            "post_id": post.post_id, "position": next(self._positions), "name": post.name, "run_id": post.run_id,
            "post_key": post.key, "run_key": post.run_key, "learner": post.learner, "corpus": post.corpus,
            "record": record_json(post.record), "sample": post.sample, "state": post.state, "step": post.step,
            "hidden": post.hidden, "round": post.round}) if wait else self.store.classes.update_post(
            post.post_id, record=record_json(post.record), sample=post.sample, state=post.state, step=post.step)
