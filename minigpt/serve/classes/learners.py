"""The learners of a class that lasts the term: who has opened it (a tag, never a name), the personal
code that carries a learner to another device, the runs they started in it, and erasing one of them.

A learner is the token their browser keeps for the class. A token is twelve characters of the code
alphabet, 60 random bits, and it is also the learner's personal code (`personal_code` groups it for
reading): typed on a second device, it makes that browser the same learner. The server keeps only
its tag under the class's salt, so the code is checked against the learners the class has seen, and
a wrong code teaches nothing but "no". Guessing is bounded twice: PERSONAL_CODE_TRIES wrong codes
per asker and CLASS_CODE_TRIES per class in each TRY_WINDOW_SECONDS; at 60 bits a guess lands once
in 10^16 tries.

A run a learner starts in the class is noted with a random salt; its owner key is derived from the
learner's token and that salt (`run_key`), so the learner, on any device that holds their token,
opens their runs again, and the server never holds a key that opens them.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections import deque

from .codes import CODE_ALPHABET
from .roster import BoardError, ClassBoard, Roster, wall

TOKEN_LENGTH = 12             # characters of a learner token: 60 bits from the 32-letter code alphabet
PERSONAL_CODE_TRIES = 5       # wrong personal codes one asker may type per window
# wrong personal codes a whole class may see per window, from any asker: high enough that one learner's
# typos never lock the class out, low enough that a term of guessing finds a 60-bit code about once in 10^8
CLASS_CODE_TRIES = 300
TRY_WINDOW_SECONDS = 10 * 60
MAX_LEARNERS = 500            # learners one class keeps (what a personal code can be checked against)
MAX_NOTES = 20                # runs one learner finds again in a class: the newest (older ones age as any run)
SEEN_SAVE_SECONDS = 24 * 3600  # a learner's last visit is written at most once a day


def new_learner_token() -> str:
    """A fresh learner token, which is also the learner's personal code."""
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(TOKEN_LENGTH))


def personal_code(token: str) -> str:
    """A token grouped in fours, as the page shows it: K7Q2-9XMA-3HPD."""
    return "-".join(token[i:i + 4] for i in range(0, len(token), 4))


def typed_token(typed: str) -> str:
    """A personal code as typed: dashes and spaces out, upper case (the alphabet has no look-alikes)."""
    return "".join(c for c in typed.upper() if c not in "- \t")


def run_key(token: str, salt: bytes) -> str:
    """The owner key of a learner's run: derived from their token and the run's salt, never kept."""
    digest = hmac.new(token.encode(), b"minigpt-run:" + salt, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


class Learners(Roster):
    """The learners' part of Classes: seen, claimed by personal code, their runs, erased."""

    def _learners_init(self) -> None:
        self._tries: dict[tuple[str, bytes], deque[float]] = {}  # (code, asker's tag or b"") -> wrong tries' times

    def seen(self, code: str, learner: str) -> None:
        """This learner opened the class now: kept (first and last seen, a day's precision) so that their
        personal code is known to the class."""
        board = self.find(code)
        self._see(board, board.learner_tag(learner))

    def _see(self, board: ClassBoard, tag: bytes) -> None:
        now = self._clock()
        with board._lock:
            saved = board.learners.get(tag)
            if saved is None and len(board.learners) >= MAX_LEARNERS:
                return  # a class that large: the newest learners' codes stay on their own devices
            if saved is not None and now - saved < SEEN_SAVE_SECONDS:
                return
            board.learners[tag] = now
        if self.store is not None:
            self.store.classes.save_learner(board.code, tag, wall(now, now), first=saved is None)

    def seen_within(self, seconds: float) -> int:
        """The learners of the open classes who opened theirs within the last `seconds` (a visit is
        stamped at most once per SEEN_SAVE_SECONDS, so a stamp may be that much older than the visit)."""
        now = self._clock()
        with self._lock:  # the roster's lock, then each class's: never both held at once
            boards = list(self._classes.values())
        seen = 0
        for board in boards:
            with board._lock:
                seen += sum(now - at < seconds for at in board.learners.values())
        return seen

    def claim(self, code: str, typed: str, asker: str) -> str:
        """The learner token for a personal code typed on another device; BoardError when no learner of
        the class has it, or when `asker` (the token of the browser that types it, which a refresh keeps)
        or the class has typed too many wrong codes."""
        board = self.find(code)
        now = self._clock()
        asker_tag = board.learner_tag(asker)  # kept as a tag, as every learner is
        wait = self._refused_for(board.code, asker_tag, now)
        if wait:
            raise BoardError("Too many wrong codes: try again in {minutes} minutes.", minutes=-(-int(wait) // 60))
        token = typed_token(typed)
        with board._lock:
            known = board.learner_tag(token) in board.learners
        if not known:
            with self._lock:
                for who in (asker_tag, b""):
                    self._tries.setdefault((board.code, who), deque()).append(now)
            raise BoardError("No learner of class {code} has that personal code. Check it and type it again.",
                             code=board.code)
        return token

    def _refused_for(self, code: str, asker: bytes, now: float) -> float:
        """Seconds until `asker` may type a code again (0: now): while they, or the whole class (b"" as
        the asker), have had their limit of wrong codes within the window."""
        wait = 0.0
        with self._lock:
            if len(self._tries) > 4096:  # askers who never came back: their tries are let go once old
                for old in [k for k, tries in self._tries.items() if not tries or now - tries[-1] >= TRY_WINDOW_SECONDS]:
                    del self._tries[old]
            for who, limit in ((asker, PERSONAL_CODE_TRIES), (b"", CLASS_CODE_TRIES)):
                tries = self._tries.setdefault((code, who), deque())
                while tries and now - tries[0] >= TRY_WINDOW_SECONDS:
                    tries.popleft()
                if not tries:  # an asker's tries go once they are old: sessions come and go all term
                    del self._tries[(code, who)]
                    continue
                if len(tries) >= limit:  # the oldest of the last `limit` tries leaves the window first
                    wait = max(wait, TRY_WINDOW_SECONDS - (now - tries[-limit]))
        return wait

    def note_run(self, code: str, learner: str, run_id: str, salt: bytes) -> None:
        """A run this learner started in the class, to be found again from their token: their newest
        MAX_NOTES (an older note goes, and its run ages as any run does)."""
        board = self.find(code)
        tag = board.learner_tag(learner)
        self._see(board, tag)
        with board._lock:
            if tag not in board.learners:
                return  # a class past MAX_LEARNERS: its newest learners keep their runs by their address alone
            board.runs[run_id] = (tag, salt)
            theirs = [noted for noted, (owner, _salt) in board.runs.items() if owner == tag]
            dropped = theirs[:-MAX_NOTES]
            for noted in dropped:
                del board.runs[noted]
        if self.store is not None:
            self.store.classes.save_learner_run(board.code, run_id, tag, salt, time.time(), dropped=dropped)

    def learner_runs(self, code: str, learner: str) -> list[tuple[str, bytes]]:
        """This learner's runs in the class, oldest first: (run id, salt) for run_key."""
        board = self.find(code)
        tag = board.learner_tag(learner)
        with board._lock:
            return [(run_id, salt) for run_id, (owner, salt) in board.runs.items() if owner == tag]

    def erase_learner(self, code: str, teacher_key: str | None, *, learner: str | None = None,
                      post_id: str | None = None) -> list[str]:
        """Erase one learner from the class: the teacher names them by a run they posted (`post_id`), or
        a learner erases themselves (`learner`, their token). Every post, answer, noted run and seen-row
        of theirs goes, in memory and in the store; returns their runs' ids, for the caller to forget."""
        board = self._as_teacher(code, teacher_key) if post_id is not None else self.find(code)
        with board._lock:
            if post_id is not None:
                post = board.posts.get(post_id) or next(
                    (p for posts in board.archive.values() for p in posts if p.post_id == post_id), None)
                if post is None:
                    return []
                tag = post.learner
            else:
                tag = board.learner_tag(learner or "")
            runs = self._forget_learner(board, tag)
        if self.store is not None:
            self.store.classes.delete_learner(board.code, tag, runs)
        return runs

    @staticmethod
    def _forget_learner(board: ClassBoard, tag: bytes) -> list[str]:
        """Take a learner out of every part of the class (its lock held); their runs' ids."""
        runs = [post.run_id for post in board.posts.values() if post.learner == tag]
        for post_id in [post.post_id for post in board.posts.values() if post.learner == tag]:
            del board.posts[post_id]
            if board.pinned == post_id:
                board.pinned = None
        for number, posts in board.archive.items():
            runs += [post.run_id for post in posts if post.learner == tag]
            board.archive[number] = [post for post in posts if post.learner != tag]
        for answers in (board.answers, *board.past.values()):
            for given in answers.values():
                given.pop(tag, None)
        runs += [run_id for run_id, (owner, _salt) in board.runs.items() if owner == tag]
        board.runs = {run_id: noted for run_id, noted in board.runs.items() if noted[0] != tag}
        board.learners.pop(tag, None)
        board.version += 1
        return list(dict.fromkeys(runs))
