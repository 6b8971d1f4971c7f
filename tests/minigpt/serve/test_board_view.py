"""minigpt/serve/classes/board.py's BoardView on a board of 300 runs: which curves coincide, found once
per view however many watch it, comparing a run only with the curves that share a logged point with it;
and the view's digest, what the page's caches key on.

    pytest tests/minigpt/serve/test_board_view.py
"""
from __future__ import annotations

import pytest

from minigpt import GPTConfig, TrainConfig
from minigpt.lab.run_records import RunRecord
from minigpt.serve.classes import board as board_module
from minigpt.serve.classes.board import BoardRow, BoardView


def record(losses: list[float]) -> RunRecord:
    steps = tuple(range(0, 10 * len(losses), 10))
    return RunRecord("run", "course-zh", GPTConfig(), TrainConfig(), steps, tuple(losses), (), (), 1.0, 1.0)


def row(i: int, losses: list[float]) -> BoardRow:
    return BoardRow(f"p{i}", f"run{i}", f"r{i:03d}", record(losses), "", "finished", 10 * len(losses), 1, 1, False,
                    False, ())


def distinct(i: int) -> list[float]:
    """Run i's own curve: no loss of it is any other run's."""
    return [4.0 + i / 1000 + s / 10_000_000 for s in range(6)]


def view(rows, key=(1,)) -> BoardView:
    return BoardView("K7Q2", key, tuple(rows), None)


def board_of_300() -> list[BoardRow]:
    rows = [row(i, distinct(i)) for i in range(300)]
    rows[120] = row(120, distinct(7))                  # r007's twin: the same settings and seed
    rows[250] = row(250, distinct(7)[:3])              # another, still training: the same so far
    rows[260] = row(260, distinct(7)[:1] + distinct(260)[1:])  # r007's step 0 alone: not the same curve
    rows[270] = row(270, distinct(8)[:1])              # one logged step, r008's: agrees with it, says nothing
    rows[280] = row(280, distinct(9))                  # r009's twin
    return rows


def test_among_300_runs_the_twins_are_named_together_in_posting_order_and_nothing_else():
    assert view(board_of_300()).coinciding() == [("r007", "r120", "r250"), ("r009", "r280")]


def test_the_curves_are_compared_once_per_view_and_only_where_two_share_a_logged_point(monkeypatch):
    compared = []
    same_curve = board_module._same_curve
    monkeypatch.setattr(board_module, "_same_curve", lambda a, b: compared.append(1) or same_curve(a, b))
    shared = view(board_of_300())
    for _viewer in range(30):
        shared.coinciding()
    # r120, r250 and r260 (one point) against r007, r270 against r008, r280 against r009: not 300 × 299 / 2
    assert len(compared) == 5


@pytest.mark.parametrize("moved", [False, True])
def test_the_digest_changes_with_the_key_alone(moved):
    rows = board_of_300()
    before = view(rows, key=(3, (("p1", 20, "running"),)))
    after = view(rows, key=(3, (("p1", 25 if moved else 20, "running"),)))
    assert (before.digest != after.digest) == moved and len(before.digest) == 24
