"""A learner's first hour: defaults that teach, no dead ends (issue B1-B12), each reproduced first.

Page tests with AppTest; what only a browser shows (a phone-sized screen, Enter in the prompt
box) is in test_browser.py.
"""
import time

import numpy as np
import pytest
import torch

from app import choices, runs, train_form, uploads
from helpers import (AppTest, ROOT, hand_forward, home, own_run, page, plotly_array, plotly_spec, tiny_settings,
                     unescaped, wait_for_step)
from minigpt import (DEFAULT_CORPUS, PRESETS, CharTokenizer, GPTConfig, TrainConfig, Trainer, build_model, load_corpus,
                     load_pretrained, generate, uniform_loss)
from minigpt.data import split_tokens
from minigpt.train import estimate_loss

POEM = ("床前明月光疑是地上霜举头望明月低头思故乡\n春眠不觉晓处处闻啼鸟夜来风雨声花落知多少\n"
        "白日依山尽黄河入海流欲穷千里目更上一层楼\n红豆生南国春来发几枝愿君多采撷此物最相思\n") * 2  # 8 lines


def _wait(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _upload_and_train(text: str, **settings) -> AppTest:
    at = home()
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("poem.txt", text.encode(), "text/plain")).run()
    at = page(at, "pages/1_Train.py")
    for key, value in settings.items():
        at.session_state[key] = value
    at.run()
    at.button(key="start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def _finished(at: AppTest) -> None:
    entry = runs.registry().get(own_run(at)[0])
    _wait(lambda: entry.run.state == "finished")


# ---------------------------------------------------------------- the default path teaches


def _val_loss(corpus: str) -> tuple[float, float]:
    checkpoint = load_pretrained(corpus)
    ids = torch.tensor(checkpoint.tokenizer.encode(load_corpus(corpus)))
    _, val = split_tokens(ids, TrainConfig.val_fraction, checkpoint.block_size)
    cfg = TrainConfig(batch_size=32, block_size=checkpoint.block_size, eval_iters=20)
    return estimate_loss(checkpoint.model, val, cfg, seed=0), uniform_loss(checkpoint.tokenizer.vocab_size)


def _longest_copied_run(sample: str, corpus: str) -> int:
    longest = 0
    for i in range(len(sample)):
        while i + longest < len(sample) and sample[i : i + longest + 1] in corpus:
            longest += 1
    return longest


def test_the_default_model_generalises_where_the_demo_paragraph_can_only_be_recited():
    """The default was the demo's 448-character paragraph: val loss 7.8-10 nats, above ln 208 = 5.34,
    and samples that recite it. The default corpus must give a val loss well below uniform and new text."""
    assert DEFAULT_CORPUS == "course-zh"
    val, uniform = _val_loss(DEFAULT_CORPUS)
    assert val < 0.7 * uniform, (val, uniform)
    demo_val, demo_uniform = _val_loss("demo-zh")
    assert demo_val > demo_uniform  # the reference demo's corpus stays one click away, and memorises
    text = load_corpus(DEFAULT_CORPUS)
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    samples = {t: generate(checkpoint.model, checkpoint.tokenizer, "注意力", max_new_tokens=80, temperature=t,
                           seed=0, block_size=checkpoint.block_size)[3:] for t in (0.5, 1.2)}
    assert all(_longest_copied_run(s, text) < 20 for s in samples.values())  # new text, not a recital
    assert samples[0.5] != samples[1.2]
    demo = load_pretrained("demo-zh")
    recital = generate(demo.model, demo.tokenizer, "深度", max_new_tokens=40, temperature=0.8, seed=0,
                       block_size=demo.block_size)
    assert _longest_copied_run(recital, load_corpus("demo-zh")) >= 30


def test_temperature_visibly_reshapes_the_default_models_next_character_distribution():
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    logits = hand_forward(checkpoint.model, checkpoint.tokenizer.encode("注意力"))["logits"][-1]

    def entropy(t):
        p = torch.softmax(logits / t, -1)
        return float(-(p * p.log()).sum())

    assert entropy(0.5) < 0.5 * entropy(1.5)  # the demo model's "1.00 / 0.00 / 0.00" showed nothing


def test_the_train_page_opens_on_the_default_preset_and_presets_fill_every_setting():
    at = page(home(), "pages/1_Train.py")
    default = PRESETS["small"]
    assert {f.key: at.session_state[f.key] for f in train_form.MODEL_FIELDS} == \
        {f.key: getattr(default.model, f.name) for f in train_form.MODEL_FIELDS}
    for name, preset in PRESETS.items():
        at.button(key=f"preset:{name}").click().run()
        assert not at.exception and not at.error
        for f in train_form.FIELDS:
            expected = getattr(preset.model if f.config.__name__ == "GPTConfig" else preset.train, f.name)
            assert at.session_state[f.key] == expected, (name, f.key)
        assert at.session_state[train_form.EARLY_STOP] == (preset.train.early_stop_patience > 0)


def test_every_hyperparameter_and_metric_explains_itself():
    at = page(home(), "pages/1_Train.py")
    widgets = [*at.slider, *at.select_slider, *at.number_input, *at.checkbox]
    for f in train_form.FIELDS:
        w = next(w for w in widgets if w.key == f.key)
        assert w.help and len(w.help) > 40, f.key
    helps = " ".join(w.help for w in widgets)
    for word in ("d_model", "d_ff", "max_len", "block_size", "dropout", "Warmup"):
        assert word in helps
    at.button(key="start").click().run()
    wait_for_step(at, 1)
    metric_help = {m.label: m.proto.help for m in at.metric}
    assert "nats" in metric_help["Val loss (nats)"] and "ln V" in metric_help["Val loss (nats)"]
    assert "characters the model trains on each second" in metric_help["Tokens/s"]
    page(at, "pages/3_Attention.py")
    captions = " ".join(c.value for c in at.caption) + " ".join(m.value for m in at.markdown)
    assert "max_len" in captions and "block_size" in captions and "first row is always 1.0" in captions


def test_memorisation_is_named_on_the_chart_and_in_words():
    at = home()
    at.selectbox(key=choices.CORPUS).set_value("demo-zh").run()
    at = page(at, "pages/1_Train.py")
    at.button(key="preset:tiny").click().run()
    at.session_state["lr"] = 1e-2
    at.session_state["eval_interval"] = 25
    at.run()
    at.button(key="start").click().run()
    _finished(at)
    at.run()
    warnings = " ".join(w.value for w in at.warning)
    assert "Overfitting" in warnings and "memorising" in warnings
    assert f"ln {load_pretrained('demo-zh').tokenizer.vocab_size}" in warnings  # worse than guessing
    assert any("never appear in the training part" in i.value for i in at.info)
    annotations = [a["text"] for a in plotly_spec(at)["layout"]["annotations"]]
    assert any("overfitting" in a for a in annotations) and any("ln V" in a for a in annotations)


def test_early_stopping_ends_a_run_once_val_loss_stops_improving():
    text = load_corpus("demo-zh")
    tok = CharTokenizer.from_text(text)
    cfg = TrainConfig(batch_size=8, block_size=16, max_steps=2000, warmup_steps=5, eval_interval=10, eval_iters=4,
                      lr=1e-2, early_stop_patience=2, seed=0)
    model = build_model(GPTConfig(vocab_size=tok.vocab_size, d_model=32, num_heads=2, num_layers=1, d_ff=64,
                                  max_len=32, dropout=0.0), 0)
    trainer = Trainer(model, tok, text, cfg)
    events = [e for e in trainer.events() if e.val_loss is not None]
    assert trainer.stopped_early and trainer.step < cfg.max_steps
    vals = [e.val_loss for e in events]
    best = int(np.argmin(vals))
    assert best == len(vals) - 1 - cfg.early_stop_patience  # exactly `patience` evaluations without a new low
    assert all(v >= vals[best] for v in vals[best + 1:])
    assert trainer.evaluate()[1] == pytest.approx(vals[best], abs=1e-6)  # it ends on the best weights


# ---------------------------------------------------------------- dead ends


def test_b1_the_default_prompt_of_a_model_without_spaces_uses_only_its_characters():
    at = _upload_and_train(POEM, d_model=32, num_heads=2, num_layers=1, d_ff=64, max_len=16, block_size=8,
                           max_steps=60, eval_interval=30, batch_size=8)
    page(at, "pages/2_Generate.py")
    prompt = at.text_input[0].value
    assert prompt and " " not in prompt and not CharTokenizer.from_text(POEM).unknown_chars(prompt)
    at.session_state["stream_delay"] = 0
    at.button(key="generate").click().run()
    assert not at.warning and not at.error and at.session_state["generation"]["text"].startswith(prompt)


def test_b2_an_uploaded_checkpoint_brings_its_own_texts():
    at = _upload_and_train(POEM, d_model=32, num_heads=2, num_layers=1, d_ff=64, max_len=16, block_size=8,
                           max_steps=30, eval_interval=30, batch_size=8)
    _finished(at)
    data = runs.run_checkpoint_zip(runs.registry().get(own_run(at)[0]))
    fresh = home()  # a new session, on the default corpus
    fresh.radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    fresh.file_uploader(key=uploads.CHECKPOINT_UPLOAD).set_value(("poem.zip", data, "application/zip")).run()
    page(fresh, "pages/3_Attention.py")
    text = fresh.text_input[0].value
    assert text == POEM.splitlines()[0][:8], text  # the poem's own first line, no invisible newline
    assert len(text) <= 8 and not fresh.warning  # it fits the trained 8 positions: nothing is cut, nothing said
    heatmap = plotly_spec(fresh)["data"][0]
    assert heatmap["x"][0] == f"0:{text[0]}"


def test_b5_after_a_reload_the_train_page_shows_the_runs_own_settings():
    at = home()
    at = page(at, "pages/1_Train.py")
    at.button(key="preset:tiny").click().run()
    at.session_state["d_model"] = 128
    at.session_state["num_layers"] = 5
    at.session_state["max_steps"] = 20_000
    at.run()
    at.button(key="start").click().run()
    run_id, key = own_run(at)
    entry = runs.registry().get(run_id)
    params = entry.run.trainer.model_params
    refreshed = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    refreshed.query_params["run"], refreshed.query_params["key"] = run_id, key
    page(refreshed.run(), "pages/1_Train.py")
    assert refreshed.session_state["d_model"] == 128 and refreshed.session_state["num_layers"] == 5
    run_line = next(m.value for m in refreshed.markdown if m.value.startswith(f"**Run `{run_id}`**"))
    assert "5 layers" in run_line and "d_model 128" in run_line and f"{params:,}" in run_line
    assert any(f"**{params:,}** parameters" in c.value for c in refreshed.caption)  # the form says the same


def test_b7_the_unscaled_caption_counts_the_rows_whose_top_key_changed():
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    at = page(home(), "pages/3_Attention.py")
    at.checkbox(key="attention_unscaled").check().run()
    text = at.text_input[0].value
    ids = checkpoint.tokenizer.encode(text)
    weights = {scale: np.stack([l["weights"].numpy() for l in hand_forward(checkpoint.model, ids, scale)["layers"]])
               for scale in (True, False)}
    moved = (weights[True].argmax(-1) != weights[False].argmax(-1)).reshape(len(weights[True]), -1)  # by hand
    caption = next(c.value for c in at.caption if "most-attended key changed" in c.value)
    assert moved[0].sum() == 0 and moved[1:].sum() > 0  # layer 1 cannot change; later layers here do
    for layer, rows in enumerate(moved):
        assert f"layer {layer + 1}: {rows.sum()} of {rows.size}" in caption
    assert "same ranking" not in caption


def test_b9_a_new_request_never_shows_the_previous_answer():
    at = page(home(), "pages/2_Generate.py")
    at.session_state["stream_delay"] = 0
    at.button(key="generate").click().run()
    assert at.code  # an answer
    at.text_input[0].set_value("注意Zebra")
    at.button(key="generate").click().run()
    assert at.warning and not at.code and not at.dataframe  # the warning alone: no old text under it


def test_b10_a_watcher_follows_the_owner_to_the_new_run():
    owner = tiny_settings(page(home(), "pages/1_Train.py"))
    owner.button(key="start").click().run()
    first, _ = own_run(owner)
    watcher = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    watcher.query_params["run"] = first
    page(watcher.run(), "pages/1_Train.py")
    owner.button(key="start").click().run()  # "Start a new run"
    second, _ = own_run(owner)
    page(watcher, "pages/2_Generate.py")
    assert any(f"`{second}`" in w.value and "new run" in w.value for w in watcher.warning)
    assert watcher.session_state[runs.WATCHED_RUN] == second and watcher.query_params["run"] == second
    assert not any("No training run" in i.value for i in watcher.info)
    page(watcher, "pages/1_Train.py")
    assert any(f"watching run `{second}`" in i.value for i in watcher.info)


def test_b11_top_k_above_the_vocabulary_is_clamped_and_said_and_zero_tokens_is_refused():
    at = page(home(), "pages/2_Generate.py")
    at.session_state["stream_delay"] = 0
    at.number_input(key="top_k").set_value(999)
    at.number_input(key="max_new_tokens").set_value(5).run()
    at.button(key="generate").click().run()
    assert any("top-k 999" in unescaped(c.value) and "every character stays in" in unescaped(c.value)
               for c in at.caption)
    assert len(at.session_state["generation"]["steps"]) == 5
    at.number_input(key="max_new_tokens").set_value(0).run()
    at.button(key="generate").click().run()
    assert any("max_new_tokens must be" in unescaped(e.value) for e in at.error) and "generation" not in at.session_state


def test_b12_a_read_only_link_without_the_key_is_offered():
    at = tiny_settings(page(home(), "pages/1_Train.py"))
    at.button(key="start").click().run()
    run_id, key = own_run(at)
    link = next(c.value for c in at.code if "run=" in c.value)
    assert link.endswith(f"?run={run_id}&lang=en") and key not in link  # the class opens it in the teacher's language


def test_removing_an_uploaded_corpus_goes_back_to_the_default():
    at = home()
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("poem.txt", POEM.encode(), "text/plain")).run()
    assert at.selectbox(key=choices.CORPUS).value == "poem.txt (uploaded)"
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(None).run()
    assert at.selectbox(key=choices.CORPUS).value == DEFAULT_CORPUS
    assert "poem.txt (uploaded)" not in at.selectbox(key=choices.CORPUS).options


def test_low_one_layer_is_singular_and_the_step_metric_fits():
    at = tiny_settings(page(home(), "pages/1_Train.py"))
    at.button(key="start").click().run()
    wait_for_step(at, 1)
    labels = {m.label: m.value for m in at.metric}
    assert "Step (of 20,000)" in labels and "/" not in labels["Step (of 20,000)"]
    page(at, "streamlit_app.py")
    assert any("1 layer ×" in c.value for c in at.caption) and not any("1 layers" in c.value for c in at.caption)


def test_low_the_scaling_caption_names_the_demo_only_at_the_demos_settings():
    at = page(home(), "pages/4_Scaling.py")
    assert any("are the ones the reference demo prints" in c.value for c in at.caption)
    at.slider(key="scaling_seq_len").set_value(32).run()
    assert not any("are the ones the reference demo prints" in c.value for c in at.caption)


def test_low_tokens_per_second_is_steady():
    from minigpt import TrainingRun
    from minigpt.train import TrainEvent

    run = TrainingRun.__new__(TrainingRun)  # only the snapshot's arithmetic is under test
    speeds = [1800, 5400, 5300, 1900, 5200, 5500, 5400]
    run._history = [TrainEvent(step=i + 1, max_steps=10, train_loss=1.0, lr=1e-3, tokens_per_sec=s, elapsed=i)
                    for i, s in enumerate(speeds)]
    import threading
    run._lock, run._evals, run._state, run._error, run.run_id = threading.Lock(), [], "running", None, "x"
    run.trainer = type("T", (), {"step": 7, "cfg": TrainConfig(max_steps=10), "elapsed": 7.0,
                                 "stopped_early": False})()
    assert run.snapshot().tokens_per_sec == sorted(speeds)[len(speeds) // 2]  # the median, not the last jump


def test_b8_a_long_text_is_paged_and_every_position_keeps_its_label():
    at = page(home(), "pages/3_Attention.py")
    text = load_corpus(DEFAULT_CORPUS).replace("\n", "")[200:230]  # 30 characters, inside the trained 32
    at.text_input[0].set_value(text).run()
    pages = at.select_slider(key=f"attention_page:{len(text)}")
    assert pages.options and not at.exception
    assert pages.options == ["1–24", "25–30"]
    for index in range(len(pages.options)):
        at.select_slider(key=f"attention_page:{len(text)}").set_value(index).run()
        assert not at.exception
        spec = plotly_spec(at)
        ticks = spec["layout"]["xaxis"]["ticktext"]
        assert 1 <= len(ticks) <= 24 and spec["layout"]["xaxis"]["tickangle"] == 0
        assert plotly_array(spec["data"][0]["z"]).shape == (len(ticks), len(ticks))


def test_overfitting_advice_offers_only_what_the_learner_has_not_tried():
    from app import advice
    from minigpt import Overfitting

    over = Overfitting(best_step=200, best_val=4.1, step=600, val=4.6, train_at_best=3.0, train=1.2)
    demo = advice.overfitting_warning(over, 448, early_stopping=False)
    assert "a larger corpus" in demo and "early stopping" in demo and "448 characters" in demo
    course = advice.overfitting_warning(over, 9_969, early_stopping=True)
    assert "a larger corpus" not in course and "early stopping" not in course and "dropout" in course
