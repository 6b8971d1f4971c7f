"""minigpt/serve/line/limit.py and its wiring (server.learners_seen_lately): how many runs may wait in line
for a training slot, from the slots and the learners the server's classes saw lately, and the refusal
where a run would wait longer than a lesson lasts (issue 61: a lecture hall of 300 pressing Start).

Time is a clock the test moves by hand (conftest.py's `clock`): the registry's and the classes' both.

    pytest tests/minigpt/serve/test_line_limit.py
"""
from __future__ import annotations

import threading

from helpers.tiny import tiny_plan
from helpers.scripted_run import Scripted
from helpers.waiting import wait_until

from minigpt.serve.classes.classes import Classes
from minigpt.serve.classes.learners import new_learner_token
from minigpt.serve.line.limit import waiting_places
from minigpt.serve.line.registry import RunLimitError, RunRegistry
from minigpt.serve.server import learners_seen_lately

DAY = 24 * 3600


def _class_of(classes: Classes, learners: int) -> str:
    """A class opened now, each of its `learners` having opened it once."""
    code = classes.open().code
    for _learner in range(learners):
        classes.seen(code, new_learner_token())
    return code


def _start(registry: RunRegistry):
    return registry.submit(tiny_plan(max_steps=300), corpus="c", build=Scripted)


def test_the_places_are_one_per_learner_and_one_per_slot_never_fewer_than_the_floor():
    assert waiting_places(slots=16, class_learners=300) == 316
    assert waiting_places(slots=200, class_learners=0) == 200
    assert waiting_places(slots=4, class_learners=30) == 120      # a small class: the floor
    assert waiting_places(slots=16, class_learners=0) == 120      # no class at all
    assert waiting_places(slots=16, class_learners=300, set_limit=50) == 50  # MINIGPT_MAX_WAITING wins


def test_the_limit_follows_the_learners_seen_lately_and_the_slots_as_the_clock_moves(clock):
    classes = Classes(clock=clock)
    registry = RunRegistry(max_runs=16, clock=clock, dispatcher=False,
                           class_learners=lambda: learners_seen_lately(classes))
    try:
        assert registry.max_waiting == 120  # no class yet
        hall = _class_of(classes, 300)
        assert registry.max_waiting == 316
        clock.now += 2 * DAY - 1  # a visit is stamped once a day: two days count everyone of the last one
        assert registry.max_waiting == 316
        clock.now += 2
        assert registry.max_waiting == 120  # the hall's learners have not come back: their places go
        _class_of(classes, 150)  # another class meets
        assert registry.max_waiting == 166
        classes.seen(hall, new_learner_token())  # one learner of the hall opens it again
        assert registry.max_waiting == 167
        registry.resize(40)  # the cluster grew
        assert registry.max_waiting == 191
    finally:
        registry.stop_all()


def test_a_limit_set_by_whoever_runs_the_server_overrides_the_class(clock):
    registry = RunRegistry(max_runs=16, max_waiting=50, clock=clock, dispatcher=False, class_learners=lambda: 300)
    try:
        assert registry.max_waiting == 50
    finally:
        registry.stop_all()


def _hall_presses_start(registry: RunRegistry, learners: int) -> list[RunLimitError]:
    """`learners` Starts at once, each on a thread of its own: the refusals."""
    refused: list[RunLimitError] = []
    ready = threading.Barrier(learners)

    def press() -> None:
        ready.wait()
        try:
            _start(registry)
        except RunLimitError as err:
            refused.append(err)

    pressing = [threading.Thread(target=press) for _learner in range(learners)]
    for thread in pressing:
        thread.start()
    for thread in pressing:
        thread.join()
    return refused


def test_a_hall_of_300_pressing_start_at_once_on_16_slots_is_refused_nobody(clock):
    classes = Classes(clock=clock)
    _class_of(classes, 300)
    registry = RunRegistry(max_runs=16, clock=clock, class_learners=lambda: learners_seen_lately(classes))
    try:
        assert _hall_presses_start(registry, 300) == []
        wait_until(lambda: registry.active_count() == 16, "the dispatcher to fill the 16 slots")
        assert registry.waiting_count() == 284
    finally:
        registry.stop_all()


def test_the_same_hall_on_a_server_that_does_not_count_its_class_is_refused_past_the_floor(clock):
    registry = RunRegistry(max_runs=16, clock=clock, dispatcher=False)
    try:
        refused = [_try(registry) for _learner in range(300)]
        assert refused.count(None) == 16 + 120
        assert str(refused[-1]) == ("All 120 places in the line for training on this server are taken. Try again "
                                    "when the line is shorter.")  # no pace yet: no estimate to give
    finally:
        registry.stop_all()


def _try(registry: RunRegistry) -> RunLimitError | None:
    try:
        _start(registry)
    except RunLimitError as err:
        return err
    return None


def test_a_run_that_would_wait_longer_than_a_lesson_is_refused_saying_why(clock):
    registry = RunRegistry(max_runs=16, clock=clock, dispatcher=False, class_learners=lambda: 300)
    registry.speeds.finished(tiny_plan(max_steps=300).shape, 300, 600.0)  # a whole run here: 10 minutes
    try:
        outcomes = [_try(registry) for _learner in range(300)]
        # 16 train for 600 s; the 16 runs behind each round of 16 start 600 s later: with 176 to 191 runs
        # ahead a run starts in 12 × 600 s = 2 h, the longest wait; with 192 ahead, in 13 × 600 s
        assert outcomes.count(None) == 16 + 192 and outcomes[:208] == [None] * 208
        refusal = outcomes[208]
        assert refusal.params == {"minutes": 130.0, "longest": 120.0}
        assert str(refusal) == ("This server cannot start a new run soon enough: one that joined the line now would "
                                "start in about 130 minutes, and a run may wait at most 120 minutes here. Try again "
                                "when the line is shorter.")
        assert registry.waiting_count() == 192
    finally:
        registry.stop_all()


def test_a_rough_estimate_turns_nobody_away(clock):
    registry = RunRegistry(max_runs=1, clock=clock, dispatcher=False)
    other = tiny_plan(max_steps=300, d_model=32).shape
    registry.speeds.finished(other, 300, 60_000.0)  # only another size measured: this size's figure is scaled
    try:
        assert [_try(registry) for _learner in range(3)] == [None] * 3
        assert registry.estimate(_start(registry)).rough and registry.waiting_count() == 3
    finally:
        registry.stop_all()
