"""Turns: heavy requests of many sessions served first come, first served, a few at a time.

On a one-core server, thirty learners' computations started at once all finish late; served in
turn, the first finish early and none later than before. `TurnQueue(slots)` lets at most
`slots` requests run at once and the others wait in the order they came, each able to say how
many requests are ahead of it: what a page shows its learner instead of freezing. Plain
threading, no Streamlit: the app keeps one queue per process.

    queue = TurnQueue(slots=1)
    with queue.turn(on_wait=lambda ahead: print(f"{ahead} ahead of you")):
        compute()

A thread that already holds a turn passes through a nested `turn()` (a computation that asks for
another would otherwise wait for itself).
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

POLL_SECONDS = 0.25  # how often a waiting request looks again, so that on_wait can say the queue moved


class Ticket:
    """One request's place in a TurnQueue."""

    __slots__ = ()  # no fields: a ticket is its identity, two requests never share one


class TurnQueue:
    def __init__(self, slots: int = 1):
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self.slots = slots
        # one lock for both lists, notified at every move: a waiter wakes to run, or to say the queue moved
        self._cond = threading.Condition()
        self._waiting: list[Ticket] = []   # in the order they came
        self._running: list[Ticket] = []   # `slots` of them at most
        self._depth: dict[int, int] = {}   # thread -> turns it holds (nested)

    def join(self) -> Ticket:
        """A place at the end of the queue."""
        ticket = Ticket()
        with self._cond:
            self._waiting.append(ticket)
            self._promote()  # a free slot lets it run at once
        return ticket

    def ahead(self, ticket: Ticket) -> int:
        """Requests that run or wait before this one; 0 once it runs."""
        with self._cond:
            if ticket in self._running:
                return 0
            # the running ones count too: each has to finish before this one runs
            return len(self._running) + self._waiting.index(ticket)

    def wait(self, ticket: Ticket, timeout: float | None = None) -> bool:
        """Wait (at most `timeout` seconds) until the ticket's turn has come; whether it has."""
        with self._cond:
            return self._cond.wait_for(lambda: ticket in self._running, timeout)

    def leave(self, ticket: Ticket) -> None:
        """The request is done, or gave up its place: the next one may run."""
        with self._cond:
            # done (running) or given up (waiting): either way its place goes to the next
            if ticket in self._running:
                self._running.remove(ticket)
            elif ticket in self._waiting:
                self._waiting.remove(ticket)
            self._promote()

    def size(self) -> tuple[int, int]:
        """(running, waiting) now."""
        with self._cond:
            return len(self._running), len(self._waiting)

    @contextlib.contextmanager
    def turn(self, on_wait: Callable[[int], None] | None = None, poll: float = POLL_SECONDS) -> Iterator[None]:
        """Run the block in this request's turn. While it waits, on_wait(ahead) is called in the
        waiting thread each time the number ahead changes; an exception it raises (a page whose
        learner left) gives the place up."""
        me = threading.get_ident()  # turns are held by a thread: a nested turn() is asked by the same one
        with self._cond:
            nested = self._depth.get(me, 0) > 0
            if nested:
                self._depth[me] += 1
        if nested:
            try:
                yield
            finally:
                with self._cond:
                    self._depth[me] -= 1
            return
        ticket = self.join()
        try:
            shown = None
            # the first look does not wait, so on_wait tells the place at once; then every `poll`
            while not self.wait(ticket, 0 if shown is None else poll):
                ahead = self.ahead(ticket)
                if on_wait is not None and ahead != shown:
                    on_wait(ahead)
                shown = ahead  # said once per change, not once per poll
            with self._cond:
                self._depth[me] = 1  # from here on this thread's nested turns pass through
            try:
                yield
            finally:
                with self._cond:
                    del self._depth[me]
        finally:  # also when on_wait raised: a learner who left gives the place up
            self.leave(ticket)

    def _promote(self) -> None:
        """Let the first waiting requests run while there are free slots (the lock held)."""
        while self._waiting and len(self._running) < self.slots:
            self._running.append(self._waiting.pop(0))
        self._cond.notify_all()
