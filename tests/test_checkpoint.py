"""Checkpoint folders and zips: round trips, atomic saves, and refusals of bad input."""
from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import queue
import random
import signal
import struct
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
import safetensors.torch
import torch

from minigpt import checkpoint
from minigpt.checkpoint import (
    CONFIG_NAME,
    Checkpoint,
    CheckpointError,
    checkpoint_to_zip,
    from_pretrained,
    load_zip,
    save_pretrained,
)
from minigpt.config import GPTConfig, TrainConfig
from minigpt.model import MiniGPT
from minigpt.tokenizer import CharTokenizer

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "_save_worker.py"
TEXT = "hello world, tiny checkpoints"
TOKENIZER = CharTokenizer.from_text(TEXT)
PICKLE_MESSAGE = r"pickle-based checkpoints \(torch\.save\) are refused"


def tiny_model(seed: int = 0, num_layers: int = 1) -> MiniGPT:
    torch.manual_seed(seed)
    config = GPTConfig(vocab_size=TOKENIZER.vocab_size, d_model=16, num_heads=2,
                       num_layers=num_layers, d_ff=32, max_len=16, dropout=0.0)
    return MiniGPT(config)


def logits(model: MiniGPT) -> torch.Tensor:
    ids = torch.tensor([TOKENIZER.encode("hello tiny")])
    model.eval()
    with torch.no_grad():
        return model(ids)[0]


def train_step(model: MiniGPT, optimizer: torch.optim.Optimizer) -> None:
    ids = torch.tensor([TOKENIZER.encode("tiny world, hello")])
    optimizer.zero_grad()
    _, loss = model(ids[:, :-1], ids[:, 1:])
    loss.backward()
    optimizer.step()


def saved(tmp_path: Path, seed: int = 0, **kwargs) -> Path:
    return save_pretrained(tmp_path / "ckpt", tiny_model(seed), TOKENIZER, **kwargs)


def read_config(path: Path) -> dict:
    return json.loads((path / CONFIG_NAME).read_text(encoding="utf-8"))


def write_config(path: Path, config: dict) -> None:
    (path / CONFIG_NAME).write_text(json.dumps(config), encoding="utf-8")


def weights_path(path: Path) -> Path:
    return path / read_config(path)["weights_file"]


def replace_weights(path: Path, data: bytes) -> None:
    """Swap in other weight bytes and make config.json's hash agree, to reach later checks."""
    weights_path(path).write_bytes(data)
    config = read_config(path)
    config["weights_sha256"] = hashlib.sha256(data).hexdigest()
    write_config(path, config)


def stored_tensors(path: Path) -> dict[str, torch.Tensor]:
    return safetensors.torch.load(weights_path(path).read_bytes())


def staging_dirs(parent: Path) -> list[Path]:
    return sorted(parent.glob(".ckpt.tmp-*"))


# ---------------------------------------------------------------- round trips


def test_checkpoint_round_trip_gives_identical_logits_tokenizer_and_config(tmp_path):
    model = tiny_model(num_layers=2)
    train = TrainConfig(batch_size=4, block_size=8, max_steps=10, warmup_steps=2)
    meta = {"step": 10, "corpus": "tiny «demo»", "val_loss": 2.5, "history": [[0, 3.1], [10, 2.5]]}
    save_pretrained(tmp_path / "ckpt", model, TOKENIZER, train_config=train, meta=meta)
    ckpt = from_pretrained(tmp_path / "ckpt")
    assert isinstance(ckpt, Checkpoint)
    assert torch.equal(logits(ckpt.model), logits(model))
    assert ckpt.tokenizer == TOKENIZER
    assert ckpt.model.config == model.config
    assert ckpt.train_config == train
    assert ckpt.meta == meta
    assert ckpt.optimizer_state is None
    assert not ckpt.model.training


def test_loaded_model_keeps_head_tied_to_embedding(tmp_path):
    ckpt = from_pretrained(saved(tmp_path))
    assert ckpt.model.lm_head.weight.data_ptr() == ckpt.model.token_embed.weight.data_ptr()


def test_saved_folder_has_config_and_one_weights_file(tmp_path):
    path = saved(tmp_path)
    config = read_config(path)
    assert sorted(p.name for p in path.iterdir()) == [CONFIG_NAME, config["weights_file"]]
    assert config["format"] == "minigpt" and config["format_version"] == 1
    assert config["vocab"] == TOKENIZER.chars
    assert config["weights_sha256"] == hashlib.sha256(weights_path(path).read_bytes()).hexdigest()
    assert "lm_head.weight" not in stored_tensors(path)


def test_optimizer_state_round_trip_gives_identical_next_step(tmp_path):
    model = tiny_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    for _ in range(3):
        train_step(model, optimizer)
    save_pretrained(tmp_path / "ckpt", model, TOKENIZER, optimizer=optimizer)
    ckpt = from_pretrained(tmp_path / "ckpt", with_optimizer=True)
    assert ckpt.optimizer_state["param_groups"] == optimizer.state_dict()["param_groups"]
    resumed = torch.optim.AdamW(ckpt.model.parameters(), lr=1e-2, weight_decay=0.1)
    resumed.load_state_dict(ckpt.optimizer_state)
    train_step(model, optimizer)
    train_step(ckpt.model, resumed)
    for (name, p), (_, q) in zip(model.named_parameters(), ckpt.model.named_parameters()):
        assert torch.equal(p, q), name


def test_optimizer_state_dict_copy_saves_like_the_optimizer(tmp_path):
    model = tiny_model()
    optimizer = torch.optim.AdamW(model.parameters())
    train_step(model, optimizer)
    a = save_pretrained(tmp_path / "a", model, TOKENIZER, optimizer=optimizer)
    b = save_pretrained(tmp_path / "b", model, TOKENIZER, optimizer=optimizer.state_dict())
    assert checkpoint_files(a) == checkpoint_files(b)


def test_save_unwraps_a_compiled_model(tmp_path):
    model = tiny_model()
    path = save_pretrained(tmp_path / "ckpt", torch.compile(model), TOKENIZER)
    assert torch.equal(logits(from_pretrained(path).model), logits(model))


def test_optimizer_state_is_only_loaded_on_request(tmp_path):
    model = tiny_model()
    optimizer = torch.optim.AdamW(model.parameters())
    train_step(model, optimizer)
    path = save_pretrained(tmp_path / "ckpt", model, TOKENIZER, optimizer=optimizer)
    assert from_pretrained(path).optimizer_state is None
    assert from_pretrained(saved(tmp_path / "other"), with_optimizer=True).optimizer_state is None


def test_save_refuses_tokenizer_that_does_not_fit_the_model(tmp_path):
    with pytest.raises(CheckpointError, match="vocab_size"):
        save_pretrained(tmp_path / "ckpt", tiny_model(), CharTokenizer("ab"))


def test_save_refuses_meta_that_is_not_json(tmp_path):
    with pytest.raises(CheckpointError, match="JSON"):
        saved(tmp_path, meta={"when": object()})
    assert not (tmp_path / "ckpt").exists()


def test_damaged_optimizer_file_is_refused_only_when_requested(tmp_path):
    model = tiny_model()
    optimizer = torch.optim.AdamW(model.parameters())
    train_step(model, optimizer)
    path = save_pretrained(tmp_path / "ckpt", model, TOKENIZER, optimizer=optimizer)
    optimizer_file = path / read_config(path)["optimizer_file"]
    optimizer_file.write_bytes(optimizer_file.read_bytes()[:-4] + b"oops")
    assert torch.equal(logits(from_pretrained(path).model), logits(model))
    with pytest.raises(CheckpointError, match="does not match the sha256"):
        from_pretrained(path, with_optimizer=True)


# ---------------------------------------------------------------- atomic saves


def test_saving_twice_leaves_only_the_second_checkpoint(tmp_path):
    saved(tmp_path, seed=1)
    path = saved(tmp_path, seed=2)
    assert sorted(p.name for p in path.iterdir()) == [CONFIG_NAME, read_config(path)["weights_file"]]
    assert torch.equal(logits(from_pretrained(path).model), logits(tiny_model(2)))
    assert staging_dirs(tmp_path) == []


def test_saving_with_then_without_optimizer_drops_the_optimizer_file(tmp_path):
    model = tiny_model()
    optimizer = torch.optim.AdamW(model.parameters())
    train_step(model, optimizer)
    save_pretrained(tmp_path / "ckpt", model, TOKENIZER, optimizer=optimizer)
    path = saved(tmp_path)
    assert not list(path.glob("optimizer*"))


def _crash(*args, **kwargs):
    raise RuntimeError("simulated crash")


def _crash_after_data_files(real):
    def write_all_but_config(staging, files):
        real(staging, {k: v for k, v in files.items() if k != CONFIG_NAME})
        raise RuntimeError("simulated crash")
    return write_all_but_config


@pytest.mark.parametrize("point", ["_write_files", "_install", "_publish_config"])
def test_save_interrupted_before_commit_leaves_old_checkpoint(tmp_path, monkeypatch, point):
    path = saved(tmp_path, seed=1)
    old = logits(from_pretrained(path).model)
    crash = _crash_after_data_files(checkpoint._write_files) if point == "_write_files" else _crash
    monkeypatch.setattr(checkpoint, point, crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        saved(tmp_path, seed=2)
    assert torch.equal(logits(from_pretrained(path).model), old)
    assert staging_dirs(tmp_path) == []


def test_save_interrupted_after_commit_leaves_new_checkpoint(tmp_path, monkeypatch):
    saved(tmp_path, seed=1)
    monkeypatch.setattr(checkpoint, "_collect_garbage", _crash)
    with pytest.raises(RuntimeError):
        saved(tmp_path, seed=2)
    assert torch.equal(logits(from_pretrained(tmp_path / "ckpt").model), logits(tiny_model(2)))


def test_next_save_cleans_up_after_an_interrupted_one(tmp_path, monkeypatch):
    saved(tmp_path, seed=1)
    monkeypatch.setattr(checkpoint, "_publish_config", _crash)
    with pytest.raises(RuntimeError):
        saved(tmp_path, seed=2)
    assert len(list((tmp_path / "ckpt").glob("model-*.safetensors"))) == 2
    monkeypatch.undo()
    path = saved(tmp_path, seed=3)
    assert sorted(p.name for p in path.iterdir()) == [CONFIG_NAME, read_config(path)["weights_file"]]


def test_interrupted_first_save_leaves_no_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "_write_files", _crash_after_data_files(checkpoint._write_files))
    with pytest.raises(RuntimeError):
        saved(tmp_path)
    assert not (tmp_path / "ckpt").exists()
    assert staging_dirs(tmp_path) == []


def test_stale_staging_folder_of_a_dead_writer_is_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    leftover = tmp_path / f".ckpt.tmp-{dead.stdout.strip()}-deadbeef"
    leftover.mkdir()
    (leftover / CONFIG_NAME).write_text("{}")
    saved(tmp_path)
    assert not leftover.exists()


def test_reader_starts_over_when_a_save_deletes_the_files_it_was_about_to_read(tmp_path, monkeypatch):
    path = saved(tmp_path, seed=1)
    real_read = checkpoint._read_config_bytes
    calls = []

    def read_then_lose_race(root):
        config_bytes = real_read(root)
        if not calls:  # a save completes between reading config.json and the weights
            saved(tmp_path, seed=2)
        calls.append(root)
        return config_bytes

    monkeypatch.setattr(checkpoint, "_read_config_bytes", read_then_lose_race)
    ckpt = from_pretrained(path)
    assert len(calls) == 2
    assert torch.equal(logits(ckpt.model), logits(tiny_model(2)))


def _check_consistent(path: Path, expected: dict[str, torch.Tensor]) -> str:
    """Load, and check that config.json's label matches the weights: no old/new mix."""
    ckpt = from_pretrained(path, with_optimizer=True)
    label = ckpt.meta["label"]
    assert torch.equal(logits(ckpt.model), expected[label])
    return label


@pytest.fixture
def one_torch_thread():
    """Tiny forwards run next to a busy writer: idle-spinning OpenMP workers would only slow them."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_concurrent_reader_always_sees_a_complete_checkpoint(tmp_path, one_torch_thread):
    pairs = {label: tiny_model(seed) for label, seed in (("A", 1), ("B", 2))}
    expected = {label: logits(model) for label, model in pairs.items()}
    path = save_pretrained(tmp_path / "ckpt", pairs["A"], TOKENIZER, meta={"label": "A"})
    stop, seen, errors = threading.Event(), [], []

    def read_loop():
        try:
            while not stop.is_set():
                seen.append(_check_consistent(path, expected))
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    reader = threading.Thread(target=read_loop)
    reader.start()
    try:
        for i in range(60):
            label = "AB"[i % 2]
            save_pretrained(path, pairs[label], TOKENIZER, meta={"label": label})
    finally:
        stop.set()
        reader.join(timeout=30)
    assert not errors, errors
    assert seen


# ---------------------------------------------------------------- SIGKILL


class _Worker:
    """tests/_save_worker.py in a subprocess, read line by line with a timeout."""

    def __init__(self, target: Path, reference: Path, log: Path):
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        self.log_path = log
        self._log = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(target), str(reference)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line.strip())

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, word: str) -> str:
        try:
            line = self._lines.get(timeout=60)
        except queue.Empty:
            pytest.fail(f"the save worker never said {word!r}; its log:\n{self.log_path.read_text()}")
        assert line.split()[0] == word, line
        return line.split()[-1]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def _kill_at(pid: int, deadline: float, path: Path, expected: dict[str, torch.Tensor]) -> None:
    """Read the checkpoint while the child saves, then SIGKILL the child at `deadline`."""
    while time.monotonic() < deadline:
        _check_consistent(path, expected)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:  # it died on its own; the reaped status will say how
        pass


@pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(signal, "SIGKILL"), reason="needs fork and SIGKILL")
def test_sigkill_at_any_moment_leaves_a_complete_checkpoint(tmp_path, one_torch_thread):
    target, reference = tmp_path / "ckpt", tmp_path / "reference"
    worker = _Worker(target, reference, tmp_path / "worker.log")
    try:
        worker.expect("started")
        expected = {label: logits(from_pretrained(reference / label).model) for label in "AB"}
        rng = random.Random(1234)
        for _ in range(30):
            worker.send("go")
            pid = int(worker.expect("ready"))
            _kill_at(pid, time.monotonic() + rng.uniform(0.0, 0.05), target, expected)
            status = int(worker.expect("reaped"))
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, worker.log_path.read_text()
            _check_consistent(target, expected)
    finally:
        worker.close()
    save_pretrained(target, tiny_model(), TOKENIZER)
    assert staging_dirs(tmp_path) == []
    assert len(list(target.iterdir())) == 2


# ---------------------------------------------------------------- refusals


def _empty_dir(tmp_path):
    (tmp_path / "ckpt").mkdir()
    return tmp_path / "ckpt"


def _edit(**changes):
    def build(tmp_path):
        path = saved(tmp_path)
        config = read_config(path)
        for key, value in changes.items():
            section, _, field = key.partition("__")
            (config[section] if field else config)[field or section] = value
        write_config(path, config)
        return path
    return build


def _mutate(fn):
    def build(tmp_path):
        path = saved(tmp_path)
        fn(path)
        return path
    return build


def _drop_config_key(key):
    def fn(path):
        config = read_config(path)
        del config[key]
        write_config(path, config)
    return _mutate(fn)


def _flip_a_weight_byte(path):
    data = bytearray(weights_path(path).read_bytes())
    data[-1] ^= 0xFF
    weights_path(path).write_bytes(bytes(data))


def _with_tensors(change):
    def fn(path):
        tensors = stored_tensors(path)
        change(tensors)
        replace_weights(path, safetensors.torch.save(tensors))
    return _mutate(fn)


MALFORMED = {
    "missing folder": (lambda tmp_path: tmp_path / "nowhere", "does not exist"),
    "empty folder": (_empty_dir, "is empty"),
    "missing config.json": (_mutate(lambda p: (p / CONFIG_NAME).unlink()), "no config.json"),
    "config.json garbage": (_mutate(lambda p: (p / CONFIG_NAME).write_bytes(b"{not json\xff")), "not valid UTF-8 JSON"),
    "config.json not an object": (_mutate(lambda p: (p / CONFIG_NAME).write_text("[1, 2]")), "JSON object"),
    "wrong format": (_edit(format="gpt2"), "not a MiniGPT checkpoint"),
    "newer format version": (_edit(format_version=2), "newer"),
    "unknown top-level key": (_edit(extra=1), "unknown keys: extra"),
    "missing weights hash": (_drop_config_key("weights_sha256"), "lacks required keys: weights_sha256"),
    "unknown model key": (_edit(model__n_embd=16), "unknown GPTConfig keys: n_embd"),
    "model key of wrong type": (_edit(model__d_model="64"), "d_model must be int"),
    "huge position table": (_edit(model__max_len=10**9), "position values"),
    "huge model": (_edit(model__d_ff=10**9), "weights do not fit"),
    "invalid train config": (_edit(train={"lr": -1.0}), "training config is invalid"),
    "meta not an object": (_edit(meta=[1]), "meta must be a JSON object"),
    "vocab length mismatch": (_edit(vocab=TOKENIZER.chars[:-1]), "vocabulary characters"),
    "vocab with repeats": (_edit(vocab=["a"] * TOKENIZER.vocab_size), "repeated"),
    "vocab not single characters": (_edit(vocab=["ab"] + TOKENIZER.chars[1:]), "single characters"),
    "weights file path escapes": (_edit(weights_file="../model.safetensors"), "plain"),
    "weights file missing": (_mutate(lambda p: weights_path(p).unlink()), "is missing"),
    "truncated weights": (_mutate(lambda p: weights_path(p).write_bytes(weights_path(p).read_bytes()[:100])), "sha256"),
    "truncated weights, hash fixed": (_mutate(lambda p: replace_weights(p, weights_path(p).read_bytes()[:100])), "not a valid safetensors"),
    "not safetensors, hash fixed": (_mutate(lambda p: replace_weights(p, b"hello, I am text")), "not a valid safetensors"),
    "sha256 mismatch": (_mutate(_flip_a_weight_byte), "does not match the sha256"),
    "shape mismatch": (_edit(model__d_model=32), "has shape"),
    "missing tensor": (_with_tensors(lambda t: t.pop("final_norm.weight")), "lacks tensors.*final_norm.weight"),
    "unexpected tensor": (_with_tensors(lambda t: t.update(extra=torch.zeros(2))), "does not have: extra"),
    "stored lm_head": (_with_tensors(lambda t: t.update({"lm_head.weight": t["token_embed.weight"].clone()})), "lm_head.weight"),
    "integer weights": (_with_tensors(lambda t: t.update({"final_norm.bias": torch.zeros(16, dtype=torch.int64)})), "floating point"),
}


@pytest.mark.parametrize("build, match", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_checkpoint_is_refused(tmp_path, build, match):
    path = build(tmp_path)
    with pytest.raises(CheckpointError, match=match):
        from_pretrained(path)


class RunsCode:
    """Unpickling this runs a shell command; a safe loader never does."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


def _pickle_alone(tmp_path, payload):
    path = tmp_path / "ckpt"
    path.mkdir()
    torch.save(payload, path / "model.pt")
    return path


def _pickle_as_safetensors(writer):
    def build(tmp_path, payload):
        path = saved(tmp_path)
        config = read_config(path)
        weights_path(path).unlink()
        del config["weights_file"]  # fall back to a plain model.safetensors
        write_config(path, config)
        writer(payload, path / "model.safetensors")
        return path
    return build


PICKLES = {
    "torch.save .pt alone": _pickle_alone,
    "model.safetensors from torch.save": _pickle_as_safetensors(torch.save),
    "model.safetensors from pickle": _pickle_as_safetensors(lambda obj, p: p.write_bytes(pickle.dumps(obj, protocol=4))),
}


@pytest.mark.parametrize("build", PICKLES.values(), ids=PICKLES.keys())
def test_pickle_checkpoint_is_refused_without_unpickling(tmp_path, build):
    marker = tmp_path / "code-ran"
    path = build(tmp_path, RunsCode(marker))
    with pytest.raises(CheckpointError, match=PICKLE_MESSAGE):
        from_pretrained(path)
    assert not marker.exists()


# ---------------------------------------------------------------- zip


def make_zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def checkpoint_files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.iterdir()}


def test_zip_round_trip_gives_identical_checkpoint(tmp_path):
    model = tiny_model()
    optimizer = torch.optim.AdamW(model.parameters())
    train_step(model, optimizer)
    path = save_pretrained(tmp_path / "ckpt", model, TOKENIZER, meta={"step": 1}, optimizer=optimizer)
    data = checkpoint_to_zip(path)
    assert sorted(zipfile.ZipFile(io.BytesIO(data)).namelist()) == sorted(p.name for p in path.iterdir())
    ckpt = load_zip(data, with_optimizer=True)
    assert torch.equal(logits(ckpt.model), logits(model))
    assert ckpt.tokenizer == TOKENIZER and ckpt.meta == {"step": 1}
    assert ckpt.optimizer_state is not None


def test_zip_with_files_in_one_folder_loads(tmp_path):
    files = checkpoint_files(saved(tmp_path))
    entries = {f"my-ckpt/{name}": data for name, data in files.items()}
    entries["__MACOSX/my-ckpt/._config.json"] = b"finder junk"
    ckpt = load_zip(make_zip(entries), workdir=tmp_path / "work")
    assert torch.equal(logits(ckpt.model), logits(tiny_model()))
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == sorted(files)


def test_zip_extraction_leaves_no_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    load_zip(checkpoint_to_zip(saved(tmp_path)))
    assert list((tmp_path / "tmp").iterdir()) == []


def _valid_entries(tmp_path: Path) -> dict[str, bytes]:
    return checkpoint_files(saved(tmp_path))


def _symlink_zip(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("config.json")
        info.create_system = 3
        info.external_attr = (0o120777 << 16)  # S_IFLNK | rwx
        archive.writestr(info, "../../outside")  # a link target escaping the folder
    return buffer.getvalue()


def _lying_header_zip(tmp_path):
    """An entry whose headers declare 1000 bytes but whose data inflates to 2 MB."""
    data = bytearray(make_zip({"config.json": bytes(2 * 2**20)}))
    struct.pack_into("<I", data, 22, 1000)                        # local header: uncompressed size
    struct.pack_into("<I", data, data.rfind(b"PK\x01\x02") + 24, 1000)  # central directory entry
    return bytes(data)


def _bomb_zip(tmp_path, size=200 * 2**20):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open("config.json", "w") as out:
            chunk = bytes(2**20)
            for _ in range(size // len(chunk)):
                out.write(chunk)
    return buffer.getvalue()


BAD_ZIPS = {
    "not a zip": (lambda tmp_path: b"definitely not a zip file", "not a zip archive"),
    "empty zip": (lambda tmp_path: make_zip({}), "empty"),
    "only folders": (lambda tmp_path: make_zip({"ckpt/": b""}), "empty"),
    "parent traversal": (lambda tmp_path: make_zip({**_valid_entries(tmp_path), "../evil": b"x"}), r"\.\."),
    "nested traversal": (lambda tmp_path: make_zip({"ckpt/../../evil": b"x"}), r"\.\."),
    "absolute path": (lambda tmp_path: make_zip({"/" + str(tmp_path / "abs-evil").lstrip("/"): b"x"}), "absolute"),
    "drive letter": (lambda tmp_path: make_zip({"C:/evil": b"x"}), "absolute"),
    "symlink entry": (_symlink_zip, "symbolic link"),
    "too many entries": (lambda tmp_path: make_zip({f"f{i}.txt": b"x" for i in range(40)}), "at most 32"),
    "two folders": (lambda tmp_path: make_zip({"a/config.json": b"{}", "b/model.safetensors": b""}), "one folder"),
    "deep nesting": (lambda tmp_path: make_zip({"a/b/config.json": b"{}"}), "one folder"),
    "zip bomb by size": (_bomb_zip, "more than the 67108864 allowed"),
    "zip bomb by ratio": (lambda tmp_path: _bomb_zip(tmp_path, 10 * 2**20), "zip bomb"),
    "lying size header": (_lying_header_zip, "damaged|zip bomb"),
    "no checkpoint inside": (lambda tmp_path: make_zip({"notes.txt": b"hello"}), "no config.json"),
    "damaged checkpoint inside": (
        lambda tmp_path: make_zip({**_valid_entries(tmp_path), CONFIG_NAME: b"{oops"}), "not valid UTF-8 JSON"),
}


@pytest.mark.parametrize("build, match", BAD_ZIPS.values(), ids=BAD_ZIPS.keys())
def test_bad_zip_is_refused_and_nothing_is_written(tmp_path, build, match):
    data = build(tmp_path)
    before = sorted(p.name for p in tmp_path.parent.iterdir())
    work = tmp_path / "work"
    with pytest.raises(CheckpointError, match=match):
        load_zip(data, workdir=work)
    assert not work.exists() or list(work.iterdir()) == []
    assert not (tmp_path / "evil").exists() and not (tmp_path / "abs-evil").exists()
    assert sorted(p.name for p in tmp_path.parent.iterdir()) == before


def test_zip_into_non_empty_workdir_is_refused(tmp_path):
    data = checkpoint_to_zip(saved(tmp_path))
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "other.txt").write_text("mine")
    with pytest.raises(CheckpointError, match="must be empty"):
        load_zip(data, workdir=tmp_path / "work")
