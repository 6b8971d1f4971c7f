"""pages/Train.py and app/parts/train_form.py: presets, the form's checks and help, a run started, paused,
resumed, stopped, reset and stepped, its chart, its failures, a task run's accuracy, and the
settings link and the reload that fill the form.

    pytest tests/app/test_train_page.py
"""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

import minigpt
from app.state import choices, runs
from app.state import train_settings
from app.views import uploads
from helpers.apptest import (PAGES, home, own_run, page, plotly_spec, start_tiny_run, step_of, tiny_settings,
                             unescaped, wait_finished, wait_for_step)
from helpers.figures import plotly_array
from helpers.language import assert_chinese
from helpers.waiting import parked, wait_until
from minigpt import PRESETS, Trainer, load_pretrained
from minigpt.serve import server as face
from app.views.generation import STREAM_DELAY_KEY
from app.chrome.site import ATTENTION, GENERATE, SCALING, TRAIN


def _entry(at):
    """This session's run in the registry."""
    return runs.registry().get(*own_run(at))


def _caption(at) -> str:
    return " · ".join(caption.value for caption in at.caption)


def test_the_train_page_opens_on_the_default_preset_and_presets_fill_every_setting():
    at = page(home(), TRAIN.script)
    default = PRESETS["small"]
    assert {f.key: at.session_state[f.key] for f in train_settings.MODEL_FIELDS} == \
        {f.key: getattr(default.model, f.name) for f in train_settings.MODEL_FIELDS}
    for name, preset in PRESETS.items():
        at.button(key=f"preset:{name}").click().run()
        assert not at.exception and not at.error
        for f in train_settings.FIELDS:
            expected = getattr(preset.model if f.config.__name__ == "GPTConfig" else preset.train, f.name)
            assert at.session_state[f.key] == expected, (name, f.key)
        assert at.session_state[train_settings.EARLY_STOP] == (preset.train.early_stop_patience > 0)


@pytest.mark.trains
@pytest.mark.slow
def test_every_hyperparameter_and_metric_explains_itself():
    at = page(home(), TRAIN.script)
    widgets = [*at.slider, *at.select_slider, *at.number_input, *at.checkbox]
    for f in train_settings.FIELDS:
        w = next(w for w in widgets if w.key == f.key)
        assert w.help and len(w.help) > 40, f.key
    helps = " ".join(w.help for w in widgets)
    for word in ("d_model", "d_ff", "max_len", "block_size", "dropout", "Warmup"):
        assert word in helps
    at.button(key="start").click().run()
    wait_for_step(at, 1)
    metric_help = {m.label: m.proto.help for m in at.metric}
    assert "nats" in metric_help["Val loss (nats)"] and "ln V" in metric_help["Val loss (nats)"]
    assert "characters the model trains on each second" in metric_help["Characters/s"]
    page(at, ATTENTION.script)
    captions = " ".join(c.value for c in at.caption) + " ".join(m.value for m in at.markdown)
    assert "max_len" in captions and "block_size" in captions and "first row is always 1.0" in captions


@pytest.mark.trains
@pytest.mark.slow
def test_memorisation_is_named_on_the_chart_and_in_words():
    at = home()
    at.selectbox(key=choices.CORPUS).set_value("demo-zh").run()
    at = page(at, TRAIN.script)
    at.button(key="preset:tiny").click().run()
    at.session_state["lr"] = 1e-2
    at.session_state["eval_interval"] = 25
    at.run()
    at.button(key="start").click().run()
    wait_finished(at)
    at.run()
    warnings = " ".join(w.value for w in at.warning)
    assert "Overfitting" in warnings and "memorising" in warnings
    assert f"ln {load_pretrained('demo-zh').tokenizer.vocab_size}" in warnings  # worse than guessing
    assert any("never appear in the training part" in i.value for i in at.info)
    annotations = [a["text"] for a in plotly_spec(at)["layout"]["annotations"]]
    assert any("overfitting" in a for a in annotations) and any("ln V" in a for a in annotations)


@pytest.mark.trains
def test_after_a_reload_the_train_page_shows_the_runs_own_settings():
    at = home()
    at = page(at, TRAIN.script)
    at.button(key="preset:tiny").click().run()
    at.session_state["d_model"] = 128
    at.session_state["num_layers"] = 5
    at.session_state["max_steps"] = 20_000
    at.run()
    at.button(key="start").click().run()
    run_id, key = own_run(at)
    entry = runs.registry().get(run_id)
    params = entry.run.trainer.model_params
    refreshed = page(home(run=run_id, key=key), TRAIN.script)
    assert refreshed.session_state["d_model"] == 128 and refreshed.session_state["num_layers"] == 5
    run_line = next(m.value for m in refreshed.markdown if m.value.startswith(f"**Run `{run_id}`**"))
    assert "5 layers" in run_line and "d_model 128" in run_line and f"{params:,}" in run_line
    assert any(f"**{params:,}** parameters" in c.value for c in refreshed.caption)  # the form says the same


@pytest.mark.trains
def test_a_read_only_link_without_the_key_is_offered():
    at = tiny_settings(page(home(), TRAIN.script))
    at.button(key="start").click().run()
    run_id, key = own_run(at)
    link = next(c.value for c in at.code if "run=" in c.value)
    assert link.endswith(f"?run={run_id}") and key not in link  # each reader's browser picks their language


@pytest.mark.trains
def test_one_layer_is_singular_and_the_step_metric_fits():
    at = tiny_settings(page(home(), TRAIN.script))
    at.button(key="start").click().run()
    wait_for_step(at, 1)
    labels = {m.label: m.value for m in at.metric}
    assert "Step (of 20,000)" in labels and "/" not in labels["Step (of 20,000)"]
    page(at, "streamlit_app.py")
    assert any("1 layer ×" in c.value for c in at.caption) and not any("1 layers" in c.value for c in at.caption)


@pytest.mark.trains
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.slow
def test_the_train_page_shows_a_task_runs_accuracy_beside_its_loss(lang):
    at = home(lang)
    at.selectbox(key="corpus").set_value("task-copy").run()
    at = page(at, TRAIN.script)
    at.button(key="preset:task").click().run()
    at.number_input(key="max_steps").set_value(40)
    at.number_input(key="eval_interval").set_value(20)
    at.select_slider(key="d_model").set_value(16).run()
    at.button(key="start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    entry = wait_finished(at)  # its last step's evaluation done
    at.run()
    sample = entry.run.snapshot().evals[-1].sample  # one answer to a held-out question, not lines of noise
    assert sample.startswith(entry.probe_text[:7]) and len(sample) == 14
    notes = [m.value for m in at.markdown if ("The copy task" if lang == "en" else "**复制任务**") in m.value]
    assert notes and ("held-out lines" if lang == "en" else "留出行") in notes[0]
    if lang == "zh":
        assert_chinese(at, "Train, a task run")
    fig = plotly_spec(at, 1)  # beside the loss chart
    assert len(fig["data"][0]["x"]) == 3  # steps 0, 20, 40
    loss = plotly_spec(at, 0)
    floor = "lowest possible: 0.80" if lang == "en" else "可能的最低值：0.80"
    assert any(floor in (s.get("text") or "") for s in loss["layout"]["annotations"])
    # the time-lapse scores the run's held-out probe line at each of its evaluations
    at = page(at, ATTENTION.script)
    assert not at.exception
    axis = "weight on the right keys" if lang == "en" else "正确的键上的权重"
    lapse = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                 if axis in json.dumps(json.loads(c.proto.spec)["layout"], ensure_ascii=False))  # zh: level, above it
    if lang == "zh":  # the probe line's letters are the task's, not words
        assert_chinese(at, "Attention, a task run's time-lapse", besides=[runs.registry().get(*own_run(at)).probe_text])
    outlined = [c for c in at.get("plotly_chart") if any(t.get("type") == "scatter" and len(t.get("x", [])) == 6
                                                       for t in json.loads(c.proto.spec)["data"])]
    assert len(outlined) == 4  # each layer's heatmap, above and in the time-lapse, outlines the six right keys
    y = plotly_array(lapse["data"][0]["y"])
    assert list(plotly_array(lapse["data"][0]["x"])) == [0, 20, 40] and ((0 <= y) & (y <= 1)).all()


@pytest.mark.trains
def test_train_starts_pauses_resumes_and_stops_a_run_while_the_step_advances():
    at = start_tiny_run()
    assert at.metric[0].value == "running"
    first = wait_for_step(at, 1)
    assert wait_for_step(at, first + 1) > first
    at.button(key="pause").click().run()
    assert at.metric[0].value == "paused"
    paused_at = step_of(at)
    wait_until(lambda: parked(_entry(at).run), "the paused run to wait at its gate")
    assert step_of(at.run()) == paused_at
    at.button(key="resume").click().run()
    assert wait_for_step(at, paused_at + 1) > paused_at
    at.button(key="stop").click().run()
    assert at.metric[0].value == "stopped"
    assert at.button(key="pause").disabled and at.button(key="stop").disabled


@pytest.mark.trains
def test_training_goes_on_while_the_learner_visits_other_pages():
    at = start_tiny_run()
    before, run = step_of(at), _entry(at).run
    page(at, SCALING.script)
    wait_until(lambda: run.snapshot().step > before, "steps while the learner is on another page")
    page(at, TRAIN.script)
    assert at.metric[0].value == "running" and step_of(at) > before


def test_invalid_hyperparameters_show_the_config_error_and_disable_start():
    at = page(home(), TRAIN.script)
    at.select_slider(key="max_len").set_value(16).run()  # block_size stays at 30
    assert any("block_size" in unescaped(e.value) for e in at.error)
    assert at.button(key="start").disabled


def test_a_model_over_the_parameter_budget_is_refused_before_it_is_built():
    at = home()
    many_chars = "".join(chr(0x4E00 + i) for i in range(3000)) * 2  # a vocabulary of 3,000 characters
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("big.txt", many_chars.encode(), "text/plain")).run()
    page(at, TRAIN.script)
    at.select_slider(key="d_model").set_value(256)
    at.select_slider(key="d_ff").set_value(1024)
    at.slider(key="num_layers").set_value(6).run()
    assert any("parameters" in e.value and f"{runs.MAX_PARAMS:,}" in e.value for e in at.error)


@pytest.mark.trains
@pytest.mark.parametrize(
    "failure, message",
    [(MemoryError(), r"out of memory at step 6 \(MemoryError\)\. Use a smaller batch_size"),
     (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"),
      r"out of memory at step 6 \(RuntimeError: CUDA out of memory\. .*\)\. Use a smaller batch_size"),
     (None, r"^Training stopped: the loss became nan at step 6: .* Try a lower learning rate")],
    ids=["MemoryError", "RuntimeError-out-of-memory", "nan-loss"])
@pytest.mark.slow
def test_a_failure_in_the_training_thread_shows_on_train_and_the_app_keeps_serving(monkeypatch, failure, message):
    # the failure is put into this process's Trainer: runs train on its threads here. A run's process
    # that dies or diverges is tests/minigpt/serve/test_process.py's
    monkeypatch.setenv(face.TRAIN_IN_ENV, "thread")
    # two slots, whatever the CPUs give (one on a one-core box): the neighbour trains beside the failing run
    monkeypatch.setenv(face.MAX_RUNS_ENV, "2")
    neighbour = _entry(start_tiny_run())  # another learner's run, training when this one fails
    real = Trainer.compute_gradients

    def compute_gradients(self):
        if self is not neighbour.run.trainer and self.step >= 5:
            if failure is not None:
                raise failure
            with torch.no_grad():  # what too high a learning rate does: weights that are not numbers
                self.model.final_norm.weight.fill_(float("nan"))
        return real(self)

    monkeypatch.setattr(Trainer, "compute_gradients", compute_gradients)
    at = start_tiny_run()
    entry = _entry(at)
    wait_until(lambda: entry.run.state == "error", "the run to fail")
    at.run()
    assert not at.exception
    assert at.metric[0].value == "error"
    assert any(re.search(message, unescaped(e.value)) for e in at.error), [e.value for e in at.error]
    assert at.button(key="pause").disabled and not at.button(key="start").disabled
    assert runs.registry().active_count() == 1  # its training slot is free again; the neighbour's is not
    failed_at = neighbour.run.trainer.step
    wait_until(lambda: neighbour.run.trainer.step >= failed_at + 5, "the other run to go on training")
    assert neighbour.run.state == "running" and neighbour.run.snapshot().error is None

    for path in PAGES[1:]:  # the failed run stays the loaded model, and every page still renders
        assert not page(at, path).exception
    page(at, GENERATE.script).session_state["stream_delay"] = 0
    at.number_input(key="max_new_tokens").set_value(3)
    at.button(key="generate").click().run()
    assert not at.exception
    if failure is None:
        assert any("training diverged" in e.value for e in at.error)
    else:
        assert len(at.session_state["generation"]["steps"]) == 3
    assert not home().exception  # other sessions are served as before

    monkeypatch.undo()
    neighbour.run.stop()  # a slot for the failed run's owner to start again
    page(at, TRAIN.script).button(key="start").click().run()
    assert not at.error and at.metric[0].value == "running"


@pytest.mark.trains
@pytest.mark.slow
def test_train_page_chart_shows_the_runs_own_history():
    at = start_tiny_run(eval_interval=10)
    entry = _entry(at)
    wait_until(lambda: len(entry.run.snapshot().evals) >= 3, "three evaluations")
    at.button(key="stop").click().run()
    history = entry.run.snapshot().history
    traces = {t["name"]: t for t in plotly_spec(at)["data"]}
    np.testing.assert_allclose(plotly_array(traces["train loss"]["y"]), [e.train_loss for e in history])
    evals = [e for e in history if e.val_loss is not None]
    np.testing.assert_allclose(plotly_array(traces["val loss"]["y"]), [e.val_loss for e in evals])
    np.testing.assert_allclose(plotly_array(traces["learning rate"]["y"]), [e.lr for e in history])


@pytest.mark.trains
def test_reset_waits_at_step_0_and_step_trains_exactly_the_chosen_number_of_steps():
    at = tiny_settings(page(home(), TRAIN.script), max_steps=500)
    at.button(key="reset").click().run()
    assert not at.exception and at.metric[0].value == "paused" and step_of(at) == 0
    entry = _entry(at)
    for size, total in ((10, 10), (1, 11)):
        at.segmented_control(key="step_size").set_value(size).run()
        at.button(key="step").click().run()
        wait_until(lambda: entry.run.trainer.step >= total and parked(entry.run), f"the run to stop at step {total}")
        at.run()
        assert at.metric[0].value == "paused" and step_of(at) == total
    assert at.button(key="step").label == "Step ×1"


def test_a_settings_link_fills_another_sessions_form_and_a_bad_one_says_why():
    at = tiny_settings(page(home(), TRAIN.script), max_steps=321)
    at.select_slider(key="lr").set_value(1e-2).run()
    link = at.code[0].value
    assert "?train=" in link and "max_steps:321" in link and "lr:0.01" in link
    value = link.split("?train=")[1].split("&")[0]
    other = page(home(train=value), TRAIN.script)
    assert not other.exception and any("settings of the link" in i.value for i in other.info)
    assert other.number_input(key="max_steps").value == 321 and other.select_slider(key="lr").value == 1e-2
    assert other.select_slider(key="d_model").value == 16 and other.slider(key="num_layers").value == 1
    assert runs.OWN_RUN_KEY not in other.session_state  # filled, not started
    bad = page(home(train="num_heads:3"), TRAIN.script)
    assert any("cannot train" in w.value and "divisible" in w.value for w in bad.warning)
    assert bad.select_slider(key="num_heads").value == minigpt.PRESETS[minigpt.DEFAULT_PRESET].model.num_heads


def test_a_preset_button_promises_no_time_and_its_help_quotes_the_presets_own_numbers():
    """Issue: "Small · ~30 s" took 58 s on a busy machine. The buttons name the preset; the help's
    numbers come from the preset; the time a run takes is its ETA, from its own measured speed."""
    at = page(home(), TRAIN.script)
    for name, preset in PRESETS.items():
        button = at.button(key=f"preset:{name}")
        assert not any(ch.isdigit() for ch in button.label), button.label
        m, t = preset.model, preset.train
        for quoted in (f"d_model {m.d_model}", f"{m.num_layers} layer", f"block_size {t.block_size}",
                       f"batch {t.batch_size}", f"lr {t.lr:g}", f"{t.max_steps:,} steps"):
            assert quoted in button.help, (name, quoted)


def test_the_form_says_which_preset_it_holds():
    at = page(home(), TRAIN.script)
    assert any("Small preset's settings" in c.value for c in at.caption)  # the default
    assert at.button(key="preset:small").proto.type == "primary"
    at.button(key="preset:tiny").click().run()
    assert any("Tiny preset's settings" in c.value for c in at.caption)
    at.number_input(key="max_steps").set_value(PRESETS["tiny"].train.max_steps + 1).run()
    assert any("settings of your own" in c.value for c in at.caption)
    assert all(at.button(key=f"preset:{name}").proto.type == "secondary" for name in PRESETS)


def test_a_number_out_of_range_is_refused_under_its_box_in_the_pages_language():
    """Issue: a too-large number showed its error only on hover, in Streamlit's English."""
    at = page(home("zh"), TRAIN.script)
    high = train_settings.RANGES["max_steps"][1]
    at.number_input(key="max_steps").set_value(high + 1).run()
    assert not at.exception and at.button(key="start").disabled
    said = [e.value for e in at.error]
    assert any(f"{high + 1:,}" in e and f"{high:,}" in e and "整数" in e for e in said), said
    at.number_input(key="max_steps").set_value(high).run()
    assert not at.error and not at.button(key="start").disabled
    link = page(home(train=f"max_steps:{high + 1}"), TRAIN.script)  # a link cannot get past it either
    assert any("cannot train" in w.value and "max_steps" in w.value for w in link.warning)


@pytest.mark.trains
@pytest.mark.slow
def test_throughput_has_one_name_in_each_language():
    for lang, name in (("en", "Characters/s"), ("zh", "字符/秒")):
        at = start_tiny_run(lang)
        wait_for_step(at, 1)
        assert name in {m.label for m in at.metric}


@pytest.mark.trains
@pytest.mark.slow
@pytest.mark.parametrize("train_in", ["process", "thread", pytest.param("ray", marks=pytest.mark.cluster)])
def test_a_run_in_a_child_process_a_thread_or_on_a_cluster_steps_as_asked_and_the_pages_read_its_weights(
        monkeypatch, request, train_in):
    """MINIGPT_TRAIN_IN: the same pages, the run in a child (minigpt/serve/runs/process.py),
    on a thread of the server (minigpt/serve/runs/thread.py), or in an actor on a 2-node Ray cluster
    (minigpt/serve/runs/cluster.py, tests/helpers/ray_cluster.py). The reference is the Trainer alone, stepped
    as often in this process."""
    from minigpt.lab.tasks import task_for_corpus, training_hooks
    from minigpt.serve.runs.cluster import RayRun
    from minigpt.serve.runs.thread import TrainingRun
    from minigpt.serve.runs.process import ProcessRun

    monkeypatch.setenv(face.TRAIN_IN_ENV, train_in)
    if train_in == "ray":
        monkeypatch.setenv(face.ADDRESS_ENV, request.getfixturevalue("ray_cluster").address)
    at = tiny_settings(page(home(), TRAIN.script), max_steps=500)
    if train_in == "ray":
        assert not at.warning and "2 training slots on a cluster of 2 machines" in _caption(at)
    at.button(key="reset").click().run()
    assert not at.exception and at.metric[0].value == "paused" and step_of(at) == 0
    entry = _entry(at)
    assert type(entry.run) is {"process": ProcessRun, "thread": TrainingRun, "ray": RayRun}[train_in]
    at.segmented_control(key="step_size").set_value(10).run()
    at.button(key="step").click().run()
    wait_until(lambda: entry.run.snapshot().step >= 10 and entry.run.state == "paused", "the run to stop at step 10")
    at.run()
    assert at.metric[0].value == "paused" and step_of(at) == 10

    trainer, corpus = entry.run.trainer, entry.facts.corpus  # the page's settings, its built-in corpus
    alone = Trainer(minigpt.build_model(trainer.model_config, trainer.cfg.seed, trainer.cfg.device),
                    minigpt.CharTokenizer(trainer.tokenizer.chars), minigpt.load_corpus(corpus), trainer.cfg,
                    **training_hooks(task_for_corpus(corpus)))
    for _ in range(10):
        alone.compute_gradients()
        alone.apply_update()
    page(at, GENERATE.script)
    at.session_state[STREAM_DELAY_KEY] = 0
    at.slider(key="temperature").set_value(0.0)
    at.number_input(key="max_new_tokens").set_value(20).run()
    at.button(key="generate").click().run()
    assert not at.exception
    prompt = at.text_input[0].value
    expected = minigpt.generate(alone.model.eval(), alone.tokenizer, prompt, max_new_tokens=20,
                                sampling=minigpt.Sampling(temperature=0.0),
                                block_size=trainer.cfg.block_size)
    assert at.session_state["generation"]["text"] == expected
    attention = page(at, ATTENTION.script)
    assert not attention.exception and not attention.error
    assert attention.get("plotly_chart")  # the heatmaps of its weights
    page(at, TRAIN.script)
    curve = [trace for trace in plotly_spec(at)["data"] if trace.get("name") == "train loss"]
    history = entry.run.snapshot().history  # the live chart: every step the run logged, wherever it trained
    assert history[-1].step == 10 and list(plotly_array(curve[0]["x"])) == [e.step for e in history]
    np.testing.assert_allclose(plotly_array(curve[0]["y"]), [e.train_loss for e in history])
    at.button(key="stop").click().run()
    assert at.metric[0].value == "stopped"
    if train_in == "ray":  # an actor hands its weights to the dashboard before it goes, on the run's own threads
        wait_until(lambda: not entry.run.is_alive(), "the stopped run's actor to be let go")
    assert not entry.run.is_alive()  # on a thread or in a child, it has ended when Stop returns


def _time_hint(at) -> str:
    """The line under the form that says how long its steps take here."""
    return next(c.value for c in at.caption if "step" in c.value and "this server" in c.value)


def test_a_link_for_many_steps_says_before_start_how_long_they_take_on_this_server():
    """Issue 49: a ?train= link with 20,000 steps gave no hint, before Start, of how long they take."""
    from minigpt.serve.runs.recipe import RunSpec
    from app.state.corpora import builtin_corpus

    at = page(home(train="max_steps:20000"), TRAIN.script)
    hint = _time_hint(at)
    assert "20,000 steps" in hint and "not known yet" in hint and not re.search(r"\d+ (h|min|s)\b", hint)
    model, train = train_settings.from_param("max_steps:20000")  # the session's form, on the default corpus
    tokenizer, sized, checked = runs.run_configs(builtin_corpus(minigpt.DEFAULT_CORPUS), model, train)
    shape = RunSpec("", sized, checked, tuple(tokenizer.chars), "").shape
    speeds = runs.registry().speeds
    speeds.training((shape[0] * 2, *shape[1:]), 100, 40.0)  # a run twice the size trains at 2.5 steps/s
    assert "about 1 h 06 min" in _time_hint(at.run()) and "rough" in _time_hint(at)  # scaled: 5 steps/s
    speeds.finished(shape, 1_000, 100.0)  # a whole run of this very shape: 10 steps/s
    hint = _time_hint(at.run())
    assert "20,000 steps take about 33 min 20 s on this server" in hint and "rough" not in hint
    fewer = page(home(train="max_steps:2000"), TRAIN.script)
    assert "2,000 steps take about 3 min 20 s" in _time_hint(fewer)  # the same pace, a tenth of the steps


def _class_link(code: str, train: str):
    return page(home(**{"class": code, "train": train}), TRAIN.script)


def test_learners_in_a_class_who_open_one_link_without_a_seed_each_train_with_their_own_seed():
    """Issue 49: two learners trained from ?train=max_steps:200 and got bit-identical runs."""
    from app.state import classroom

    code = classroom.classes().open().code
    first, second = _class_link(code, "max_steps:200"), _class_link(code, "max_steps:200")
    seeds = [at.number_input(key="train_seed").value for at in (first, second)]
    assert seeds[0] != seeds[1]
    for at, seed in zip((first, second), seeds):
        assert at.number_input(key="max_steps").value == 200 and any("seed of your own" in i.value for i in at.info)
        assert at.run().number_input(key="train_seed").value == seed  # drawn once, kept


def test_a_class_link_that_names_a_seed_keeps_it_and_outside_a_class_the_seed_is_the_links():
    from app.state import classroom

    code = classroom.classes().open().code
    assert [_class_link(code, "max_steps:200,train_seed:7").number_input(key="train_seed").value
            for _learner in range(2)] == [7, 7]
    alone = page(home(train="max_steps:200"), TRAIN.script)
    assert alone.number_input(key="train_seed").value == PRESETS[minigpt.DEFAULT_PRESET].train.seed
    assert not any("seed of your own" in i.value for i in alone.info)


def test_the_forms_own_link_leaves_the_default_seed_out_so_a_class_gets_a_seed_each():
    """The teacher shares the form's "link to these settings": with the preset's seed it names
    none, so each learner in the class trains their own; a seed set by hand travels in it."""
    at = page(home(), TRAIN.script)
    link = next(c.value for c in at.code if "?train=" in c.value)
    assert "train_seed" not in link and "max_steps:" in link
    at.number_input(key="train_seed").set_value(7).run()
    assert "train_seed:7" in next(c.value for c in at.code if "?train=" in c.value)


def _busy_notes(at) -> list[str]:
    return [i.value for i in at.info if "server is busy" in i.value]


@pytest.mark.trains
@pytest.mark.slow
def test_a_run_much_slower_than_runs_of_its_size_here_says_the_server_is_busy_and_when_it_finishes():
    """Issue 61: in a full lecture hall a learner's run crawled, and nothing said why."""
    at = start_tiny_run()
    wait_for_step(at, 30)  # a few events logged past its first steps
    assert not _busy_notes(at)  # no run of its size has trained here: nothing to compare it with
    runs.registry().speeds.finished(_entry(at).spec.shape, 10**9, 1.0)  # its size trained at 10^9 steps/s here
    notes = _busy_notes(at.run())
    assert len(notes) == 1 and "at 0% of the speed" in notes[0], notes
    assert re.search(r"finishes in about \d+ (h|min|s)\b", notes[0]), notes[0]
    at.button(key="stop").click().run()
    assert not _busy_notes(at)  # a stopped run is not slowed by anyone
