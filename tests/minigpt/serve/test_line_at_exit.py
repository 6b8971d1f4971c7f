"""minigpt/serve/line/registry.py as the server exits (SIGTERM, then the interpreter's exit hooks): the
line starts nothing in the slots that the stopped runs free. A run started then would train, or be
forked, while the interpreter tears itself down, and print a traceback (or abort) in the server's
log; its place in line waits in the store for the next server instead.

    pytest tests/minigpt/serve/test_line_at_exit.py
"""
import pytest

from helpers.tiny import TEXT, tiny_config, tiny_tokenizer
from minigpt import TrainConfig, Trainer, build_model
from minigpt.serve.runs.recipe import RunSpec
from minigpt.serve.line.registry import RunRegistry
from minigpt.serve.runs.run import EXITING
from minigpt.serve.runs.thread import TrainingRun, stop_all_runs

LONG_STEPS = 1_000_000  # trains until it is stopped


def _config(max_steps: int) -> TrainConfig:
    return TrainConfig(batch_size=4, block_size=8, max_steps=max_steps, warmup_steps=2, eval_interval=10_000,
                       eval_iters=1)


def _plan() -> RunSpec:
    tok = tiny_tokenizer()
    model = tiny_config(vocab_size=tok.vocab_size).validate()
    return RunSpec("", model, _config(LONG_STEPS).validate(model), tuple(tok.chars), TEXT)


@pytest.fixture
def exiting():
    """Sets run.EXITING as the interpreter's exit does (thread._exit), and clears it after the test."""
    yield EXITING.set
    EXITING.clear()


@pytest.mark.trains
def test_a_server_exiting_starts_no_waiting_run_in_the_slot_its_stopped_run_frees(exiting):
    registry = RunRegistry(max_runs=1, dispatcher=False)
    built: list[str] = []

    def build(run_id: str) -> TrainingRun:
        built.append(run_id)
        tok = tiny_tokenizer()
        return TrainingRun(Trainer(build_model(tiny_config(vocab_size=tok.vocab_size), 0), tok, TEXT,
                                   _config(LONG_STEPS)), probe_text=TEXT[:8], run_id=run_id)

    try:
        first = registry.submit(_plan(), corpus="c", build=build)
        second = registry.submit(_plan(), corpus="c", build=build)
        assert first.is_active() and second.is_waiting()
        exiting()  # what the interpreter's exit hook does: the flag, then every run stopped
        stop_all_runs()
        assert not first.run.is_alive()
        registry.dispatch()  # the dispatcher's next look, while the interpreter exits
        assert second.is_waiting() and registry.place(second) == 1
        assert built == [first.run_id]
    finally:
        registry.stop_all()
