"""The teacher leading the class through the lesson: the step everyone follows, each step's quick
check question, the learners' answers and their tally, and the reveal of the right answer.

Learners answer the step's question anonymously; the teacher sees the counts, which the reveal
freezes: they are the class's answer until the teacher hides the answer again, which reopens the
question. A learner is kept only as their tag under the class's salt (roster.py): one answer per
learner per step, across a refresh and a restart. With a store, the step, the reveals and every
answer are written behind, and a new process opens with them.
"""
from __future__ import annotations

from dataclasses import dataclass

from .roster import BoardError, Roster

MAX_OPTIONS = 8     # a check question's options, at most
MAX_ANSWERS = 200   # learners' answers kept for one step of the lesson


@dataclass(frozen=True)
class LessonNow:
    """Where the teacher is leading the class: a lesson step from 1 (None: not leading), the steps
    whose question has been revealed, and a number that changes with either, so that a follower
    redraws only when it changed."""

    step: int | None
    revealed: frozenset[int]
    version: int


class Leading(Roster):
    """The lesson's part of Classes: the teacher leads and reveals, learners follow and answer."""

    # -- the teacher --------------------------------------------------------------------------
    def lead(self, code: str, teacher_key: str | None, step: int | None) -> None:
        """Lead the class to lesson `step` (from 1), or stop leading (None)."""
        board = self._as_teacher(code, teacher_key)
        if step is not None and (not isinstance(step, int) or step < 1):
            raise BoardError("There is no lesson step {step}.", step=step)
        with board._lock:
            if board.lesson_step != step:
                board.lesson_step = step
                board.lesson_version += 1  # the same step led again leaves the followers' pages as they are
        self._save(board, lesson_step=step)

    def reveal(self, code: str, teacher_key: str | None, step: int, revealed: bool = True) -> None:
        """Show the right answer of `step`'s question to the class, which freezes its counts (`answer`);
        or hide it again, which reopens the question: a learner's next change counts again."""
        board = self._as_teacher(code, teacher_key)
        with board._lock:
            if (step in board.revealed) != revealed:
                board.revealed.symmetric_difference_update({step})  # in or out, whichever it is not yet
                board.lesson_version += 1
            shown = sorted(board.revealed)  # copied under the lock: the store writes it after it is let go
        self._save(board, revealed=shown)

    def counts(self, code: str, teacher_key: str | None, step: int, options: int) -> list[int]:
        """How many learners chose each of the `options` options of `step`'s question: counts
        alone, for the teacher; no one is named."""
        board = self._as_teacher(code, teacher_key)
        with board._lock:
            chosen = list(board.answers.get(step, {}).values())  # the options alone: the tags stay behind
        # an option past `options` (a question shortened since) is kept but counted nowhere
        return [chosen.count(option) for option in range(options)]

    # -- learners -----------------------------------------------------------------------------
    def lesson(self, code: str) -> LessonNow:
        """Where the teacher leads the class now: cheap, what each follower polls."""
        board = self.find(code)
        with board._lock:
            # a frozen copy: the follower compares it with the last one it drew, while the teacher moves on
            return LessonNow(board.lesson_step, frozenset(board.revealed), board.lesson_version)

    def answer(self, code: str, learner: str, step: int, option: int | None) -> bool:
        """A learner's answer to `step`'s question (None takes it back); a later answer replaces
        an earlier one. It counts with no name; `learner` only keeps one answer per learner. Once
        the step is revealed its counts are the class's answer: a change is not counted (False),
        until the teacher reopens the question."""
        board = self.find(code)
        if option is not None and not (isinstance(option, int) and 0 <= option < MAX_OPTIONS):
            raise BoardError("That is not one of the question's options.")
        tag = board.learner_tag(learner)
        with board._lock:
            # frozen once revealed: a learner who has seen the right answer could otherwise switch
            # to it, and the tally would show the answer, not what the class thought
            if step in board.revealed:
                return False
            given = board.answers.setdefault(step, {})
            if option is None:
                given.pop(tag, None)
            elif tag in given or len(given) < MAX_ANSWERS:  # a learner already counted may always change
                given[tag] = option
            else:
                raise BoardError("This question already has {limit} answers, the most one class keeps.",
                                 limit=MAX_ANSWERS)
        if self.store is not None:
            self.store.classes.save_answer(board.code, step, tag, option)  # None deletes the stored answer too
        return True

    def answered(self, code: str, learner: str, step: int) -> int | None:
        """The option this learner's counted answer to `step`'s question chose, if any."""
        board = self.find(code)
        with board._lock:
            return board.answers.get(step, {}).get(board.learner_tag(learner))
