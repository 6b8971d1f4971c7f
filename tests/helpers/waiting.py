"""Waiting on a condition, never on time passing.

A test that sleeps and then asserts fails whenever the machine is busier than the sleep
assumed. `wait_until` polls the condition the assertion needs and returns as soon as it holds;
its deadline only bounds how long a test that has really failed takes to say so, so it is
generous. `parked` is the deterministic way to say "nothing more will happen": the training
thread is blocked at its gate, so its step cannot advance until someone lets it go.
`niceness` reads a thread's CPU priority as the kernel keeps it, `thread_niceness` every thread's
of another process.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEADLINE = 120.0  # seconds: a test that really fails says so after this long, a passing one never waits for it


def wait_until(condition: Callable[[], T], what: str = "the condition", timeout: float = DEADLINE) -> T:
    """Poll `condition` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:.0f} s for {what}; it never happened")
        time.sleep(0.01)


def _blocked_in(thread: threading.Thread, function: str) -> bool:
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


def parked(run) -> bool:
    """The run is paused and its thread waits at its gate: a step that was in flight when it was
    paused has landed or been dropped, and no other can start until someone resumes it. For a
    ProcessRun: the child has done the pause and said so, and a step in flight can no longer land."""
    if hasattr(run, "_process"):  # a ProcessRun: its child paused when the server's copy says so (serve/runs/process.py)
        with run._lock:
            return run._state == "paused" and not run._dead and run._status["done"] >= run._sent
    thread = run._thread
    return (run.state == "paused" and thread is not None and thread.is_alive()
            and _blocked_in(thread, "wait_until_running"))


def niceness(thread: threading.Thread) -> int:
    """A live thread's niceness as the kernel keeps it (Linux): field 19 of its /proc stat line."""
    with open(f"/proc/self/task/{thread.native_id}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[16])


def thread_niceness(pid: int) -> dict[str, int]:
    """Each live thread of process `pid`, by the name it gave the kernel: its niceness (Linux)."""
    threads = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError):  # a thread that ended in between
            with open(f"/proc/{pid}/task/{task}/stat") as stat:
                line = stat.read()
            threads[line[line.index("(") + 1: line.rindex(")")]] = int(line.rsplit(")", 1)[1].split()[16])
    return threads
