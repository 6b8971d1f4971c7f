"""A run whose step, pace and end the test sets by hand: what the line's tests train."""
from __future__ import annotations

from minigpt.serve.runs.run import RunSnapshot


class Scripted:
    """A run whose step, pace and end the test sets by hand (run.Run)."""

    def __init__(self, run_id: str, max_steps: int = 300):
        self.run_id, self.max_steps = run_id, max_steps
        self.step, self.elapsed, self._state = 0, 0.0, "idle"
        self.trainer = self  # what the registry reads of it: step and elapsed

    @property
    def state(self) -> str:
        return self._state

    def start(self, paused: bool = False) -> None:
        self._state = "paused" if paused else "running"

    def resume(self) -> None:
        self._state = "running"

    def pause(self) -> None:
        self._state = "paused"

    def run_steps(self, n: int) -> None:
        self.step += n

    def stop(self, timeout=None) -> None:
        self._state = "stopped"

    def close(self, timeout=None) -> None:
        self._state = "closed"

    def is_alive(self) -> bool:
        return self._state in ("running", "paused")

    def snapshot(self) -> RunSnapshot:
        return RunSnapshot(self.run_id, self._state, self.step, self.max_steps, [], [], 0.0, self.elapsed)

    def at(self, step: int, elapsed: float) -> None:
        self.step, self.elapsed = step, elapsed

    def inference_model(self):
        raise RuntimeError("a scripted run has no weights")  # the registry then keeps it as it is

    def checkpoint_parts(self):
        raise RuntimeError("a scripted run has no weights")
