"""minigpt/viz/training.py's class board, large: a board of more than BOARD_ALL runs draws the best
BOARD_BEST, the pinned run and the viewer's own, over the class's validation loss in grey (its median
and the band between two percentiles); a smaller board draws every run, as before.

    pytest tests/minigpt/viz/test_viz_board.py
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from minigpt.viz import (
    BOARD_ALL,
    BOARD_BAND,
    BOARD_BEST,
    board_band,
    board_choice,
    board_figure,
)
from minigpt.viz.training import BOARD_POINTS

BAND, MEDIAN = "the class's middle 80% (10th–90th percentile)", "the class's median"


def row(i: int, best: float | None, *, pinned: bool = False, refusals: tuple = (), steps=(0, 10, 20)):
    """Board row i ("r007", post "p7"): validation loss 4.0 at its first evaluation, `best` at its last
    (None: not evaluated yet), a training loss logged at every step."""
    val = () if best is None else (4.0, *([best + 0.5] * (len(steps) - 2)), best)
    record = SimpleNamespace(steps=tuple(range(steps[-1] + 1)), train_loss=tuple(4.0 - s / 100 for s in range(steps[-1] + 1)),
                             val_steps=tuple(steps) if val else (), val_loss=val)
    return SimpleNamespace(label=f"r{i:03d}", post_id=f"p{i}", pinned=pinned, refusals=refusals, record=record)


def three_hundred(**changed) -> list:
    """300 runs, best validation loss 3.500 + i/1000 (r000 3.500 … r299 3.799), but for r290…r299,
    the ten best of the class: r299 2.00, r298 2.01, … r290 2.09. `changed`: rows by index instead."""
    rows = [row(i, 2.0 + (299 - i) / 100 if i >= 290 else 3.5 + i / 1000) for i in range(300)]
    for i, changed_row in changed.items():
        rows[int(i)] = changed_row
    return rows


def legend(figure) -> list[str]:
    """The legend's entries in the order plotly draws them: by legendrank (1000 unless set), then trace order."""
    shown = [t for t in figure.to_dict()["data"] if t.get("showlegend") is not False]
    return [t["name"] for t in sorted(shown, key=lambda t: t.get("legendrank", 1000))]


def test_the_numbers_the_tests_below_are_written_for():
    assert (BOARD_ALL, BOARD_BEST, BOARD_BAND) == (15, 10, (10, 90))


def test_a_board_of_300_draws_the_ten_best_then_the_pinned_run_and_the_viewers_own_over_the_class():
    rows = three_hundred(**{"5": row(5, 3.9, pinned=True)})
    figure = board_figure(rows, own={"p150"})
    best = [f"r{i:03d}" for i in range(299, 289, -1)]  # 2.00, 2.01, … 2.09
    assert legend(figure) == [*best, "r005", "r150 (yours)", BAND, MEDIAN]
    data = figure.to_dict()["data"]
    assert len(data) == 3 + 2 * 12  # the band's two edges and its median; each drawn run's val and train loss
    widths = {t["name"]: t["line"]["width"] for t in data[3::2]}  # each run's validation loss, after the band
    assert widths["r005"] == widths["r150 (yours)"] > widths["r299"] == widths["r290"]
    assert [t["legendrank"] for t in data[:3]] == [2000] * 3  # the class after the runs in the legend
    assert data[1]["fill"] == "tonexty" and data[0]["hoverinfo"] == "skip"  # the band under the runs, drawn first


def test_on_a_large_board_the_runs_that_meet_the_challenge_come_first_and_an_unevaluated_run_last():
    refused = row(0, 1.0, refusals=("set to train 40 steps, more than 30",))  # the lowest loss, outside it
    rows = three_hundred(**{"0": refused, "1": row(1, None)})
    chosen = board_choice(rows)
    assert [r.label for r in chosen.drawn] == [f"r{i:03d}" for i in range(299, 289, -1)]
    assert chosen.best == 10 and chosen.total == 300 and chosen.summarised
    few = [row(i, 3.0 + i / 10, refusals=("no",) if i < 12 else ()) for i in range(16)]  # four meet it
    assert [r.label for r in board_choice(few).drawn] == ["r012", "r013", "r014", "r015", "r000", "r001", "r002",
                                                          "r003", "r004", "r005"]
    unevaluated = [row(i, None if i < 6 else 3.0) for i in range(16)]
    assert [r.label for r in board_choice(unevaluated).drawn][:10] == \
        ["r006", "r007", "r008", "r009", "r010", "r011", "r012", "r013", "r014", "r015"]


def test_an_own_run_among_the_best_is_marked_in_its_place():
    figure = board_figure(three_hundred(), own={"p295"})
    assert legend(figure)[:5] == ["r299", "r298", "r297", "r296", "r295 (yours)"] and len(legend(figure)) == 12


@pytest.mark.parametrize("n", [1, 15])
def test_a_board_of_up_to_fifteen_draws_every_run_in_its_order_and_nobodys_is_marked(n):
    rows = [row(i, 3.0 - i / 100, pinned=i == 0) for i in range(n)]
    figure = board_figure(rows, own={"p0", "p1"})
    assert legend(figure) == [f"r{i:03d}" for i in range(n)]  # posting order (the pinned first), not the best first
    assert len(figure.data) == 2 * n and not board_choice(rows).summarised
    assert [t.line.width for t in figure.data[::2]] == [5] + [2.5] * (n - 1)  # only the pinned run thicker


def test_the_class_band_is_the_percentiles_of_the_runs_read_between_their_evaluations():
    """Eleven runs evaluated at steps 0 and 10 (5.0, then 1.0 … 11.0), and one evaluated at 0 and 5
    only (5.0, then 2.0), and one never evaluated. At step 5 the eleven read halfway: 3.0 … 8.0."""
    eleven = [SimpleNamespace(record=SimpleNamespace(val_steps=(0, 10), val_loss=(5.0, float(k)))) for k in range(1, 12)]
    short = SimpleNamespace(record=SimpleNamespace(val_steps=(0, 5), val_loss=(5.0, 2.0)))
    none = SimpleNamespace(record=SimpleNamespace(val_steps=(), val_loss=()))
    steps, (low, median, high) = board_band([*eleven, short, none])
    assert steps == [0, 5, 10]
    # step 0: twelve 5.0s. Step 5: 2.0, 3.0, 3.5, … 8.0 (12 values): the 10th percentile at rank 11 × 0.1 = 1.1,
    # 3.0 + 0.1 × 0.5; the median at rank 5.5, between 5.0 and 5.5; the 90th at rank 9.9, 7.0 + 0.9 × 0.5.
    # Step 10: the short run has ended; 1.0 … 11.0: ranks 1, 5 and 9.
    assert np.allclose(low, [5.0, 3.05, 2.0]) and np.allclose(median, [5.0, 5.25, 6.0])
    assert np.allclose(high, [5.0, 7.45, 10.0])
    assert board_band([none]) == ([], pytest.approx(np.empty((3, 0))))


def test_the_band_of_a_large_board_is_drawn_from_every_run():
    rows = three_hundred()
    data = board_figure(rows).to_dict()["data"]
    steps, (low, median, high) = board_band(rows)
    assert list(data[0]["x"]) == steps == [0, 10, 20]
    # at step 20 the runs' best: 2.00 … 2.09 and 3.500 … 3.789; the median of 300 at rank 149.5: 3.500 + 0.1395
    assert np.isclose(data[2]["y"][2], 3.6395) and np.isclose(median[2], 3.6395)
    assert np.allclose(data[0]["y"], low) and np.allclose(data[1]["y"], high)


def test_a_long_run_is_thinned_on_the_board():
    rows = three_hundred(**{"299": row(299, 2.0, steps=tuple(range(0, 20_001, 50)))})
    data = board_figure(rows).to_dict()["data"]
    train = [t for t in data if t.get("line", {}).get("dash") == "dot"]
    long = next(t for t in train if t["legendgroup"] == "p299")  # 20,001 logged steps
    assert len(long["x"]) <= BOARD_POINTS + 1 and long["x"][-1] == 20_000  # every 101st step, and the last
    assert len(data[0]["x"]) <= BOARD_POINTS + 1 and data[0]["x"][-1] == 20_000  # the band's steps too (401 evaluations)
