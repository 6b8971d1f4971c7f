"""The class board's fixtures (test_board.py, test_term.py): a clock the test moves by hand, and a
registry on it whose tiny runs train on threads. A module with fixtures of these names keeps its own."""
import pytest
from helpers.board_runs import Clock

from minigpt.serve.line.registry import RunRegistry


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def registry(clock):
    registry = RunRegistry(max_runs=8, idle_seconds=600, clock=clock, dispatcher=False)
    yield registry
    registry.stop_all()
