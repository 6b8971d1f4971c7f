"""Helper process for the SIGKILL test in test_checkpoint.py: forks savers to be killed.

Importing torch takes about a second, so this process imports it once and forks one saver
per kill. Usage: `_save_worker.py TARGET REFERENCE`. At start it saves checkpoints A and B
(each with an AdamW state) into REFERENCE/A and REFERENCE/B, saves A into TARGET, and says
"started". Then, one line per message:
  test -> "go"             the worker forks a child that saves B, A, B, ... into TARGET forever;
  child -> "ready <pid>"   before its first save, so the test can SIGKILL it at a random moment;
  worker -> "reaped <st>"  once the child has died, with its raw wait status.
Any other line, or end of input, ends the worker.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from minigpt.checkpoint import save_pretrained
from minigpt.config import GPTConfig
from minigpt.model import MiniGPT
from minigpt.tokenizer import CharTokenizer

TEXT = "hello world, tiny checkpoints"


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _trained(seed: int, tokenizer: CharTokenizer) -> tuple[MiniGPT, torch.optim.Optimizer]:
    """A tiny model after one AdamW step, so the optimizer file has real state."""
    torch.manual_seed(seed)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=16, num_heads=2, num_layers=1,
                       d_ff=32, max_len=16, dropout=0.0)
    model = MiniGPT(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.tensor([tokenizer.encode(TEXT[:9])])
    _, loss = model(ids[:, :-1], ids[:, 1:])
    loss.backward()
    optimizer.step()
    return model, optimizer


def _save(target: Path, label: str, pair, tokenizer: CharTokenizer) -> None:
    model, optimizer = pair
    save_pretrained(target, model, tokenizer, meta={"label": label}, optimizer=optimizer)


def _save_forever(target: Path, pairs: dict, tokenizer: CharTokenizer) -> None:
    try:
        _say(f"ready {os.getpid()}")
        while True:
            for label in ("B", "A"):
                _save(target, label, pairs[label], tokenizer)
    finally:
        os._exit(1)  # never fall back into the parent's loop; SIGKILL is the expected end


def main(target: Path, reference: Path) -> None:
    torch.set_num_threads(1)  # the savers compute nothing; spare the CPUs for the test's reads
    tokenizer = CharTokenizer.from_text(TEXT)
    pairs = {"A": _trained(1, tokenizer), "B": _trained(2, tokenizer)}
    for label, pair in pairs.items():
        _save(reference / label, label, pair, tokenizer)
    _save(target, "A", pairs["A"], tokenizer)
    _say("started")
    for line in sys.stdin:
        if line.strip() != "go":
            break
        pid = os.fork()
        if pid == 0:
            _save_forever(target, pairs, tokenizer)
        _, status = os.waitpid(pid, 0)
        _say(f"reaped {status}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
