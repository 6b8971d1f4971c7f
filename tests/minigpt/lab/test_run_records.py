"""minigpt/lab/run_records.py: run records of real runs, the settings that differ, the shelf's limits, the
history table, and the exports (attention weights as .npz, charts as one HTML page).

    pytest tests/minigpt/lab/test_run_records.py
"""
from __future__ import annotations

import re

import pandas as pd
import pytest
import torch

from minigpt import GPTConfig, TrainConfig
from minigpt.lab.run_records import RunRecord, RunShelf, differing_settings, history_table, results_table
from minigpt.train import TrainEvent


def record(name: str, **train) -> RunRecord:
    events = [TrainEvent(step=s, max_steps=20, train_loss=3.0 - s / 10, lr=1e-3, tokens_per_sec=500.0, elapsed=s / 10,
                         val_loss=3.1 - s / 10 if s % 10 == 0 else None) for s in (5, 10, 15, 20)]
    snapshot = type("Snapshot", (), {"history": events, "elapsed": 2.0, "tokens_per_sec": 500.0})
    return RunRecord.of_run(name, "course-zh", GPTConfig(vocab_size=30), TrainConfig(**train), snapshot)


def test_a_record_keeps_the_runs_curves_and_numbers():
    r = record("a")
    assert r.steps == (5, 10, 15, 20) and r.train_loss == pytest.approx((2.5, 2.0, 1.5, 1.0))
    assert r.val_steps == (10, 20) and r.val_loss == pytest.approx((2.1, 1.1))
    table = results_table([r])
    assert table.loc[0, "steps"] == 20 and table.loc[0, "val_loss"] == pytest.approx(1.1)
    assert table.loc[0, "best_val"] == pytest.approx(1.1) and table.loc[0, "seconds"] == 2.0


def test_the_best_val_loss_is_the_lowest_one_not_the_last_when_a_run_overfits():
    """An overfitting run's val loss turns back up: 2.0, then 1.2, then 1.5. The table's last val loss
    is 1.5 and its best 1.2, the number the comparison ranks runs by."""
    events = [TrainEvent(step=s, max_steps=30, train_loss=3.0 - s / 10, lr=1e-3, tokens_per_sec=500.0, elapsed=s / 10,
                         val_loss=v) for s, v in ((10, 2.0), (20, 1.2), (30, 1.5))]
    snapshot = type("Snapshot", (), {"history": events, "elapsed": 3.0, "tokens_per_sec": 500.0})
    table = results_table([RunRecord.of_run("overfits", "course-zh", GPTConfig(vocab_size=30), TrainConfig(), snapshot)])
    assert table.loc[0, "val_loss"] == pytest.approx(1.5) and table.loc[0, "best_val"] == pytest.approx(1.2)


def test_the_results_tables_train_loss_is_the_last_logged_not_the_first():
    """The comparison's "last train loss" column: a run logged 4.2, then 2.9, then 1.7. The
    numbers are written by hand; the table must say 1.7."""
    events = [TrainEvent(step=s, max_steps=30, train_loss=t, lr=1e-3, tokens_per_sec=500.0, elapsed=s / 10,
                         val_loss=None) for s, t in ((10, 4.2), (20, 2.9), (30, 1.7))]
    snapshot = type("Snapshot", (), {"history": events, "elapsed": 3.0, "tokens_per_sec": 500.0})
    table = results_table([RunRecord.of_run("learns", "course-zh", GPTConfig(vocab_size=30), TrainConfig(), snapshot),
                           record("a")])  # its train losses: 2.5, 2.0, 1.5, 1.0
    assert list(table["train_loss"]) == pytest.approx([1.7, 1.0])


def test_only_the_settings_that_differ_are_listed():
    a, b, c = record("a"), record("b", lr=1e-2), record("c", lr=1e-2, batch_size=32)
    assert differing_settings([a, a]).empty
    two = differing_settings([a, b])
    assert list(two.index) == ["lr"] and list(two.loc["lr"]) == [TrainConfig.lr, 1e-2]
    assert list(differing_settings([a, b, c]).index) == ["batch_size", "lr"]


def test_two_runs_of_one_name_get_numbered_columns():
    a, b = record("run 1"), record("run 1", lr=1e-2)
    table = differing_settings([a, b])
    assert list(table.columns) == ["run 1", "run 1 (2)"]  # a styled table needs unique columns
    table.style.apply(lambda row: [""] * len(row), axis=1).to_html()
    assert list(results_table([a, b])["run"]) == ["run 1", "run 1 (2)"]


def test_the_shelf_lets_the_oldest_go_and_knows_only_what_it_is_asked_for():
    shelf = RunShelf(max_records=2)
    first, second, third = (shelf.put(record(n)) for n in "abc")
    assert [r.name for r in shelf.get([third, first, second, "nothing-here"])] == ["c", "b"]
    # ids a link can carry as they are: twelve URL-safe characters, each id new
    assert len({first, second, third}) == 3 and all(re.fullmatch(r"[A-Za-z0-9_-]{12}", i) for i in (first, second, third))


def test_the_history_table_has_a_row_per_logged_event():
    table = history_table([TrainEvent(step=1, max_steps=2, train_loss=2.0, lr=1e-3, tokens_per_sec=10.0, elapsed=0.5)])
    assert list(table.columns)[:3] == ["step", "train_loss", "val_loss"] and table.loc[0, "step"] == 1
    assert pd.isna(table.loc[0, "val_loss"])


def test_attention_weights_download_as_an_npz_numpy_reads_back():
    import io

    import numpy as np

    from minigpt import load_pretrained
    from minigpt.corpus import DEMO_SENTENCE
    from minigpt.lab.run_records import attention_npz

    checkpoint = load_pretrained("course-zh")
    maps = checkpoint.model.attention_maps(torch.tensor([checkpoint.tokenizer.encode(DEMO_SENTENCE)])).numpy()
    archive = np.load(io.BytesIO(attention_npz(maps, DEMO_SENTENCE, scaled=True)))
    np.testing.assert_array_equal(archive["attention"], maps)
    assert "".join(archive["chars"]) == DEMO_SENTENCE and bool(archive["scaled"])
    assert archive["attention"].shape == (checkpoint.model.config.num_layers, checkpoint.model.config.num_heads,
                                          len(DEMO_SENTENCE), len(DEMO_SENTENCE))


def test_charts_save_as_one_html_page_that_needs_no_network():
    from minigpt.viz import compare_figure, figures_html

    figures = [compare_figure([record("慢"), record("fast", lr=1e-2)]), compare_figure([record("only")])]
    page_html = figures_html(figures, "MiniGPT Lab · 对比 <runs>")
    assert page_html.count("Plotly.newPlot(") == 2  # both charts, each drawn
    assert page_html.count("plotly.js v") == 1      # the library inside, once
    assert not re.search(r"<script[^>]+src=", page_html)  # nothing fetched when the file is opened
    assert '<meta charset="utf-8">' in page_html and "<title>MiniGPT Lab · 对比 &lt;runs&gt;</title>" in page_html
    assert '"name":"\\u6162 \\u00b7 val loss"' in page_html  # the run's name, as JSON writes it
    assert len(page_html) > 3_000_000  # plotly.js is about 4.8 MB


def test_a_csv_cell_that_starts_like_a_formula_is_read_back_as_text_and_numbers_stay_numbers():
    """A learner names a run `=HYPERLINK(...)`: the CSV the teacher opens must not run it. The
    expected text is written out by hand, as Python's csv module reads the file back."""
    import csv
    import io

    import pandas as pd

    from minigpt.lab.run_records import csv_text

    names = ["=1+1", "+cmd", "-2+3", "@SUM(A1)", "\tx", "\rx", "plain", "a=b"]
    table = pd.DataFrame({"run": names, "best_val": [-1.5] * len(names), "=head": range(len(names))})
    rows = list(csv.reader(io.StringIO(csv_text(table), newline="")))
    assert rows[0] == ["run", "best_val", "'=head"]
    assert [r[0] for r in rows[1:]] == ["'=1+1", "'+cmd", "'-2+3", "'@SUM(A1)", "'\tx", "'\rx", "plain", "a=b"]
    assert {r[1] for r in rows[1:]} == {"-1.5"}  # a negative number is a number, not a formula
