"""The command line: train, sample and resume end to end in subprocesses (as a user runs them);
bad input in-process, where each case is one call of main()."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minigpt.checkpoint import from_pretrained
from minigpt.cli import main

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--d-model", "16", "--num-heads", "2", "--num-layers", "1", "--d-ff", "32", "--max-len", "32",
        "--block-size", "16", "--batch-size", "4", "--eval-interval", "10", "--eval-iters", "2"]


def minigpt(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "minigpt", *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "rhymes.txt"
    path.write_text("hickory dickory dock, the mouse ran up the clock.\n" * 20, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, corpus) -> Path:
    out = tmp_path_factory.mktemp("run") / "ckpt"
    result = minigpt("train", "--corpus", str(corpus), "--out", str(out), "--max-steps", "20", *TINY)
    assert result.returncode == 0, result.stderr
    assert "done: step 20" in result.stderr and result.stdout == ""
    return out


def test_train_writes_a_loadable_checkpoint_with_its_history(checkpoint, corpus):
    loaded = from_pretrained(checkpoint)
    assert loaded.model.config.d_model == 16 and loaded.meta["step"] == 20
    assert loaded.meta["corpus"] == str(corpus)
    assert [row[0] for row in loaded.meta["history"]][-1] == 20
    assert loaded.train_config.max_steps == 20


def test_sample_prints_only_the_text_to_stdout(checkpoint):
    result = minigpt("sample", "--checkpoint", str(checkpoint), "--prompt", "hick", "--max-new-tokens", "15",
                     "--temperature", "0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("hick") and len(result.stdout.rstrip("\n")) == 4 + 15
    again = minigpt("sample", "--checkpoint", str(checkpoint), "--prompt", "hick", "--max-new-tokens", "15",
                    "--temperature", "0")
    assert again.stdout == result.stdout  # greedy is deterministic


def test_resume_continues_to_the_new_max_steps(checkpoint, tmp_path):
    out = tmp_path / "resumed"
    result = minigpt("train", "--resume", str(checkpoint), "--out", str(out), "--max-steps", "30")
    assert result.returncode == 0, result.stderr
    assert "from step 20" in result.stderr
    resumed = from_pretrained(out)
    assert resumed.meta["step"] == 30
    assert [row[0] for row in resumed.meta["history"]][:2] == [10, 20]


@pytest.mark.parametrize(
    "args, message",
    [
        (["sample", "--checkpoint", "{ckpt}", "--prompt", "QQ"], "not in the vocabulary: 'Q'"),
        (["sample", "--checkpoint", "{ckpt}", "--top-p", "1.5"], "top_p"),
        (["sample", "--checkpoint", "{ckpt}", "--temperature", "-1"], "temperature"),
        (["sample", "--checkpoint", "{missing}"], "does not exist"),
        (["sample", "--checkpoint", "{ckpt}", "--device", "cuda:7"], "not available"),
        (["train", "--corpus", "{missing}", "--out", "{out}"], "no corpus named"),
        (["train", "--corpus", "demo-zh", "--out", "{out}", "--d-model", "30"], "divisible"),
        (["train", "--corpus", "demo-zh", "--out", "{out}", "--lr", "0"], "lr must be"),
        (["train", "--corpus", "demo-zh", "--out", "{out}", "--block-size", "200"], "max_len"),
        (["scaling", "--d-k", "0"], "positive"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(args, message, checkpoint, tmp_path, capsys):
    paths = {"ckpt": str(checkpoint), "missing": str(tmp_path / "nope"), "out": str(tmp_path / "out")}
    assert main([a.format(**paths) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_scaling_prints_the_demo_table(capsys):
    assert main(["scaling"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["d_k", "score_std_unscaled", "score_std_scaled"]
    assert "1.9813" in lines[1] and "0.9022" in lines[4]
