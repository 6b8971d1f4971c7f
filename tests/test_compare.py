"""Runs kept for comparison: records of real runs, the settings that differ, the shelf's limits,
the comparison on the Experiments page, its read-only link in another session, and "duplicate and
change one thing" back on Train."""
from __future__ import annotations

import re

import pandas as pd
import torch
import pytest

from app import compare
from helpers import assert_chinese, home, page, plotly_spec, start_tiny_run, wait_finished
from minigpt import GPTConfig, RunRecord, RunShelf, TrainConfig, differing_settings, history_table, results_table
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
    assert len({first, second, third}) == 3 and all(compare.ID.match(i) for i in (first, second, third))


def test_the_history_table_has_a_row_per_logged_event():
    table = history_table([TrainEvent(step=1, max_steps=2, train_loss=2.0, lr=1e-3, tokens_per_sec=10.0, elapsed=0.5)])
    assert list(table.columns)[:3] == ["step", "train_loss", "val_loss"] and table.loc[0, "step"] == 1
    assert pd.isna(table.loc[0, "val_loss"])


# ------------------------------------------------------------------ on the pages

def finished(at, steps: int):
    """Wait for the run's end, its last event logged at `steps`."""
    assert wait_finished(at).run.snapshot().history[-1].step == steps
    return at.run()


def kept_run(at, steps: int, name: str):
    """Wait for the run's end, then keep it under `name`."""
    at = finished(at, steps)
    at.text_input(key="keep_name").set_value(name).run()
    at.button(key="keep_run").click().run()
    assert not at.exception
    return at


def test_two_kept_runs_compare_on_one_chart_with_the_setting_that_differs_and_a_link_for_others():
    at = kept_run(start_tiny_run(max_steps=40), 40, "slow")
    at = page(at, "pages/8_Experiments.py")
    at.button(key="duplicate_run").click().run()  # the form filled with that run's settings, and on to Train
    assert not at.exception and at.session_state["max_steps"] == 40
    at = page(at, "pages/1_Train.py")
    assert at.number_input(key="max_steps").value == 40
    at.select_slider(key="lr").set_value(3e-2).run()
    at.button(key="start").click().run()
    at = kept_run(at, 40, "fast")
    at = page(at, "pages/8_Experiments.py")
    assert not at.exception
    curves = plotly_spec(at, len(at.get("plotly_chart")) - 1)
    names = [t["name"] for t in curves["data"]]
    assert names == ["slow · val loss", "slow · train loss", "fast · val loss", "fast · train loss"]
    settings, results = (d.value for d in at.dataframe)  # the settings that differ, then the results
    assert list(settings.index) == ["Learning rate", "Lowest learning rate"]  # the lowest follows lr
    assert list(settings.loc["Learning rate"]) == ["0.003", "0.03"]
    assert list(results["run"]) == ["slow", "fast"] and list(results["steps"]) == [40, 40]

    link = at.code[-1].value
    ids = link.split("compare=")[1].split("&")[0]
    other = home()  # another session: nothing of this one's, until it opens the link
    assert not page(other, "pages/8_Experiments.py").dataframe
    shared = page(home(compare=ids), "pages/8_Experiments.py")
    assert list(shared.dataframe[1].value["run"]) == ["slow", "fast"]
    assert shared.query_params["compare"] in (ids, [ids])  # kept in its address: a refresh brings them back
    assert at.query_params["compare"] in (ids, [ids])


def test_the_run_start_replaces_is_kept_and_the_current_one_is_compared_as_it_is_now():
    at = finished(start_tiny_run(max_steps=30), 30)
    at.select_slider(key="lr").set_value(3e-2).run()
    at.button(key="start").click().run()  # replaces the first run: it is kept on its own, as "run 1"
    at = page(at, "pages/8_Experiments.py")
    assert not at.exception
    live = plotly_spec(at, len(at.get("plotly_chart")) - 1)
    first_names = [t["name"] for t in live["data"]]
    assert first_names[:2] == ["run 1 · val loss", "run 1 · train loss"]
    assert first_names[2].startswith("this run"), first_names  # the current run, "training" while it trains
    at = page(finished(page(at, "pages/1_Train.py"), 30), "pages/8_Experiments.py")
    settings, results = (d.value for d in at.dataframe)
    assert list(results["run"]) == ["run 1", "this run"] and list(results["steps"]) == [30, 30]  # as it is now
    assert list(settings.loc["Learning rate"]) == ["0.003", "0.03"]
    assert "compare=" in at.code[-1].value and at.code[-1].value.count(",") == 0  # the link: run 1 only

    at.text_input(key="rename_name").set_value("slow").run()
    at.button(key="rename_run").click().run()
    assert list(at.dataframe[1].value["run"]) == ["slow", "this run"]
    shared = page(home(compare=at.query_params["compare"][0] if isinstance(at.query_params["compare"], list)
                       else at.query_params["compare"]), "pages/8_Experiments.py")
    assert list(shared.dataframe[0].value["run"]) == ["slow"]  # renamed for the link too (one run: no settings table)
    assert "rename_source" not in [s.key for s in shared.selectbox]  # a run from a link is its owner's to name

    at = page(at, "pages/1_Train.py")
    at.text_input(key="keep_name").set_value("fast").run()
    at.button(key="keep_run").click().run()
    at.button(key="start").click().run()  # kept as it is already: not kept a second time
    at = page(at, "pages/8_Experiments.py")
    options = at.multiselect(key="compare_chosen").options  # as the learner reads them
    assert options[:2] == ["slow", "fast"] and len(options) == 3 and options[2].startswith("this run")


def test_a_link_to_runs_the_server_let_go_says_so():
    at = page(home(compare="AAAAAAAAAAAA,bad id!"), "pages/8_Experiments.py")
    assert not at.exception and any("no longer on this server" in w.value for w in at.warning)


def test_the_comparison_in_chinese():
    at = kept_run(start_tiny_run("zh", max_steps=30), 30, "第一")
    at = page(at, "pages/8_Experiments.py")
    assert_chinese(at, "Experiments, comparing a kept run")


def test_attention_weights_download_as_an_npz_numpy_reads_back():
    import io

    import numpy as np

    from minigpt import DEMO_SENTENCE, attention_npz, load_pretrained

    checkpoint = load_pretrained("course-zh")
    maps = checkpoint.model.attention_maps(torch.tensor([checkpoint.tokenizer.encode(DEMO_SENTENCE)])).numpy()
    archive = np.load(io.BytesIO(attention_npz(maps, DEMO_SENTENCE, scaled=True)))
    np.testing.assert_array_equal(archive["attention"], maps)
    assert "".join(archive["chars"]) == DEMO_SENTENCE and bool(archive["scaled"])
    assert archive["attention"].shape == (checkpoint.model.config.num_layers, checkpoint.model.config.num_heads,
                                          len(DEMO_SENTENCE), len(DEMO_SENTENCE))


def test_charts_save_as_one_html_page_that_needs_no_network():
    from minigpt import compare_figure, figures_html

    figures = [compare_figure([record("慢"), record("fast", lr=1e-2)]), compare_figure([record("only")])]
    page_html = figures_html(figures, "MiniGPT Lab · 对比 <runs>")
    assert page_html.count("Plotly.newPlot(") == 2  # both charts, each drawn
    assert page_html.count("plotly.js v") == 1      # the library inside, once
    assert not re.search(r"<script[^>]+src=", page_html)  # nothing fetched when the file is opened
    assert '<meta charset="utf-8">' in page_html and "<title>MiniGPT Lab · 对比 &lt;runs&gt;</title>" in page_html
    assert '"name":"\\u6162 \\u00b7 val loss"' in page_html  # the run's name, as JSON writes it
    assert len(page_html) > 3_000_000  # plotly.js is about 4.8 MB
