"""Every kind of bad input, in one table, met three ways: by the library, the app and the CLI.

Each row of TABLE is one input, with an id `<kind>/<name>`. A refused input must raise the named
error with a sentence that says what is wrong; an accepted one must work and say what was done
with it. The same rows then drive the app (an `st.error` or `st.warning` carrying the message, and
never an exception element) and the command line (exit status 2 and one `error: ` line, never a
traceback). Where a widget cannot hold a value at all, the app row is `widget-bounded`: it checks
the widget's range and that a forged out-of-range value (what a doctored client could send) is
dropped by Streamlit, so the page keeps a valid one. A channel that has no such input says why.

    pytest tests/cross/test_bad_inputs.py
"""
from __future__ import annotations

import functools
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import torch
from streamlit.testing.v1 import AppTest

from app.state import choices, runs
from app.views import uploads
from app.state.corpora import UPLOADED_CORPUS_KEY
from helpers.apptest import home
from helpers.checkpoints import (RunsCode, TOKENIZER, bomb_zip, edit, folder_files, make_zip, mutate,
                                 replace_weights, saved, weights_path)
from minigpt import (CharTokenizer, CheckpointError, ConfigError, CorpusError, GPTConfig, Sampling, SamplingError,
                     TrainConfig, Trainer, build_model, check_corpus_fits, check_max_new_tokens, check_memory_budget,
                     generate,
                     load_corpus, load_pretrained, load_zip, prepare_prompt)
from minigpt.sample import stream
from minigpt.checkpoint import from_pretrained
from minigpt.corpus import MAX_CORPUS_BYTES, decode_corpus
from minigpt.pretrained import pretrained_dir
from minigpt.tokenizer import UnknownCharactersError
from minigpt.header import CONFIG_NAME
from minigpt.cli import main
from minigpt.sample import MAX_PROMPT_CHARS
from app.chrome.site import GENERATE, TRAIN

TRAIN_PAGE, GENERATE_PAGE = TRAIN.script, GENERATE.script

TINY_MODEL = dict(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32, dropout=0.0)

TINY_TRAIN = dict(block_size=16, batch_size=4, max_steps=2, eval_interval=1, eval_iters=1)

TINY_FLAGS = ["--d-model", "16", "--num-heads", "2", "--num-layers", "1", "--d-ff", "32", "--max-len", "32",
              "--block-size", "16", "--batch-size", "4", "--max-steps", "2", "--eval-interval", "1",
              "--eval-iters", "1"]

APP_MEMORY_BUDGET = runs.DEFAULT_MEMORY_MB * 2**20

DEMO = "demo-zh"

DEMO_TEXT = load_corpus(DEMO)


@dataclass(frozen=True)
class Widgets:
    """The app meets the input through these widget values on `page` (after an optional corpus upload)."""

    page: str
    values: dict[str, Any]
    corpus: bytes | None = None
    says: str = ""               # for accepted input: what the widget's label or help states


@dataclass(frozen=True)
class Bounded:
    """The app's widget cannot hold the value: its range excludes it and Streamlit drops a forged one."""

    page: str
    key: str
    value: Any


@dataclass(frozen=True)
class Case:
    id: str                      # "<kind>/<name>"
    value: Any                   # bytes, a prompt, settings, or builders; see the runners below
    raises: type[Exception] | None
    message: str                 # regex: in the error, or in what an accepted input says was done
    app: Widgets | Bounded | str | None = None  # None: the kind's own path; str: why the app has no such input
    cli: list[str] | str | None = None          # None: the kind's own command; str: why the CLI has none

    @property
    def kind(self) -> str:
        return self.id.split("/")[0]


def png_bytes() -> bytes:
    """A real 1x1 PNG, as if renamed to .txt."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
            + chunk(b"IEND", b""))


MIXED = "Hello 世界! Привет, мир. مرحبا 🌍🚀 café naïve 👩‍💻\n" * 12

SHORT_CORPUS = b"abcdefghij" * 6     # 60 characters: 50 windows of 4 in its training split


def _zipped(build_folder: Callable[[Path], Path]) -> Callable[[Path], bytes]:
    return lambda tmp_path: make_zip(folder_files(build_folder(tmp_path)))


def _pickle_folder(name: str) -> Callable[[Path], Path]:
    def build(tmp_path: Path) -> Path:
        path = tmp_path / "ckpt"
        path.mkdir()
        torch.save(RunsCode(tmp_path / "code-ran"), path / name)  # unpickling it would create the marker
        return path
    return build


def _pickle_as_model_safetensors(tmp_path: Path) -> Path:
    path = saved(tmp_path)
    torch.save(RunsCode(tmp_path / "code-ran"), weights_path(path))
    return path


def _torch_save_zip(tmp_path: Path) -> bytes:
    path = tmp_path / "model.pt"
    torch.save(RunsCode(tmp_path / "code-ran"), path)
    return path.read_bytes()  # torch.save's own zip, uploaded as if it were a checkpoint zip


def _empty_folder(tmp_path: Path) -> Path:
    (tmp_path / "ckpt").mkdir()
    return tmp_path / "ckpt"


_truncated = mutate(lambda p: weights_path(p).write_bytes(weights_path(p).read_bytes()[:100]))

_truncated_rehashed = mutate(lambda p: replace_weights(p, weights_path(p).read_bytes()[:100]))

_no_config = mutate(lambda p: (p / CONFIG_NAME).unlink())

_wrong_types = edit(model__d_model="64", model__dropout="none")

_unknown_keys = edit(model__n_embd=16)

_shape_mismatch = edit(model__d_model=32)

_vocab_mismatch = edit(vocab=TOKENIZER.chars[:-1])

ZIP_ONLY = "the CLI reads checkpoint folders; zips come through the app's upload"


def _sampling_cli(*flags: str) -> list[str]:
    return ["sample", "--checkpoint", "{pretrained}", "--prompt", "深度", "--max-new-tokens", "3", *flags]


def _train_cli(*flags: str) -> list[str]:
    return ["train", "--corpus", DEMO, "--out", "{out}", *TINY_FLAGS, *flags]


TABLE = [
    # corpora: bytes, as uploaded or read from a file
    Case("corpus/empty", b"", CorpusError, "is empty"),
    Case("corpus/single-character-repeated", b"a" * 500, CorpusError, "single distinct character"),
    Case("corpus/shorter-than-block_size+1", b"hello world", CorpusError, r"fewer than block_size \+ 1"),
    Case("corpus/binary-png-renamed-txt", png_bytes(), CorpusError, "binary file"),
    Case("corpus/control-bytes", bytes(range(1, 32)) * 20, CorpusError, "binary file .*control characters"),
    Case("corpus/gbk", ("深度学习是人工智能的重要领域。" * 30).encode("gbk"), None, "深度学习是人工智能的重要领域"),
    Case("corpus/latin-1", ("héllo wörld, ça va très bien. " * 30).encode("latin-1"), CorpusError,
         "not valid UTF-8 text .*nor Chinese text in GBK"),
    Case("corpus/utf-16-with-bom", ("UTF-16 with its byte-order mark: 深度学习 😀\n" * 12).encode("utf-16"),
         None, "深度学习 😀"),  # the BOM names the encoding, so the text is decoded, not refused
    Case("corpus/utf-16-without-bom", ("no byte-order mark\n" * 30).encode("utf-16-le"), CorpusError, "binary file"),
    Case("corpus/over-size-limit", lambda: b"ab\n" * (MAX_CORPUS_BYTES // 3 + 1), CorpusError,
         r"the limit is 20 MB"),
    Case("corpus/only-whitespace", b" \n\t \r\n" * 50, CorpusError, "only whitespace"),
    Case("corpus/mixed-scripts-and-emoji", MIXED.encode("utf-8"), None, "世界! Привет, мир. مرحبا 🌍🚀"),

    # prompts, for the shipped demo-zh model (trained on 30-character windows)
    Case("prompt/empty", "", None, r"empty prompt: starting from '\\n'"),
    Case("prompt/unknown-characters", "深度Zebra", UnknownCharactersError, "'Z'.*'b'"),
    Case("prompt/longer-than-the-window", DEMO_TEXT[1:46], None, "has 45 characters; the model sees only the last 30"),
    Case("prompt/10000-character-paste", (DEMO_TEXT.replace("\n", "") * 30)[:10_000], None,
         "has 10000 characters; the model sees only the last 30"),
    Case("prompt/over-the-paste-limit", "深" * (MAX_PROMPT_CHARS + 1), SamplingError, "the limit is 100,000"),

    # sampling settings: fields of a Sampling record, or the number of new tokens
    Case("sampling/temperature-0", dict(temperature=0.0), None, "greedy",
         app=Widgets(GENERATE_PAGE, {"temperature": 0.0}, says="0 = greedy"), cli=_sampling_cli("--temperature", "0")),
    Case("sampling/temperature-negative", dict(temperature=-1.0), SamplingError, "temperature must be a number >= 0",
         app=Bounded(GENERATE_PAGE, "temperature", -1.0), cli=_sampling_cli("--temperature", "-1")),
    Case("sampling/temperature-nan", dict(temperature=float("nan")), SamplingError, "temperature must be .* got nan",
         app=Bounded(GENERATE_PAGE, "temperature", float("nan")), cli=_sampling_cli("--temperature", "nan")),
    Case("sampling/temperature-inf", dict(temperature=float("inf")), SamplingError, "temperature must be .* got inf",
         app=Bounded(GENERATE_PAGE, "temperature", float("inf")), cli=_sampling_cli("--temperature", "inf")),
    Case("sampling/temperature-huge", dict(temperature=1e6), SamplingError, "above 10: the output would be noise",
         app=Bounded(GENERATE_PAGE, "temperature", 1e6), cli=_sampling_cli("--temperature", "1e6")),
    Case("sampling/top-k-0", dict(top_k=0), None, "off",
         app=Widgets(GENERATE_PAGE, {"top_k": 0}, says="0 = off"), cli=_sampling_cli("--top-k", "0")),
    Case("sampling/top-k-above-vocabulary", dict(top_k=10_000), None, "every character",
         app=Widgets(GENERATE_PAGE, {"top_k": 10_000}, says="every character stays in"),
         cli=_sampling_cli("--top-k", "10000")),
    Case("sampling/top-k-negative", dict(top_k=-1), SamplingError, "top_k must be a whole number >= 0",
         app=Widgets(GENERATE_PAGE, {"top_k": -1}), cli=_sampling_cli("--top-k", "-1")),
    Case("sampling/top-p-0", dict(top_p=0.0), SamplingError, r"top_p must lie in \(0, 1\]",
         app=Bounded(GENERATE_PAGE, "top_p", 0.0), cli=_sampling_cli("--top-p", "0")),
    Case("sampling/top-p-above-1", dict(top_p=1.5), SamplingError, r"top_p must lie in \(0, 1\]",
         app=Bounded(GENERATE_PAGE, "top_p", 1.5), cli=_sampling_cli("--top-p", "1.5")),
    Case("sampling/top-p-nan", dict(top_p=float("nan")), SamplingError, r"top_p must lie in \(0, 1\].*nan",
         app=Bounded(GENERATE_PAGE, "top_p", float("nan")), cli=_sampling_cli("--top-p", "nan")),
    Case("sampling/max_new_tokens-0", dict(max_new_tokens=0), SamplingError, "max_new_tokens must be .* from 1 to 2000",
         app=Widgets(GENERATE_PAGE, {"max_new_tokens": 0}), cli=_sampling_cli("--max-new-tokens", "0")),
    Case("sampling/max_new_tokens-negative", dict(max_new_tokens=-5), SamplingError, "max_new_tokens must be",
         app=Widgets(GENERATE_PAGE, {"max_new_tokens": -5}), cli=_sampling_cli("--max-new-tokens", "-5")),
    Case("sampling/max_new_tokens-above-cap", dict(max_new_tokens=2001), SamplingError, "from 1 to 2000, got 2001",
         app=Widgets(GENERATE_PAGE, {"max_new_tokens": 2001}), cli=_sampling_cli("--max-new-tokens", "2001")),

    # hyperparameters: GPTConfig and TrainConfig fields over the tiny settings, on demo-zh
    Case("hparams/d_model-not-divisible-by-num_heads", dict(d_model=30, num_heads=4), ConfigError,
         r"d_model \(30\) must be divisible by num_heads \(4\)",
         app=Bounded(TRAIN_PAGE, "d_model", 30), cli=_train_cli("--d-model", "30", "--num-heads", "4")),
    Case("hparams/odd-d_model", dict(d_model=33, num_heads=1), ConfigError, r"d_model \(33\) must be even",
         app=Bounded(TRAIN_PAGE, "d_model", 33), cli=_train_cli("--d-model", "33", "--num-heads", "1")),
    Case("hparams/block_size-above-max_len", dict(block_size=64), ConfigError,
         r"block_size \(\d+\) cannot exceed max_len",
         app=Widgets(TRAIN_PAGE, {"max_len": 16}), cli=_train_cli("--block-size", "64")),
    Case("hparams/zero-layers", dict(num_layers=0), ConfigError, "num_layers must be an integer >= 1",
         app=Bounded(TRAIN_PAGE, "num_layers", 0), cli=_train_cli("--num-layers", "0")),
    Case("hparams/lr-0", dict(lr=0.0), ConfigError, "lr must be a positive number",
         app=Bounded(TRAIN_PAGE, "lr", 0.0), cli=_train_cli("--lr", "0")),
    Case("hparams/lr-negative", dict(lr=-1e-3), ConfigError, "lr must be a positive number",
         app=Bounded(TRAIN_PAGE, "lr", -1e-3), cli=_train_cli("--lr", "-0.001")),
    Case("hparams/batch_size-above-what-the-corpus-fills", dict(batch_size=400, block_size=30), CorpusError,
         "batch_size .* is more than the .* distinct windows",
         app=Widgets(TRAIN_PAGE, {"block_size": 4, "batch_size": 64}, corpus=SHORT_CORPUS),
         cli=_train_cli("--batch-size", "400", "--block-size", "30")),
    Case("hparams/over-the-memory-budget",
         dict(d_model=1024, num_heads=8, num_layers=24, d_ff=4096, max_len=1024, block_size=1024, batch_size=32),
         ConfigError, "needs about .* MB to train .* the limit here is",
         app=Widgets(TRAIN_PAGE, {"d_model": 256, "num_heads": 8, "num_layers": 6, "d_ff": 1024, "max_len": 256,
                                  "block_size": 256, "batch_size": 64}),
         cli=_train_cli("--d-model", "8192", "--num-heads", "8", "--num-layers", "96", "--d-ff", "32768")),

    # checkpoints: (folder builder, zip builder); the app takes zips, the CLI folders
    Case("checkpoint/empty-zip", (None, lambda t: make_zip({})), CheckpointError, "the zip archive is empty",
         cli=ZIP_ONLY),
    Case("checkpoint/empty-folder", (_empty_folder, lambda t: make_zip({"ckpt/": b""})), CheckpointError, "empty"),
    Case("checkpoint/missing-config.json", (_no_config, _zipped(_no_config)), CheckpointError, "no config.json"),
    Case("checkpoint/config.json-wrong-types", (_wrong_types, _zipped(_wrong_types)), CheckpointError,
         "d_model must be int, got str"),
    Case("checkpoint/config.json-unknown-keys", (_unknown_keys, _zipped(_unknown_keys)), CheckpointError,
         "unknown GPTConfig keys: n_embd"),
    Case("checkpoint/truncated-model.safetensors", (_truncated, _zipped(_truncated)), CheckpointError,
         "does not match the sha256 in config.json: the file is damaged"),
    Case("checkpoint/truncated-model.safetensors-hash-updated", (_truncated_rehashed, _zipped(_truncated_rehashed)),
         CheckpointError, "not a valid safetensors file"),
    Case("checkpoint/weights-do-not-fit-the-config", (_shape_mismatch, _zipped(_shape_mismatch)), CheckpointError,
         r"model.safetensors does not fit config.json's model: size mismatch for \S+: copying a param with "
         r"shape torch.Size\(\[.+\]\) from checkpoint"),
    Case("checkpoint/vocabulary-does-not-fit-the-weights", (_vocab_mismatch, _zipped(_vocab_mismatch)),
         CheckpointError, "lists .* vocabulary characters but the model's vocab_size is"),
    Case("checkpoint/zip-path-traversal",
         (None, lambda t: make_zip({**folder_files(saved(t)), "../../evil.txt": b"x"})), CheckpointError,
         r"points outside the archive folder \('\.\.'\)", cli=ZIP_ONLY),
    Case("checkpoint/zip-absolute-path",
         (None, lambda t: make_zip({**folder_files(saved(t)), "/" + str(t / "evil.txt").lstrip("/"): b"x"})),
         CheckpointError,
         "has an absolute path", cli=ZIP_ONLY),
    Case("checkpoint/zip-bomb-by-ratio", (None, lambda t: bomb_zip(t, 10 * 2**20)), CheckpointError,
         "looks like a zip bomb", cli=ZIP_ONLY),
    Case("checkpoint/zip-bomb-by-size", (None, bomb_zip), CheckpointError, "more than the 67108864 allowed",
         cli=ZIP_ONLY),
    Case("checkpoint/pickle-.pt-that-runs-code", (_pickle_folder("model.pt"), _zipped(_pickle_folder("model.pt"))),
         CheckpointError, r"pickle-based checkpoints \(torch.save\) are refused"),
    Case("checkpoint/pickle-.bin-that-runs-code", (_pickle_folder("pytorch_model.bin"),
                                                   _zipped(_pickle_folder("pytorch_model.bin"))),
         CheckpointError, r"pickle-based checkpoints \(torch.save\) are refused"),
    Case("checkpoint/pickle-named-model.safetensors", (_pickle_as_model_safetensors,
                                                       _zipped(_pickle_as_model_safetensors)),
         CheckpointError, r"holds a pickle, not safetensors"),
    Case("checkpoint/torch.save-file-uploaded-as-zip", (None, _torch_save_zip), CheckpointError,
         r"torch.save file: pickle-based checkpoints .* are refused", cli=ZIP_ONLY),
]


def cases(*, channel: str) -> list:
    """The rows a channel meets, with their ids; widget-bounded app rows say so in the id."""
    rows = []
    for case in TABLE:
        spec = getattr(case, channel) if channel != "library" else None
        if isinstance(spec, str):
            continue  # this channel has no such input (the row says why)
        suffix = ":widget-bounded" if isinstance(spec, Bounded) else ""
        rows.append(pytest.param(case, id=case.id + suffix))
    return rows


def test_the_table_covers_every_kind_of_bad_input_the_issue_lists():
    kinds = {case.kind for case in TABLE}
    assert kinds == {"corpus", "prompt", "sampling", "hparams", "checkpoint"}
    assert len(TABLE) >= 50
    print(f"bad inputs: {len(TABLE)} rows; library {len(cases(channel='library'))}, "
          f"app {len(cases(channel='app'))}, CLI {len(cases(channel='cli'))}")


@functools.lru_cache(maxsize=1)
def shipped():
    checkpoint = load_pretrained(DEMO)
    return checkpoint, checkpoint.block_size


def library_corpus(raw: bytes) -> str:
    """Decode an upload and train one step on it, as a run would."""
    text = decode_corpus(raw, source="upload.txt")
    tokenizer = CharTokenizer.from_text(text)
    assert tokenizer.decode(tokenizer.encode(text)) == text
    model = build_model(GPTConfig(vocab_size=tokenizer.vocab_size, **TINY_MODEL), 0)
    trainer = Trainer(model, tokenizer, text, TrainConfig(**TINY_TRAIN))
    assert torch.isfinite(trainer.compute_gradients())
    trainer.apply_update()
    return text


def library_prompt(prompt: str) -> str:
    """Prepare the prompt as the pages and the CLI do, sample from it; return what it says was done."""
    checkpoint, window = shipped()
    prepared = prepare_prompt(checkpoint.tokenizer, prompt, window)
    assert len(prepared.ids) <= window
    steps = list(stream(checkpoint.model, checkpoint.tokenizer, prepared, max_new_tokens=3,
                        sampling=Sampling(temperature=0.0), block_size=window))
    assert len(steps) == 3
    return " ".join(str(note) for note in prepared.notes)


def library_sampling(settings: dict) -> str:
    """Make the settings' record (it checks itself) and check the length, then show what an accepted
    setting does by comparing with a plain sample."""
    length = settings.get("max_new_tokens", 8)
    check_max_new_tokens(length)
    sampling = Sampling(**{name: value for name, value in settings.items() if name != "max_new_tokens"})
    checkpoint, window = shipped()

    def sample(seed: int, chosen: Sampling = sampling) -> str:
        return generate(checkpoint.model, checkpoint.tokenizer, "深度", max_new_tokens=length, sampling=chosen,
                        seed=seed, block_size=window)
    if settings.get("temperature") == 0:
        assert sample(1) == sample(2)
        return "greedy: every seed gives the same text"
    if "top_k" in settings:
        assert sample(3) == sample(3, replace(sampling, top_k=None))
        return "off" if settings["top_k"] == 0 else "keeps every character"
    return sample(0)


def library_hparams(overrides: dict) -> None:
    """The configs' own checks and the memory budget, before anything is allocated; then the
    trainer, which checks the corpus against the batch (check_corpus_fits must agree with it)."""
    tokenizer = CharTokenizer.from_text(DEMO_TEXT)
    model_fields = set(GPTConfig.__dataclass_fields__)
    model = GPTConfig(vocab_size=tokenizer.vocab_size,
                      **(TINY_MODEL | {k: v for k, v in overrides.items() if k in model_fields})).validate()
    train = TrainConfig(**(TINY_TRAIN | {k: v for k, v in overrides.items() if k not in model_fields}))
    train.validate(model)
    check_memory_budget(model, train, APP_MEMORY_BUDGET)
    try:
        Trainer(build_model(model, 0), tokenizer, DEMO_TEXT, train)
    except CorpusError as error:
        with pytest.raises(CorpusError, match=re.escape(str(error))):
            check_corpus_fits(len(DEMO_TEXT), train.val_fraction, train.block_size, train.batch_size)
        raise
    check_corpus_fits(len(DEMO_TEXT), train.val_fraction, train.block_size, train.batch_size)


def _value(case: Case) -> Any:
    return case.value() if callable(case.value) else case.value


def _fresh(path: Path) -> Path:
    path.mkdir()
    return path


def library_calls(case: Case, tmp_path: Path) -> list[Callable[[], Any]]:
    """One call per way the library meets the row: a checkpoint as a folder and as a zip."""
    if case.kind == "checkpoint":
        folder, zipped = case.value
        return ([lambda: from_pretrained(folder(_fresh(tmp_path / "folder")))] if folder else []) + \
               ([lambda: load_zip(zipped(_fresh(tmp_path / "zip")))] if zipped else [])
    run = {"corpus": library_corpus, "prompt": library_prompt, "sampling": library_sampling,
           "hparams": library_hparams}[case.kind]
    return [lambda: run(_value(case))]


@pytest.mark.parametrize("case", cases(channel="library"))
def test_library(case: Case, tmp_path):
    for call in library_calls(case, tmp_path):
        if case.raises is None:
            assert re.search(case.message, call())
            continue
        with pytest.raises(case.raises) as error:
            call()
        assert re.search(case.message, str(error.value)), str(error.value)
        assert "\n" not in str(error.value)
    for path in tmp_path.rglob("*"):
        assert path.name != "code-ran" and "evil" not in path.name  # no pickle ran, nothing escaped


def said(elements) -> list[str]:
    """Element texts as the learner reads them (the app escapes markdown specials in quoted names)."""
    return [re.sub(r"\\([\\`*_{}\[\]()#+\-.!|<>~$:])", r"\1", e.value) for e in elements]


def upload_corpus(raw: bytes, name: str = "upload.txt") -> AppTest:
    at = home()
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value((name, raw, "text/plain")).run()
    return at


def widget(at: AppTest, key: str):
    for kind in ("slider", "select_slider", "number_input"):
        found = [w for w in getattr(at, kind) if w.key == key]
        if found:
            return found[0]
    raise KeyError(key)


def in_range(w, value) -> bool:
    if w.type == "select_slider":
        return str(value) in w.options
    return value == value and w.min <= value <= w.max  # value == value: NaN is never in range


def generate_on_page(at: AppTest, prompt: str | None = None, max_new_tokens: int | None = 3) -> AppTest:
    at.session_state["stream_delay"] = 0
    if prompt is not None:
        at.text_input[0].set_value(prompt)
    if max_new_tokens is not None:
        widget(at, "max_new_tokens").set_value(max_new_tokens)
    return at.button(key="generate").click().run()


def app_corpus(case: Case) -> list[AppTest]:
    """Upload on Home, then open Train: a corpus may decode but still be too short for the settings."""
    at = upload_corpus(_value(case), "image.txt" if "png" in case.id else "upload.txt")
    if not at.error and not at.exception:
        at.switch_page(TRAIN_PAGE).run()
    return [at]


def app_prompt(case: Case) -> list[AppTest]:
    at = home()
    at.selectbox(key=choices.CORPUS).set_value(DEMO).run()  # the rows are for the demo-zh model
    return [generate_on_page(at.switch_page(GENERATE_PAGE).run(), case.value)]


def app_checkpoint(case: Case, tmp_path: Path) -> list[AppTest]:
    data = case.value[1](tmp_path)
    at = home()
    at.radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    at.file_uploader(key=uploads.CHECKPOINT_UPLOAD).set_value(("upload.zip", data, "application/zip")).run()
    assert not (tmp_path / "code-ran").exists()
    return [at]


def app_widgets(spec: Widgets) -> list[AppTest]:
    at = upload_corpus(spec.corpus) if spec.corpus else home()
    at.switch_page(spec.page).run()
    for key, value in spec.values.items():
        widget(at, key).set_value(value)
    at.run()
    if spec.page == GENERATE_PAGE:
        generate_on_page(at, max_new_tokens=None if "max_new_tokens" in spec.values else 3)
    return [at]


def check_bounded(spec: Bounded) -> None:
    at = home().switch_page(spec.page).run()
    w = widget(at, spec.key)
    assert not in_range(w, spec.value), f"the {spec.key} widget can hold {spec.value!r}"
    w.set_value(spec.value)
    at.run()
    w = widget(at, spec.key)
    assert not at.exception
    assert in_range(w, w.value) and w.value != spec.value  # Streamlit dropped the forged value
    if spec.key in ("d_model", "num_heads"):  # every pair of options divides and is even
        pairs = [(int(d), int(h)) for d in widget(at, "d_model").options for h in widget(at, "num_heads").options]
        assert all(d % h == 0 and d % 2 == 0 for d, h in pairs)
    if spec.page == GENERATE_PAGE:
        generate_on_page(at)
        assert not at.exception and not at.error and len(at.session_state["generation"]["steps"]) == 3


@pytest.mark.parametrize("case", cases(channel="app"))
def test_app(case: Case, tmp_path):
    spec = case.app
    if isinstance(spec, Bounded):
        check_bounded(spec)
        return
    if isinstance(spec, Widgets):
        visited = app_widgets(spec)
    elif case.kind == "checkpoint":
        visited = app_checkpoint(case, tmp_path)
    else:
        visited = {"corpus": app_corpus, "prompt": app_prompt}[case.kind](case)
    for at in visited:
        assert not at.exception, [e.value for e in at.exception]
    shown = [text for at in visited for text in said(at.error) + said(at.warning)]
    if case.raises is not None:
        assert any(re.search(case.message, text) for text in shown), shown
        return
    assert not shown, shown
    at = visited[-1]
    if case.kind == "corpus":
        assert at.session_state[choices.CORPUS] == "upload.txt (uploaded)"
        assert not at.button(key="start").disabled
        assert re.search(case.message, at.session_state[UPLOADED_CORPUS_KEY].text)
    elif case.kind == "prompt":
        assert any(re.search(case.message, c) for c in said(at.caption)), said(at.caption)
        assert len(at.session_state["generation"]["steps"]) == 3
    else:
        w = widget(at, next(iter(spec.values)))
        assert spec.says in f"{w.label} {w.help}"
        assert len(at.session_state["generation"]["steps"]) == 3


def cli_args(case: Case, tmp_path: Path) -> list[str]:
    if isinstance(case.cli, list):
        args = case.cli
    elif case.kind == "corpus":
        path = tmp_path / "upload.txt"
        path.write_bytes(_value(case))
        args = ["train", "--corpus", str(path), "--out", "{out}", *TINY_FLAGS]
    elif case.kind == "prompt":
        args = ["sample", "--checkpoint", "{pretrained}", "--prompt", case.value, "--max-new-tokens", "3",
                "--temperature", "0"]
    else:
        args = ["sample", "--checkpoint", str(case.value[0](tmp_path)), "--max-new-tokens", "3"]
    paths = {"{out}": str(tmp_path / "out"), "{pretrained}": str(pretrained_dir(DEMO))}
    return [paths.get(a, a) for a in args]


@pytest.mark.parametrize("case", cases(channel="cli"))
def test_cli(case: Case, tmp_path, capsys, monkeypatch):
    # The CLI's budget is the device's free memory; fix it so the case means the same everywhere.
    monkeypatch.setattr("minigpt.cli.train.available_memory_bytes", lambda device: 8 * 2**30)
    status = main(cli_args(case, tmp_path))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert not (tmp_path / "code-ran").exists()
    if case.raises is not None:
        assert status == 2, err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert re.search(case.message, err), err
        assert not (tmp_path / "out").exists()  # refused before anything was written
        return
    assert status == 0, err
    if case.kind == "prompt":
        assert re.search("note: .*" + case.message, err), err
    if case.kind == "corpus":
        assert "done: step 2" in err
