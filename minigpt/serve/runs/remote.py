"""A run that trains out of the server's process, in a child (process.ProcessRun) or a Ray actor
(cluster.RayRun): the server's half, `RemoteRun`, answered from its copy of the trainer's news. What
the trainer does on its side is trainer_side.py. No torch here until weights are read: Home looks
runs up before torch has loaded."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .run import RunSnapshot

if TYPE_CHECKING:
    from ...messages import Message
    from ...model import MiniGPT

WEIGHTS_TIMEOUT = 60.0  # seconds a page waits for the weights of a run that trains out of this process


class RemoteRun:
    """The reading half of a run that trains out of this process (process.ProcessRun in a child,
    cluster.RayRun in a Ray actor), answered from the server's copy of what its trainer sent.

    A subclass keeps `_lock` (a Condition), `_state`, `_status` (the trainer's last status: step,
    elapsed, error, stopped_early...), `_history`, `_evals`, `spec` and `trainer`, and answers
    `_answer(op)`: the trainer's answer to "weights" or "checkpoint" (numpy arrays), None where it
    has gone or did not answer in WEIGHTS_TIMEOUT."""

    _notice: Message | None = None
    _where = "training process"  # what the run's weights could not be read from, in an error

    @property
    def state(self) -> str:
        with self._lock:
            return self._state

    def snapshot(self) -> RunSnapshot:
        with self._lock:
            status = self._status
            return RunSnapshot.of(self.run_id, self._state, step=status["step"], max_steps=self.spec.train.max_steps,
                                  history=self._history, evals=self._evals, elapsed=status["elapsed"],
                                  error=status["error"], stopped_early=status["stopped_early"], notice=self._notice)

    def checkpoint_parts(self) -> dict:
        from .trainer_side import to_torch  # torch: only once weights are read

        model, parts = self._weights("checkpoint")
        return {"model": model.eval(), "tokenizer": self.trainer.tokenizer, "train_config": self.trainer.cfg,
                "optimizer_state": to_torch(parts["optimizer_state"]), "trainer_state": parts["trainer_state"],
                "val_loss": parts["val_loss"]}

    def _weights(self, op: str) -> tuple[MiniGPT, dict]:
        """The trainer's answer to `op`, its weights loaded into a model here."""
        from ...model import MiniGPT
        from .trainer_side import to_torch
        answer = self._answer(op)
        if answer is None:
            raise RuntimeError(f"run {self.run_id}'s {self._where} has ended or did not answer in {WEIGHTS_TIMEOUT} s, "
                               "so its weights cannot be read")
        model = MiniGPT(self.trainer.model_config)
        model.load_state_dict(to_torch(answer["model"]))
        return model, answer

    def _facts(self) -> dict:  # what TrainerView reads: step, elapsed, best_val...
        with self._lock:
            return self._status
