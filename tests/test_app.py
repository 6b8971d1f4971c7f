"""Page tests with Streamlit's AppTest: one behaviour each, tiny training settings.

AppTest ignores run_every (no automatic fragment reruns), so tests sleep and rerun.
"""
import re
import threading
import time

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from app import choices, corpora, runs, uploads
from app.text import markdown_stream, md
from helpers import (DEMO_SCALING, PAGES, ROOT, hand_forward, home, own_run, page, plotly_array, plotly_spec, start_tiny_run, step_of,
                     tiny_settings, unescaped, wait_for_step)
import minigpt
from minigpt import (DEFAULT_CORPUS, DEMO_SENTENCE, CorpusError, GPTConfig, NotOwnerError, RunLimitError, RunRegistry, TrainConfig,
                     Trainer, TrainingRun, build_model, load_pretrained)
from minigpt.runner import THREAD_NAME


@pytest.mark.parametrize("path", [None, *PAGES])
def test_every_page_renders_without_exception(path):
    at = home() if path is None else page(home(), path)
    assert not at.exception
    assert not at.error
    assert len(at.title) == 1


def test_the_server_freezes_what_its_libraries_made_at_import():
    """Streamlit collects garbage after every script run (runner.postScriptGC). Walking the objects
    torch, plotly, pandas and Streamlit made at import (~250,000) took ~240 ms with the GIL held,
    after every widget move; the first page freezes them out of the collector's walk."""
    import gc

    home().run()
    assert gc.get_freeze_count() > 100_000


def test_the_english_corpus_brings_its_own_shipped_model_prompt_and_text():
    at = home()
    at.selectbox(key=choices.CORPUS).set_value("pydoc-en").run()
    assert {m.label: m.value for m in at.metric}["Corpus"] == "pydoc-en"
    page(at, "pages/2_Generate.py")
    assert not at.exception
    assert not [b for b in at.button if b.key.startswith("seed:")]  # the demo's seeds are Chinese
    assert at.text_input[0].value == "The "
    page(at, "pages/3_Attention.py")
    assert not at.exception and not at.warning
    assert at.text_input[0].value.startswith("The")


def test_home_shows_the_shipped_model_without_training():
    at = home()
    shipped = load_pretrained(DEFAULT_CORPUS)
    values = {m.label: m.value for m in at.metric}
    assert values["Corpus"] == DEFAULT_CORPUS
    assert values["Parameters"] == f"{shipped.model.num_params():,}"
    assert values["Device"] == "cpu"


def test_train_starts_pauses_resumes_and_stops_a_run_while_the_step_advances():
    at = start_tiny_run()
    assert at.metric[0].value == "running"
    first = wait_for_step(at, 1)
    time.sleep(0.5)
    assert wait_for_step(at, first + 1) > first
    at.button(key="pause").click().run()
    assert at.metric[0].value == "paused"
    paused_at = step_of(at)
    time.sleep(0.5)
    assert step_of(at.run()) == paused_at
    at.button(key="resume").click().run()
    assert wait_for_step(at, paused_at + 1) > paused_at
    at.button(key="stop").click().run()
    assert at.metric[0].value == "stopped"
    assert at.button(key="pause").disabled and at.button(key="stop").disabled


def test_training_goes_on_while_the_learner_visits_other_pages():
    at = start_tiny_run()
    before = step_of(at)
    page(at, "pages/4_Scaling.py")
    time.sleep(1.0)
    page(at, "pages/1_Train.py")
    assert at.metric[0].value == "running" and step_of(at) > before


def test_starting_a_run_makes_it_the_loaded_model_for_generate_and_attention():
    at = start_tiny_run()
    page(at, "pages/3_Attention.py")
    assert not at.exception
    # one layer, mean view, for the learner's text (the run's time-lapse may show beside it once it has evaluated)
    assert [c.key for c in at.get("plotly_chart") if not c.key.startswith("timelapse")] == ["attention:0"]
    assert at.session_state[choices.MODEL_SOURCE] == choices.TRAINED


def test_invalid_hyperparameters_show_the_config_error_and_disable_start():
    at = page(home(), "pages/1_Train.py")
    at.select_slider(key="max_len").set_value(16).run()  # block_size stays at 30
    assert any("block_size" in unescaped(e.value) for e in at.error)
    assert at.button(key="start").disabled


def test_a_model_over_the_parameter_budget_is_refused_before_it_is_built():
    at = home()
    many_chars = "".join(chr(0x4E00 + i) for i in range(3000)) * 2  # a vocabulary of 3,000 characters
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("big.txt", many_chars.encode(), "text/plain")).run()
    page(at, "pages/1_Train.py")
    at.select_slider(key="d_model").set_value(256)
    at.select_slider(key="d_ff").set_value(1024)
    at.slider(key="num_layers").set_value(6).run()
    assert any("parameters" in e.value and f"{runs.MAX_PARAMS:,}" in e.value for e in at.error)


def test_another_session_watches_the_run_but_cannot_stop_or_replace_it():
    owner = start_tiny_run()
    run_id, key = own_run(owner)
    watcher = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    watcher.query_params["run"] = run_id
    page(watcher.run(), "pages/1_Train.py")
    assert watcher.metric[0].value == "running"
    assert watcher.button(key="pause").disabled and watcher.button(key="stop").disabled
    assert any("watching" in i.value for i in watcher.info)
    with pytest.raises(NotOwnerError):
        runs.registry().control(run_id, "not-the-key", "stop")
    tiny_settings(watcher).button(key="start").click().run()  # the watcher's own run
    assert own_run(watcher)[0] != run_id
    assert runs.registry().get(run_id).run.state == "running"


def test_a_refresh_with_the_owner_key_in_the_url_reattaches_with_control():
    run_id, key = own_run(start_tiny_run())
    refreshed = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    refreshed.query_params["run"] = run_id
    refreshed.query_params["key"] = key
    page(refreshed.run(), "pages/1_Train.py")
    assert own_run(refreshed) == (run_id, key)
    assert not refreshed.button(key="pause").disabled
    refreshed.button(key="stop").click().run()
    assert refreshed.metric[0].value == "stopped"


def test_an_address_naming_an_unknown_run_says_so_without_echoing_it():
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    at.query_params["run"] = "![x](http://example.invalid/p.png)"
    at.run()
    assert any("no longer on this server" in w.value and "example" not in w.value for w in at.warning)
    assert "run" not in at.query_params


def test_the_owner_url_carries_the_run_id_and_key():
    at = start_tiny_run()
    run_id, key = own_run(at)
    assert at.query_params["run"] == run_id and at.query_params["key"] == key


def test_the_server_cap_refuses_a_third_run_with_a_clear_message(monkeypatch):
    monkeypatch.setenv(runs.MAX_RUNS_ENV, "2")
    start_tiny_run()
    start_tiny_run()
    third = tiny_settings(page(home(), "pages/1_Train.py"))
    assert third.button(key="start").disabled  # issue B12: Start stayed clickable with every slot taken
    assert any("training slots" in i.value for i in third.info)
    assert runs.OWN_RUN not in third.session_state
    with pytest.raises(RunLimitError, match="limit"):  # and the registry refuses even a forged click
        runs.registry().start(lambda: pytest.fail("built past the cap"), corpus="x", probe="")
    assert runs.registry().active_count() == 2


def test_the_owner_can_replace_their_run_when_the_server_is_at_its_cap(monkeypatch):
    monkeypatch.setenv(runs.MAX_RUNS_ENV, "1")
    at = start_tiny_run()
    first, _ = own_run(at)
    at.button(key="start").click().run()
    assert not at.error
    assert own_run(at)[0] != first
    assert runs.registry().get(first) is None
    assert runs.registry().active_count() == 1


def test_a_start_that_cannot_train_shows_why_and_leaves_the_previous_run_training():
    at = home()
    at.selectbox(key=choices.CORPUS).set_value("demo-zh").run()  # 448 characters: a short validation split
    at = tiny_settings(page(at, "pages/1_Train.py"))
    at.button(key="start").click().run()
    first, _ = own_run(at)
    at.select_slider(key="max_len").set_value(64)
    at.slider(key="block_size").set_value(60).run()  # longer than the demo corpus' validation split
    assert any("validation split" in e.value for e in at.error)
    assert at.button(key="start").disabled  # refused from the corpus' length, before anything is built

    def build_fails():  # what the trainer would raise if the settings got past the page
        raise CorpusError("the validation split has 44 tokens, fewer than block_size + 1 = 61")

    with pytest.raises(CorpusError):
        runs.registry().start(build_fails, corpus="demo-zh", probe="", replace=own_run(at))
    assert own_run(at)[0] == first and runs.registry().get(first).run.state == "running"


def trainer_threads() -> int:
    return sum(t.name == THREAD_NAME and t.is_alive() for t in threading.enumerate())


def test_simultaneous_starts_never_build_more_runs_than_the_cap(monkeypatch):
    monkeypatch.setenv(runs.MAX_RUNS_ENV, "2")
    registry = RunRegistry()
    corpus = corpora.builtin_corpus("demo-zh")
    tokenizer, model, train = runs.run_configs(
        corpus, GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32),
        TrainConfig(block_size=16, batch_size=4, max_steps=20_000))
    clicks, before = 16, trainer_threads()
    built, refused, gate = [], [], threading.Barrier(clicks + 1)
    peak, done = [0], threading.Event()

    def watch_threads():  # samples the trainer threads for the whole burst
        gate.wait()
        while not done.is_set():
            peak[0] = max(peak[0], trainer_threads() - before)
            time.sleep(0.0005)

    def build():
        built.append(1)
        return TrainingRun(Trainer(build_model(model, 0), tokenizer, corpus.text, train))

    def click():
        gate.wait()
        try:
            registry.start(build, corpus="demo-zh", probe="")
        except RunLimitError:
            refused.append(1)

    watcher = threading.Thread(target=watch_threads)
    watcher.start()
    threads = [threading.Thread(target=click) for _ in range(clicks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(0.05)
    done.set()
    watcher.join()
    try:
        assert len(built) == 2 and len(refused) == clicks - 2
        assert registry.active_count() == 2
        assert peak[0] <= 2 and trainer_threads() - before == 2
    finally:
        registry.stop_all()


def test_runs_whose_owner_stopped_looking_are_released(monkeypatch):
    monkeypatch.setenv(runs.IDLE_ENV, "1")  # read when the registry is made
    at = start_tiny_run()
    run_id, _ = own_run(at)
    entry = runs.registry().get(run_id)
    assert runs.registry().idle_seconds == 1
    entry.last_seen -= 5
    assert runs.registry().get(run_id) is None
    assert entry.run.state == "closed" and not entry.run.is_alive()
    assert entry.run.trainer.model is None and entry.run.trainer.optimizer is None  # freed, though we hold it
    at.run()  # the owner comes back: told the run is gone, offered a new one
    assert any("no longer on this server" in w.value for w in at.warning)
    assert not at.exception and not at.button(key="start").disabled


def test_generate_with_temperature_zero_is_deterministic():
    at = page(home(), "pages/2_Generate.py")
    at.session_state["stream_delay"] = 0
    at.slider(key="temperature").set_value(0.0)
    at.number_input(key="max_new_tokens").set_value(40).run()
    texts = []
    for seed in (1, 2):
        at.number_input(key="gen_seed").set_value(seed)
        at.button(key="generate").click().run()
        assert not at.exception
        texts.append(at.session_state["generation"]["text"])
    assert texts[0] == texts[1] and len(texts[0]) == len("深度") + 40
    assert at.code[0].value == texts[0]
    table = at.dataframe[0].value
    assert len(table) == 40 and {"chosen", "p(chosen)", "#1"} <= set(table.columns)


def test_a_demo_seed_button_sets_the_prompt():
    at = page(home(), "pages/2_Generate.py")
    at.button(key="seed:计算").click().run()
    assert at.text_input[0].value == "计算"


def test_unknown_prompt_characters_are_named_and_nothing_is_generated():
    at = page(home(), "pages/2_Generate.py")
    at.text_input[0].set_value("深度Zebra")  # the prompt sits in a form: typed, then submitted
    at.button(key="generate").click().run()
    assert any("'Z'" in w.value and "'e'" not in w.value for w in at.warning)  # only what it lacks
    assert "generation" not in at.session_state


@pytest.mark.parametrize("view, panels", [("layers", lambda c: c.num_layers),
                                          ("heads", lambda c: c.num_heads),
                                          ("grid", lambda c: c.num_layers * c.num_heads)],
                         ids=["layers", "heads", "grid"])
def test_attention_view_holds_one_heatmap_per_panel(view, panels):
    config = load_pretrained(DEFAULT_CORPUS).model.config
    at = page(home(), "pages/3_Attention.py")
    at.radio(key="attention_view").set_value(view).run()
    heatmaps = [t for i in range(len(at.get("plotly_chart"))) for t in plotly_spec(at, i)["data"]]
    assert len(heatmaps) == panels(config) and all(t["type"] == "heatmap" for t in heatmaps)
    assert "query" in heatmaps[0]["hovertemplate"] and "key" in heatmaps[0]["hovertemplate"]
    assert heatmaps[0]["x"][0] == "0:深"


def test_attention_names_unknown_characters():
    at = page(home(), "pages/3_Attention.py")
    at.text_input[0].set_value("深度 Zebra").run()
    assert any("'Z'" in w.value for w in at.warning)
    assert not at.get("plotly_chart")


def _heatmaps(at) -> list[np.ndarray]:
    charts = range(len(at.get("plotly_chart")))
    return [plotly_array(t["z"]) for i in charts for t in plotly_spec(at, i)["data"] if t["type"] == "heatmap"]


def test_attention_page_default_figure_is_the_hand_computed_attention_and_the_checkbox_drops_the_scale():
    """Each layer's panel is the mean over heads of softmax(QK^T/sqrt(d_k)), masked; ticking
    "Without 1/sqrt(d_k)" shows softmax(QK^T) instead, both computed here by hand."""
    model = load_pretrained(DEFAULT_CORPUS).model
    at = page(home(), "pages/3_Attention.py")
    text = at.text_input[0].value
    assert text == DEMO_SENTENCE
    ids = load_pretrained(DEFAULT_CORPUS).tokenizer.encode(text)
    for unscaled in (False, True):
        if unscaled:
            at.checkbox(key="attention_unscaled").check().run()
        want = hand_forward(model, ids, scale=not unscaled)["layers"]
        shown = _heatmaps(at)
        assert len(shown) == model.config.num_layers
        for layer, (z, expected) in enumerate(zip(shown, want)):
            mean = expected["weights"].mean(0).numpy()
            future = np.triu(np.ones_like(mean, dtype=bool), k=1)
            assert np.isnan(z[future]).all()  # the future is masked, drawn grey
            np.testing.assert_allclose(z[~future], mean[~future], atol=2e-5,
                                       err_msg=f"layer {layer + 1}, unscaled={unscaled}")


def test_generate_at_temperature_zero_writes_the_hand_computed_greedy_continuation():
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    at = page(home(), "pages/2_Generate.py")
    at.session_state["stream_delay"] = 0
    at.slider(key="temperature").set_value(0.0)
    at.number_input(key="max_new_tokens").set_value(12).run()
    at.button(key="generate").click().run()
    prompt = at.text_input[0].value
    ids = checkpoint.tokenizer.encode(prompt)
    for _ in range(12):
        ids.append(int(hand_forward(checkpoint.model, ids[-checkpoint.block_size:])["logits"][-1].argmax()))
    assert at.session_state["generation"]["text"] == checkpoint.tokenizer.decode(ids)


def test_the_time_lapse_replays_the_run_evaluations():
    at = start_tiny_run(eval_interval=5)
    deadline = time.monotonic() + 30
    entry = runs.registry().get(own_run(at)[0])
    while len(entry.run.snapshot().evals) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    page(at, "pages/3_Attention.py")
    steps = at.select_slider(key="timelapse_step").options
    assert len(steps) >= 2
    at.select_slider(key="timelapse_step").set_value(steps[0]).run()
    assert any(m.value.startswith(f"**Step {int(steps[0]):,}** · val loss") for m in at.markdown)


def test_scaling_page_default_figure_and_table_show_the_numbers_the_reference_demo_prints():
    at = page(home(), "pages/4_Scaling.py")
    entropy, max_weight = ({t["name"]: plotly_array(t["y"]) for t in plotly_spec(at, i)["data"]} for i in (0, 1))
    d_ks = sorted(DEMO_SCALING)
    expected = np.array([DEMO_SCALING[d] for d in d_ks])  # columns: entropy/max weight, unscaled/scaled
    np.testing.assert_allclose(entropy["no scaling"], expected[:, 0], atol=5e-5)
    np.testing.assert_allclose(max_weight["no scaling"], expected[:, 1], atol=5e-5)
    np.testing.assert_allclose(entropy["scaled by 1/√d_k"], expected[:, 2], atol=5e-5)
    np.testing.assert_allclose(max_weight["scaled by 1/√d_k"], expected[:, 3], atol=5e-5)
    table = at.table[0].value  # the numbers under the table's formatting
    assert table.index.tolist() == d_ks
    np.testing.assert_allclose(table["entropy, no scaling"], expected[:, 0], atol=5e-5)
    np.testing.assert_allclose(table["max weight, scaled"], expected[:, 3], atol=5e-5)


def test_every_scaling_chart_follows_a_change_of_the_settings():
    """The settings rerun only their fragment: the charts under the table, too, must be redrawn from
    the new experiment, not left showing the old one."""
    at = page(home(), "pages/4_Scaling.py")
    at.multiselect(key="scaling_d_ks").set_value([4, 16]).run()
    at.slider(key="scaling_seq_len").set_value(32).run()
    table = at.table[0].value
    assert table.index.tolist() == [4, 16]
    # 32 keys now: scaled scores stay close to uniform, whose entropy is ln 32, above anything 16 keys allow
    assert (np.log(16) < table["entropy, scaled"]).all() and (table["entropy, scaled"] < np.log(32)).all()
    entropy, max_weight, score_std = (plotly_spec(at, i)["data"] for i in range(3))
    for traces in (entropy, max_weight):
        assert [t["x"] for t in traces] == [["d_k=4", "d_k=16"]] * 2
    np.testing.assert_allclose(plotly_array(entropy[0]["y"]), table["entropy, no scaling"])
    np.testing.assert_allclose(plotly_array(max_weight[1]["y"]), table["max weight, scaled"])
    np.testing.assert_allclose(plotly_array(score_std[0]["x"]), [4, 16])
    np.testing.assert_allclose(plotly_array(score_std[0]["y"]), table["std of q·k"])

    at.multiselect(key="scaling_d_ks").set_value([]).run()  # nothing to draw: said, and nothing stale left
    assert not at.exception and [i.value for i in at.info] == ["Choose at least one d_k."]
    assert not at.get("plotly_chart") and not at.table


def test_a_bad_corpus_upload_gets_an_error_message():
    at = home()
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("junk.txt", b"\x00\x01\x02binary", "text/plain")).run()
    assert any("junk" in e.value and "binary" in e.value for e in at.error)
    assert at.selectbox(key=choices.CORPUS).value == DEFAULT_CORPUS


def test_an_uploaded_corpus_becomes_the_training_corpus():
    at = home()
    text = "the quick brown fox jumps over the lazy dog. " * 20
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("fox.txt", text.encode(), "text/plain")).run()
    assert not at.error
    assert at.selectbox(key=choices.CORPUS).value == "fox.txt (uploaded)"
    assert any("No model ships" in i.value for i in at.info)
    page(at, "pages/1_Train.py")
    assert any(md("fox.txt") in c.value for c in at.caption)


def test_a_bad_checkpoint_upload_gets_an_error_message():
    at = home()
    at.radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    at.file_uploader(key=uploads.CHECKPOINT_UPLOAD).set_value(("model.zip", b"not a zip", "application/zip")).run()
    assert any(e.value.startswith("model") and "zip" in e.value for e in at.error)


def test_a_downloaded_checkpoint_loads_again_on_home():
    at = start_tiny_run()
    wait_for_step(at, 1)
    entry = runs.registry().get(own_run(at)[0])
    data = runs.run_checkpoint_zip(entry)
    page(at, "streamlit_app.py")
    at.radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    at.file_uploader(key=uploads.CHECKPOINT_UPLOAD).set_value(("mine.zip", data, "application/zip")).run()
    assert not at.error
    values = {m.label: m.value for m in at.metric}
    assert values["Parameters"] == f"{entry.run.trainer.model.num_params():,}"
    assert values["Corpus"] == DEFAULT_CORPUS


def test_an_empty_prompt_starts_from_a_newline_and_says_so():
    at = page(home(), "pages/2_Generate.py")
    at.session_state["stream_delay"] = 0
    at.number_input(key="max_new_tokens").set_value(5).run()
    at.text_input[0].set_value("")
    at.button(key="generate").click().run()
    assert any("empty prompt" in c.value for c in at.caption)
    assert len(at.session_state["generation"]["steps"]) == 5


def test_streamed_text_is_shown_literally_by_markdown():
    shown = "".join(markdown_stream(["a*b", "\n", "    c_d"]))
    assert shown == "a\\*b  \n\u00a0\u00a0\u00a0\u00a0c\\_d"


def test_a_new_registry_stops_trainer_threads_an_old_one_left_behind():
    corpus = corpora.builtin_corpus("demo-zh")
    tokenizer, model, train = runs.run_configs(
        corpus, GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32),
        TrainConfig(block_size=16, batch_size=4, max_steps=20_000))
    orphan = TrainingRun(Trainer(build_model(model, 0), tokenizer, corpus.text, train))
    orphan.start()  # as if started through a registry that a code reload replaced
    runs.registry()
    deadline = time.monotonic() + 5
    while orphan.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not orphan.is_alive()



def tiny_training_run() -> TrainingRun:
    corpus = corpora.builtin_corpus("demo-zh")
    tokenizer, model, train = runs.run_configs(
        corpus, GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32),
        TrainConfig(block_size=16, batch_size=4, max_steps=20_000))
    return TrainingRun(Trainer(build_model(model, 0), tokenizer, corpus.text, train))


def test_a_run_refuses_pause_stop_and_replace_from_anyone_without_its_key():
    """The watcher's buttons are disabled (see above; AppTest, like a browser, cannot click them);
    behind them the registry itself refuses every request that lacks the owner's key."""
    owner = start_tiny_run()
    run_id, _ = own_run(owner)
    for action in ("pause", "resume", "stop"):
        for forged_key in ("not-the-key", "", None):
            with pytest.raises(NotOwnerError):
                runs.registry().control(run_id, forged_key, action)
    theirs = runs.registry().start(tiny_training_run, corpus="demo-zh", probe="",
                                        replace=(run_id, "not-the-key"))
    assert theirs.run_id != run_id
    assert runs.registry().get(run_id).run.state == "running"  # the owner's run is untouched
    owner.run()
    assert owner.metric[0].value == "running" and not owner.button(key="pause").disabled


@pytest.mark.parametrize(
    "failure, message",
    [(MemoryError(), r"out of memory at step 6 \(MemoryError\)\. Use a smaller batch_size"),
     (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"),
      r"out of memory at step 6 \(RuntimeError: CUDA out of memory\. .*\)\. Use a smaller batch_size"),
     (None, r"^Training stopped: the loss became nan at step 6: .* Try a lower learning rate")],
    ids=["MemoryError", "RuntimeError-out-of-memory", "nan-loss"])
def test_a_failure_in_the_training_thread_shows_on_train_and_the_app_keeps_serving(monkeypatch, failure, message):
    real = Trainer.compute_gradients

    def compute_gradients(self):
        if self.step >= 5:
            if failure is not None:
                raise failure
            with torch.no_grad():  # what too high a learning rate does: weights that are not numbers
                self.model.final_norm.weight.fill_(float("nan"))
        return real(self)

    monkeypatch.setattr(Trainer, "compute_gradients", compute_gradients)
    at = start_tiny_run()
    entry = runs.registry().get(own_run(at)[0])
    deadline = time.monotonic() + 30
    while entry.run.state != "error" and time.monotonic() < deadline:
        time.sleep(0.05)
    at.run()
    assert not at.exception
    assert at.metric[0].value == "error"
    assert any(re.search(message, unescaped(e.value)) for e in at.error), [e.value for e in at.error]
    assert at.button(key="pause").disabled and not at.button(key="start").disabled
    assert runs.registry().active_count() == 0  # its training slot is free again

    for path in PAGES[1:]:  # the failed run stays the loaded model, and every page still renders
        assert not page(at, path).exception
    page(at, "pages/2_Generate.py").session_state["stream_delay"] = 0
    at.number_input(key="max_new_tokens").set_value(3)
    at.button(key="generate").click().run()
    assert not at.exception
    if failure is None:
        assert any("training diverged" in e.value for e in at.error)
    else:
        assert len(at.session_state["generation"]["steps"]) == 3
    assert not home().exception  # other sessions are served as before

    monkeypatch.undo()
    page(at, "pages/1_Train.py").button(key="start").click().run()
    assert not at.error and at.metric[0].value == "running"


def test_train_page_chart_shows_the_runs_own_history():
    at = start_tiny_run(eval_interval=10)
    entry = runs.registry().get(own_run(at)[0])
    deadline = time.monotonic() + 30
    while len(entry.run.snapshot().evals) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    at.button(key="stop").click().run()
    history = entry.run.snapshot().history
    traces = {t["name"]: t for t in plotly_spec(at)["data"]}
    np.testing.assert_allclose(plotly_array(traces["train loss"]["y"]), [e.train_loss for e in history])
    evals = [e for e in history if e.val_loss is not None]
    np.testing.assert_allclose(plotly_array(traces["val loss"]["y"]), [e.val_loss for e in evals])
    np.testing.assert_allclose(plotly_array(traces["learning rate"]["y"]), [e.lr for e in history])


def test_reset_waits_at_step_0_and_step_trains_exactly_the_chosen_number_of_steps():
    at = tiny_settings(page(home(), "pages/1_Train.py"), max_steps=500)
    at.button(key="reset").click().run()
    assert not at.exception and at.metric[0].value == "paused" and step_of(at) == 0
    entry = runs.registry().get(own_run(at)[0])
    for size, total in ((10, 10), (1, 11)):
        at.segmented_control(key="step_size").set_value(size).run()
        at.button(key="step").click().run()
        deadline = time.monotonic() + 20
        while not (entry.run.state == "paused" and entry.run.trainer.step == total) and time.monotonic() < deadline:
            time.sleep(0.05)
        at.run()
        assert at.metric[0].value == "paused" and step_of(at) == total
    assert at.button(key="step").label == "Step ×1"


def test_a_settings_link_fills_another_sessions_form_and_a_bad_one_says_why():
    at = tiny_settings(page(home(), "pages/1_Train.py"), max_steps=321)
    at.select_slider(key="lr").set_value(1e-2).run()
    link = at.code[0].value
    assert "?train=" in link and "max_steps:321" in link and "lr:0.01" in link
    value = link.split("?train=")[1].split("&")[0]
    other = page(home(train=value), "pages/1_Train.py")
    assert not other.exception and any("settings of the link" in i.value for i in other.info)
    assert other.number_input(key="max_steps").value == 321 and other.select_slider(key="lr").value == 1e-2
    assert other.select_slider(key="d_model").value == 16 and other.slider(key="num_layers").value == 1
    assert runs.OWN_RUN not in other.session_state  # filled, not started
    bad = page(home(train="num_heads:3"), "pages/1_Train.py")
    assert any("cannot train" in w.value and "divisible" in w.value for w in bad.warning)
    assert bad.select_slider(key="num_heads").value == minigpt.PRESETS[minigpt.DEFAULT_PRESET].model.num_heads
