"""minigpt/serve/host/turns.py: requests served first come, first served, `slots` at a time, each able to
say how many are ahead; a place given up lets the next one go; a nested turn never waits for itself.

Every wait here is on the queue's own state (a thread queued, a turn taken), never on time.

    pytest tests/minigpt/serve/test_turns.py
"""
from __future__ import annotations

import threading

import pytest

from helpers.waiting import wait_until
from minigpt.serve.host.turns import TurnQueue


class Request(threading.Thread):
    """A request that takes its turn, says each time how many are ahead, and holds its turn until
    `release` is set."""

    def __init__(self, queue: TurnQueue, name: str, served: list, fail_on_wait: bool = False):
        super().__init__(name=name, daemon=True)
        self.queue, self.served, self.fail_on_wait = queue, served, fail_on_wait
        self.told: list[int] = []
        self.release = threading.Event()
        self.error: Exception | None = None

    def on_wait(self, ahead: int) -> None:
        self.told.append(ahead)
        if self.fail_on_wait:
            raise RuntimeError("the learner left")

    def run(self) -> None:
        try:
            with self.queue.turn(on_wait=self.on_wait, poll=0.01):
                self.served.append(self.name)
                self.release.wait()
        except RuntimeError as err:
            self.error = err


def queued(queue: TurnQueue, served: list, names: str, **kwargs) -> list[Request]:
    """Requests started one after another, each in the queue before the next comes."""
    requests = []
    for name in names:
        request = Request(queue, name, served, **kwargs)
        before = sum(queue.size())
        request.start()
        wait_until(lambda: sum(queue.size()) == before + 1, f"{name} in the queue")
        requests.append(request)
    return requests


def test_one_slot_serves_in_the_order_of_arrival_and_each_waiting_request_knows_how_many_are_ahead():
    queue, served = TurnQueue(slots=1), []
    first, *waiting = queued(queue, served, "abcd")
    wait_until(lambda: all(r.told for r in waiting), "every waiting request to be told")
    assert served == ["a"] and [r.told[0] for r in waiting] == [1, 2, 3]
    first.release.set()
    wait_until(lambda: served == ["a", "b"], "b's turn")
    wait_until(lambda: waiting[2].told[-1] == 2, "d told that the queue moved")
    assert waiting[2].told == [3, 2] and queue.size() == (1, 2)
    for request in waiting:
        request.release.set()
    for request in (first, *waiting):
        request.join()
    assert served == ["a", "b", "c", "d"] and queue.size() == (0, 0)


def test_two_slots_run_two_at_once_and_the_third_waits_behind_both():
    queue, served = TurnQueue(slots=2), []
    requests = queued(queue, served, "abc")
    wait_until(lambda: requests[2].told, "c told")
    assert served == ["a", "b"] and requests[2].told == [2] and not requests[0].told
    requests[1].release.set()
    wait_until(lambda: served == ["a", "b", "c"], "c's turn once b is done")
    for request in requests:
        request.release.set()
        request.join()


def test_a_request_whose_learner_left_gives_its_place_up():
    queue, served = TurnQueue(slots=1), []
    (holder,) = queued(queue, served, "a")
    gone = Request(queue, "b", served, fail_on_wait=True)
    gone.start()
    gone.join()  # it joined, was told one is ahead, and left
    assert gone.told == [1]
    assert isinstance(gone.error, RuntimeError) and queue.size() == (1, 0)  # not waiting any more
    (after,) = queued(queue, served, "c")
    holder.release.set()
    wait_until(lambda: served == ["a", "c"], "c served, b never")
    after.release.set()
    after.join()


def test_a_nested_turn_in_the_same_thread_passes_through():
    queue = TurnQueue(slots=1)
    done = threading.Event()

    def nested() -> None:
        with queue.turn(), queue.turn():  # would wait for itself forever without the pass-through
            done.set()

    thread = threading.Thread(target=nested, daemon=True)
    thread.start()
    wait_until(done.is_set, "the nested turn")
    thread.join()
    assert queue.size() == (0, 0)


def test_at_least_one_slot():
    with pytest.raises(ValueError, match="at least 1"):
        TurnQueue(slots=0)
