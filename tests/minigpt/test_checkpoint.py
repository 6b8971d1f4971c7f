"""minigpt/checkpoint.py: checkpoint folders in Hugging Face's layout, round trips, kill-safe and
durable saves, and the malformed or pickled checkpoints it refuses without unpickling.

    pytest tests/minigpt/test_checkpoint.py
"""
from __future__ import annotations

import hashlib
import os
import pickle
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import safetensors.torch
import torch

from helpers import ROOT
from helpers.checkpoints import (RunsCode, TOKENIZER, checkpoint_model, edit, folder_files, logits_of, mutate,
                                 read_config, replace_weights, saved, saved_with_optimizer, train_step, weights_path,
                                 write_config)
from helpers.waiting import DEADLINE
from minigpt import Checkpoint, CheckpointError, TrainConfig, checkpoint
from minigpt.checkpoint import from_pretrained, latest_checkpoint, save_checkpoint, save_pretrained
from minigpt.header import CONFIG_NAME, OPTIMIZER_NAME, WEIGHTS_NAME
from minigpt import CharTokenizer

WORKER = Path(__file__).resolve().parent / "_save_worker.py"
PICKLE_MESSAGE = r"pickle-based checkpoints \(torch\.save\) are refused"


def test_checkpoint_round_trip_gives_identical_logits_tokenizer_and_config(tmp_path):
    model = checkpoint_model(num_layers=2)
    train = TrainConfig(batch_size=4, block_size=8, max_steps=10, warmup_steps=2)
    meta = {"step": 10, "corpus": "tiny «demo»", "val_loss": 2.5, "history": [[0, 3.1], [10, 2.5]]}
    save_pretrained(tmp_path / "ckpt", model, TOKENIZER, train_config=train, meta=meta)
    ckpt = from_pretrained(tmp_path / "ckpt")
    assert isinstance(ckpt, Checkpoint)
    assert torch.equal(logits_of(ckpt.model), logits_of(model))
    assert ckpt.tokenizer == TOKENIZER
    assert ckpt.model.config == model.config
    assert ckpt.train_config == train and ckpt.block_size == 8
    assert ckpt.meta == meta
    assert ckpt.optimizer_state is None
    assert not ckpt.model.training


def test_loaded_model_keeps_head_tied_to_embedding(tmp_path):
    ckpt = from_pretrained(saved(tmp_path))
    assert ckpt.model.lm_head.weight.data_ptr() == ckpt.model.token_embed.weight.data_ptr()


def test_a_folder_holds_config_json_and_model_safetensors_as_hugging_face_users_expect(tmp_path):
    path = saved(tmp_path)
    assert sorted(p.name for p in path.iterdir()) == [CONFIG_NAME, WEIGHTS_NAME]
    tensors = safetensors.torch.load_file(path / "model.safetensors")  # no MiniGPT code involved
    model = checkpoint_model()
    assert set(tensors) == set(model.state_dict()) - {"lm_head.weight"}
    for name, tensor in tensors.items():
        assert torch.equal(tensor, model.state_dict()[name]), name
    config = read_config(path)
    assert config["format"] == "minigpt" and config["format_version"] == 2
    assert config["vocab"] == TOKENIZER.chars
    assert config["weights_sha256"] == hashlib.sha256((path / WEIGHTS_NAME).read_bytes()).hexdigest()


def test_optimizer_state_round_trip_gives_identical_next_step(tmp_path):
    model = checkpoint_model()
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
    model = checkpoint_model()
    optimizer = torch.optim.AdamW(model.parameters())
    train_step(model, optimizer)
    a = save_pretrained(tmp_path / "a", model, TOKENIZER, optimizer=optimizer)
    b = save_pretrained(tmp_path / "b", model, TOKENIZER, optimizer=optimizer.state_dict())
    assert folder_files(a) == folder_files(b)


@pytest.mark.slow
def test_save_unwraps_a_compiled_model(tmp_path):
    model = checkpoint_model()
    path = save_pretrained(tmp_path / "ckpt", torch.compile(model), TOKENIZER)
    assert torch.equal(logits_of(from_pretrained(path).model), logits_of(model))


def test_optimizer_state_is_only_loaded_on_request(tmp_path):
    path, _ = saved_with_optimizer(tmp_path)
    assert from_pretrained(path).optimizer_state is None
    assert from_pretrained(saved(tmp_path, name="other"), with_optimizer=True).optimizer_state is None


def test_save_refuses_tokenizer_that_does_not_fit_the_model(tmp_path):
    with pytest.raises(CheckpointError, match="vocab_size"):
        save_pretrained(tmp_path / "ckpt", checkpoint_model(), CharTokenizer("ab"))


def test_save_refuses_meta_that_is_not_json(tmp_path):
    with pytest.raises(CheckpointError, match="JSON"):
        saved(tmp_path, meta={"when": object()})
    assert not (tmp_path / "ckpt").exists()


def test_damaged_optimizer_file_is_refused_only_when_requested(tmp_path):
    path, model = saved_with_optimizer(tmp_path)
    optimizer_file = path / OPTIMIZER_NAME
    optimizer_file.write_bytes(optimizer_file.read_bytes()[:-4] + b"oops")
    assert torch.equal(logits_of(from_pretrained(path).model), logits_of(model))
    with pytest.raises(CheckpointError, match="does not match the sha256"):
        from_pretrained(path, with_optimizer=True)


def staging_dirs(parent: Path) -> list[Path]:
    return sorted(p for p in parent.iterdir() if p.name.startswith("."))


def test_a_checkpoint_folder_is_written_once(tmp_path):
    path = saved(tmp_path, seed=1)
    before = folder_files(path)
    with pytest.raises(CheckpointError, match="already exists"):
        saved(tmp_path, seed=2)
    assert folder_files(path) == before
    assert staging_dirs(tmp_path) == []


def test_an_interrupted_save_leaves_no_folder_and_no_staging(tmp_path, monkeypatch):
    def crash(*args):
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(checkpoint.os, "replace", crash)  # killed just before the rename into place
    with pytest.raises(RuntimeError, match="simulated crash"):
        saved(tmp_path)
    assert not (tmp_path / "ckpt").exists()
    assert staging_dirs(tmp_path) == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names a file descriptor's path through /proc")
def test_a_save_is_on_disk_before_it_is_renamed_into_place_and_the_rename_is_on_disk_after(tmp_path, monkeypatch):
    """POSIX's recipe for a file that survives a power cut: write, fsync the file, fsync its folder,
    rename, fsync the folder the rename happened in. Without the first two, a crash just after the
    rename can leave a checkpoint folder of empty or partial files under its final name."""
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst, *args, **kwargs):
        events.append(("rename", f"{os.fspath(src)} -> {os.fspath(dst)}"))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    target = save_pretrained(tmp_path / "ckpt", checkpoint_model(), TOKENIZER)
    renames = [i for i, (kind, _) in enumerate(events) if kind == "rename"]
    assert len(renames) == 1, events
    staging, _, final = events[renames[0]][1].partition(" -> ")
    assert Path(final) == target
    before = {path for kind, path in events[:renames[0]] if kind == "fsync"}
    after = {path for kind, path in events[renames[0] + 1:] if kind == "fsync"}
    files = sorted(p.name for p in target.iterdir())
    assert files and {str(Path(staging) / name) for name in files} <= before  # every file's bytes, first
    assert staging in before  # then the folder that lists them
    assert str(target.parent) in after  # and the rename itself, last


def test_a_run_folder_keeps_one_folder_per_save_and_loads_the_newest(tmp_path):
    run = tmp_path / "run"
    for step, seed in ((10, 1), (20, 2)):
        save_checkpoint(run, step, checkpoint_model(seed), TOKENIZER, meta={"step": step})
    assert [p.name for p in run.iterdir()] == ["checkpoint-20"]
    assert latest_checkpoint(run) == run / "checkpoint-20"
    ckpt = from_pretrained(run)
    assert ckpt.meta["step"] == 20 and torch.equal(logits_of(ckpt.model), logits_of(checkpoint_model(2)))
    assert save_checkpoint(run, 20, checkpoint_model(3), TOKENIZER) == run / "checkpoint-20"  # written once
    assert torch.equal(logits_of(from_pretrained(run).model), logits_of(checkpoint_model(2)))


def test_a_save_killed_before_pruning_leaves_both_and_the_newest_loads(tmp_path, monkeypatch):
    run = tmp_path / "run"
    save_checkpoint(run, 10, checkpoint_model(1), TOKENIZER)
    monkeypatch.setattr(checkpoint, "_remove", lambda folder: (_ for _ in ()).throw(RuntimeError("killed")))
    with pytest.raises(RuntimeError):
        save_checkpoint(run, 20, checkpoint_model(2), TOKENIZER)
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint-10", "checkpoint-20"]
    assert torch.equal(logits_of(from_pretrained(run).model), logits_of(checkpoint_model(2)))


def test_leftovers_of_killed_saves_are_ignored_then_cleaned(tmp_path):
    run = tmp_path / "run"
    save_checkpoint(run, 10, checkpoint_model(1), TOKENIZER)
    half_deleted = run / ".checkpoint-5.trash-0123"
    (half_deleted / "model.safetensors").parent.mkdir()
    (half_deleted / "model.safetensors").write_bytes(b"half")
    half_written = run / ".checkpoint-30.tmp-4567"
    half_written.mkdir()
    (half_written / "config.json").write_text("{")
    assert torch.equal(logits_of(from_pretrained(run).model), logits_of(checkpoint_model(1)))
    save_checkpoint(run, 20, checkpoint_model(2), TOKENIZER)
    assert [p.name for p in run.iterdir()] == ["checkpoint-20"]


class _Worker:
    """_save_worker.py in a subprocess, read line by line."""

    def __init__(self, target: Path, reference: Path, log: Path):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
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
            line = self._lines.get(timeout=DEADLINE)  # only a worker that has died waits this long
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


def _check_consistent(path: Path, expected: dict[str, torch.Tensor]) -> tuple[str, int]:
    """Load with the optimizer, and check that config.json's label matches the weights."""
    ckpt = from_pretrained(path, with_optimizer=True)
    label = ckpt.meta["label"]
    assert torch.equal(logits_of(ckpt.model), expected[label])
    assert ckpt.optimizer_state is not None
    return label, int(latest_checkpoint(path).name.split("-")[1])


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(signal, "SIGKILL"), reason="needs fork and SIGKILL")
def test_sigkill_at_any_moment_of_a_save_leaves_the_previous_checkpoint_loadable(tmp_path):
    """30 savers killed at random moments 0-50 ms into saving step after step: each time the run
    folder loads a complete checkpoint, no older than the one before the saver started."""
    target, reference = tmp_path / "run", tmp_path / "reference"
    worker = _Worker(target, reference, tmp_path / "worker.log")
    try:
        worker.expect("started")
        expected = {label: logits_of(from_pretrained(reference / label).model) for label in "AB"}
        rng = random.Random(1234)
        newest = _check_consistent(target, expected)[1]
        for _ in range(30):
            worker.send(f"go {newest + 1}")
            pid = int(worker.expect("ready"))
            time.sleep(rng.uniform(0.0, 0.05))  # a random moment of the save to kill it at: what is tested
            os.kill(pid, signal.SIGKILL)
            status = int(worker.expect("reaped"))
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, worker.log_path.read_text()
            _, step = _check_consistent(target, expected)
            assert step >= newest
            newest = step
    finally:
        worker.close()
    save_checkpoint(target, newest + 1, checkpoint_model(), TOKENIZER)
    assert [p.name for p in target.iterdir()] == [f"checkpoint-{newest + 1}"]


def _empty_dir(tmp_path):
    (tmp_path / "ckpt").mkdir()
    return tmp_path / "ckpt"


def _drop_config_key(key):
    def fn(path):
        config = read_config(path)
        del config[key]
        write_config(path, config)
    return mutate(fn)


def _flip_a_weight_byte(path):
    data = bytearray(weights_path(path).read_bytes())
    data[-1] ^= 0xFF
    weights_path(path).write_bytes(bytes(data))


def _with_tensors(change):
    def fn(path):
        tensors = safetensors.torch.load(weights_path(path).read_bytes())
        change(tensors)
        replace_weights(path, safetensors.torch.save(tensors))
    return mutate(fn)


MALFORMED = {
    "missing folder": (lambda tmp_path: tmp_path / "nowhere", "does not exist"),
    "empty folder": (_empty_dir, "is empty"),
    "missing config.json": (mutate(lambda p: (p / CONFIG_NAME).unlink()), "no config.json"),
    "config.json garbage": (mutate(lambda p: (p / CONFIG_NAME).write_bytes(b"{not json\xff")), "not valid UTF-8 JSON"),
    "config.json not an object": (mutate(lambda p: (p / CONFIG_NAME).write_text("[1, 2]")), "JSON object"),
    "wrong format": (edit(format="gpt2"), "not a MiniGPT checkpoint"),
    "newer format version": (edit(format_version=3), "newer"),
    "older format version": (edit(format_version=1), "older"),
    "unknown top-level key": (edit(extra=1), "unknown keys: extra"),
    "missing weights hash": (_drop_config_key("weights_sha256"), "lacks required keys: weights_sha256"),
    "malformed weights hash": (edit(weights_sha256="abc"), "64 lowercase hex digits"),
    "unknown model key": (edit(model__n_embd=16), "unknown GPTConfig keys: n_embd"),
    "model key of wrong type": (edit(model__d_model="64"), "d_model must be int"),
    "huge position table": (edit(model__max_len=10**9), "position values"),
    "huge model": (edit(model__d_ff=10**9), "weights do not fit"),
    "invalid train config": (edit(train={"lr": -1.0}), "training config is invalid"),
    "meta not an object": (edit(meta=[1]), "meta must be a JSON object"),
    "vocab length mismatch": (edit(vocab=TOKENIZER.chars[:-1]), "vocabulary characters"),
    "vocab with repeats": (edit(vocab=["a"] * TOKENIZER.vocab_size), "repeated"),
    "vocab not single characters": (edit(vocab=["ab"] + TOKENIZER.chars[1:]), "single characters"),
    "weights file missing": (mutate(lambda p: weights_path(p).unlink()), "model.safetensors.*is missing"),
    "truncated weights": (mutate(lambda p: weights_path(p).write_bytes(weights_path(p).read_bytes()[:100])), "sha256"),
    "truncated weights, hash fixed": (mutate(lambda p: replace_weights(p, weights_path(p).read_bytes()[:100])),
                                      "not a valid safetensors"),
    "not safetensors, hash fixed": (mutate(lambda p: replace_weights(p, b"hello, I am text")), "not a valid safetensors"),
    "sha256 mismatch": (mutate(_flip_a_weight_byte), "does not match the sha256"),
    "shape mismatch": (edit(model__d_model=32), "size mismatch for token_embed.weight"),
    "missing tensor": (_with_tensors(lambda t: t.pop("final_norm.weight")), "Missing key.*final_norm.weight"),
    "unexpected tensor": (_with_tensors(lambda t: t.update(extra=torch.zeros(2))), "Unexpected key.*extra"),
    "stored lm_head": (_with_tensors(lambda t: t.update({"lm_head.weight": t["token_embed.weight"].clone()})),
                       "lm_head.weight"),
    "integer weights": (_with_tensors(lambda t: t.update({"final_norm.bias": torch.zeros(16, dtype=torch.int64)})),
                        "floating point"),
    "float8 weights": (_with_tensors(lambda t: t.update({"final_norm.bias": torch.zeros(16).to(torch.float8_e4m3fn)})),
                       "at least 2 bytes"),
}


@pytest.mark.parametrize("build, match", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_checkpoint_is_refused(tmp_path, build, match):
    path = build(tmp_path)
    with pytest.raises(CheckpointError, match=match):
        from_pretrained(path)


def _pickle_alone(tmp_path, payload):
    path = tmp_path / "ckpt"
    path.mkdir()
    torch.save(payload, path / "model.pt")
    return path


def _pickle_as_safetensors(writer):
    def build(tmp_path, payload):
        path = saved(tmp_path)
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


def test_the_newest_checkpoint_is_the_highest_step_not_the_last_name(tmp_path):
    run = tmp_path / "run"
    save_checkpoint(run, 9, checkpoint_model(1), TOKENIZER)
    save_pretrained(run / "checkpoint-10", checkpoint_model(2), TOKENIZER)  # as if killed before pruning
    assert latest_checkpoint(run).name == "checkpoint-10"  # "checkpoint-9" sorts after it by name
    assert torch.equal(logits_of(from_pretrained(run).model), logits_of(checkpoint_model(2)))


def test_doctored_optimizer_state_is_refused_before_torch_trusts_its_shapes(tmp_path):
    """The optimizer file's sha256 lives in config.json, which an attacker also writes: shrinking
    one moment tensor once made the first resumed step corrupt memory."""
    from helpers.tiny import TEXT, tiny_config, tiny_tokenizer
    from minigpt import TrainConfig, Trainer, build_model

    tok = tiny_tokenizer()
    cfg = TrainConfig(batch_size=4, block_size=8, max_steps=4, warmup_steps=1, eval_interval=4, eval_iters=1)
    trainer = Trainer(build_model(tiny_config(vocab_size=tok.vocab_size), 0), tok, TEXT, cfg)
    list(trainer.events())
    path = save_checkpoint(tmp_path / "run", trainer.step, trainer.model, tok, train_config=cfg,
                           optimizer=trainer.optimizer, meta={"trainer_state": trainer.state_dict(), "corpus": "x"})
    tensors = safetensors.torch.load((path / OPTIMIZER_NAME).read_bytes())
    tensors["state.0.exp_avg"] = tensors["state.0.exp_avg"].flatten()[:3].clone()
    data = safetensors.torch.save(tensors)
    (path / OPTIMIZER_NAME).write_bytes(data)
    config = read_config(path)
    config["optimizer"]["sha256"] = hashlib.sha256(data).hexdigest()
    write_config(path, config)
    ckpt = from_pretrained(path, with_optimizer=True)
    fresh = Trainer(ckpt.model.train(), tok, TEXT, cfg)
    with pytest.raises(CheckpointError, match=r"exp_avg of parameter 0 .* \(3,\).*refusing"):
        fresh.load_state_dict(ckpt.meta["trainer_state"], ckpt.optimizer_state)
