"""Checkpoints: a trained MiniGPT as a folder in Hugging Face's layout, saved kill-safe, loaded safely.

A checkpoint folder holds
- `config.json`: format tag and version, the model config, the tokenizer vocabulary, the
  training config, training metadata (`meta`), the weights' sha256 and, when training state
  was kept, the optimizer's settings and its file's sha256;
- `model.safetensors`: the weights, readable with `safetensors.torch.load_file`. The LM head
  is tied to the token embedding, so only `token_embed.weight` is stored;
- `optimizer.safetensors` (optional, for resuming): the optimizer's tensors as
  `state.<param index>.<name>`.

Kill-safe saving, as Hugging Face's Trainer does it: a folder is written once, in a hidden
staging folder beside it, every file fsynced, then renamed into place in one step, so it
exists complete or not at all. A training run saves into a run folder, one
`checkpoint-<step>/` per save; only once the new one is in place are the older ones removed.
`from_pretrained(run_folder)` loads the newest: a SIGKILL at any moment leaves the previous
checkpoint loadable. One writer per run folder: two runs saving into one would remove each
other's checkpoints (the CLI refuses an --out that holds another run).

Loading has one validation path, `load_files()`, for a folder's files and a zip's alike:
json and safetensors only, never a pickle; the sha256 in config.json; the config's own checks;
and `load_state_dict(strict=True)` for names and shapes. Every refusal is a `CheckpointError`.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import safetensors.torch
import torch

from .config import GPTConfig, TrainConfig
from .header import (CONFIG_NAME, FORMAT, FORMAT_VERSION, OPTIMIZER_NAME, WEIGHTS_NAME, CheckpointError,
                     read_header)
from .messages import Message
from .model import MiniGPT
from .tokenizer import CharTokenizer

TIED_KEY = "lm_head.weight"  # the same tensor as token_embed.weight
PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".ckpt")
WEIGHT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # float8 would let a small file build a big model
MAX_EXTRA_PARAMS = 2**20             # slack over the stored values before a config counts as doctored

_STEP_FOLDER = re.compile(r"checkpoint-(\d+)")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass
class Checkpoint:
    """A loaded checkpoint; `model` is in eval mode on the requested device."""

    model: MiniGPT
    tokenizer: CharTokenizer
    train_config: TrainConfig | None
    meta: dict[str, Any] = field(default_factory=dict)
    optimizer_state: dict[str, Any] | None = None

    @property
    def block_size(self) -> int:
        """The context the model was trained on, which sampling keeps to (max_len when unknown)."""
        if self.train_config is None:
            return self.model.config.max_len
        return min(self.train_config.block_size, self.model.config.max_len)


# ---------------------------------------------------------------- serialising, in memory


def checkpoint_files(
    model: MiniGPT,
    tokenizer: CharTokenizer,
    *,
    train_config: TrainConfig | None = None,
    meta: dict[str, Any] | None = None,
    optimizer: torch.optim.Optimizer | dict[str, Any] | None = None,
) -> dict[str, bytes]:
    """Every file of a checkpoint, by name. `optimizer`: an optimizer or its `state_dict()`."""
    net = _unwrap(model)
    if tokenizer.vocab_size != net.config.vocab_size:
        raise CheckpointError(
            "the tokenizer has {chars} characters but the model's vocab_size is {vocab_size}.",
            chars=tokenizer.vocab_size, vocab_size=net.config.vocab_size,
        )
    if meta is not None and not isinstance(meta, dict):
        raise CheckpointError("meta must be a dict, got {type}.", type=type(meta).__name__)
    weights = _weights_bytes(net)
    files = {WEIGHTS_NAME: weights}
    config: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": net.config.to_dict(),
        "vocab": list(tokenizer.chars),
        "train": train_config.to_dict() if train_config is not None else None,
        "meta": dict(meta or {}),
        "weights_sha256": _sha256(weights),
        "optimizer": None,
    }
    if optimizer is not None:
        files[OPTIMIZER_NAME], config["optimizer"] = _optimizer_parts(optimizer)
    files[CONFIG_NAME] = _config_bytes(config)
    return files


def _unwrap(model: torch.nn.Module) -> MiniGPT:
    """The MiniGPT inside torch.compile or DistributedDataParallel, whose keys carry prefixes."""
    while not isinstance(model, MiniGPT):
        inner = getattr(model, "_orig_mod", None) or getattr(model, "module", None)
        if inner is None:
            raise CheckpointError("save_pretrained expects a MiniGPT, got {type}.", type=type(model).__name__)
        model = inner
    return model


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _weights_bytes(model: MiniGPT) -> bytes:
    state = model.state_dict()
    state.pop(TIED_KEY, None)  # safetensors refuses tensors that share memory
    tensors = {name: t.detach().to("cpu").contiguous() for name, t in state.items()}
    return safetensors.torch.save(tensors, metadata={"format": "pt"})


def _optimizer_parts(optimizer: torch.optim.Optimizer | dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """The optimizer's tensors as safetensors bytes, and its settings for config.json."""
    state_dict = optimizer if isinstance(optimizer, dict) else optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}  # non-tensor per-parameter state, if an optimizer keeps any
    for index, per_param in state_dict["state"].items():
        for key, value in per_param.items():
            name = f"state.{index}.{key}"
            if torch.is_tensor(value):
                tensors[name] = value.detach().to("cpu").contiguous()
            else:
                scalars[name] = value
    data = safetensors.torch.save(tensors)
    return data, {"sha256": _sha256(data), "param_groups": state_dict["param_groups"], "state_scalars": scalars}


def _config_bytes(config: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(config, ensure_ascii=False, indent=2)
    except (TypeError, ValueError) as error:
        raise CheckpointError(
            "meta and the optimizer's settings must hold only JSON values (numbers, strings, lists, "
            "dicts): {error}.", error=error,
        ) from None
    return (text + "\n").encode("utf-8")


# ---------------------------------------------------------------- folders


def save_pretrained(directory: str | os.PathLike, model: MiniGPT, tokenizer: CharTokenizer, **parts: Any) -> Path:
    """Write a new checkpoint folder, complete or not at all; `parts` as in `checkpoint_files`.

    The folder must not exist yet (or be empty): a folder is written once. To save again and
    again, as training does, use `save_checkpoint`, which gives every save a folder of its own.
    """
    return write_checkpoint_files(directory, checkpoint_files(model, tokenizer, **parts))


def write_checkpoint_files(directory: str | os.PathLike, files: Mapping[str, bytes]) -> Path:
    """Write a checkpoint's files (checkpoint_files' dict) as a new folder, complete or not at all."""
    target = Path(directory).resolve()  # staging must sit beside the real folder, not a symlink
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise CheckpointError(
            "cannot save to {target}: it already exists and is not an empty folder. A checkpoint "
            "folder is written once; choose a new folder.", target=target,
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.tmp-{secrets.token_hex(6)}"
    staging.mkdir()
    try:
        for name, data in files.items():
            with open(staging / name, "xb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
        _fsync_dir(staging)
        os.replace(staging, target)  # the commit point: replaces only an empty folder
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _fsync_dir(target.parent)
    return target


def save_checkpoint(run_dir: str | os.PathLike, step: int, model: MiniGPT, tokenizer: CharTokenizer,
                    **parts: Any) -> Path:
    """Save step `step` of a run as run_dir/checkpoint-<step>, then remove the run's older saves.

    A step is saved once: saving a step that is already there returns its folder unchanged.
    """
    return save_step_files(run_dir, step, checkpoint_files(model, tokenizer, **parts))


def save_step_files(run_dir: str | os.PathLike, step: int, files: Mapping[str, bytes], keep: int = 1) -> Path:
    """save_checkpoint for files already made: run_dir/checkpoint-<step>, then only the `keep` newest saves stay."""
    run_dir = Path(run_dir)
    target = run_dir / f"checkpoint-{step}"
    if not target.exists():
        write_checkpoint_files(target, files)
    older = sorted((f for f in _step_folders(run_dir) if f != target), key=lambda f: int(f.name.split("-")[1]))
    for folder in older[: max(0, len(older) - (keep - 1))]:
        _remove(folder)
    for leftover in run_dir.glob(".checkpoint-*"):  # staging and trash of saves that were killed
        shutil.rmtree(leftover, ignore_errors=True)
    return target


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The run folder's newest `checkpoint-<step>`, or None."""
    folders = _step_folders(Path(run_dir))
    return max(folders, key=lambda f: int(_STEP_FOLDER.fullmatch(f.name).group(1))) if folders else None


def _step_folders(run_dir: Path) -> list[Path]:
    if not run_dir.is_dir():
        return []
    return [f for f in run_dir.iterdir() if _STEP_FOLDER.fullmatch(f.name) and f.is_dir()]


def _remove(folder: Path) -> None:
    """Rename first, so that a kill halfway through the deletion leaves no partial checkpoint."""
    trash = folder.parent / f".{folder.name}.trash-{secrets.token_hex(6)}"
    os.rename(folder, trash)
    shutil.rmtree(trash, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    """Make renames inside `path` durable; without it a power cut can undo them."""
    if os.name != "posix":  # Windows cannot open a folder to fsync it
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def from_pretrained(
    path: str | os.PathLike, *, device: str | torch.device = "cpu", with_optimizer: bool = False
) -> Checkpoint:
    """Load a checkpoint folder, or a run folder's newest checkpoint; the optimizer only on request."""
    folder = checkpoint_folder(path)
    wanted = [CONFIG_NAME, WEIGHTS_NAME] + ([OPTIMIZER_NAME] if with_optimizer else [])
    try:
        files = {name: (folder / name).read_bytes() for name in wanted if (folder / name).is_file()}
        others = [p.name for p in folder.iterdir()]
    except OSError as error:  # e.g. a run's next save removed this checkpoint while it was read
        raise CheckpointError("cannot read {folder} ({reason}); if a run is saving into it, "
                              "try again: the newest checkpoint is always complete.",
                              folder=folder, reason=error.strerror) from None
    return load_files(files, device=device, with_optimizer=with_optimizer, source=str(folder), others=others)


def checkpoint_folder(path: str | os.PathLike) -> Path:
    """The folder `from_pretrained(path)` reads: path itself, or a run folder's newest checkpoint."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError("checkpoint folder {path} does not exist.", path=path)
    if not path.is_dir():
        raise CheckpointError("{path} is not a folder; a checkpoint is a folder holding config.json.", path=path)
    if (path / CONFIG_NAME).exists():
        return path
    latest = latest_checkpoint(path)
    if latest is not None:
        return latest
    if not any(path.iterdir()):
        raise CheckpointError("checkpoint folder {path} is empty.", path=path)
    return path  # load_files says what is missing


# ---------------------------------------------------------------- loading: one validation path


def load_files(
    files: Mapping[str, bytes],
    *,
    device: str | torch.device = "cpu",
    with_optimizer: bool = False,
    source: str | Message = Message("the checkpoint"),
    others: list[str] | None = None,
) -> Checkpoint:
    """Build a Checkpoint from its files' bytes, checking everything; `others` are further file
    names that came along (to recognise a folder of pickles)."""
    names = set(files) | set(others or [])
    if CONFIG_NAME not in files:
        # a pickle by its bytes where we have them (a zip's entries), by its name where we do not (a folder)
        unread = [n for n in names - set(files) if n.endswith(PICKLE_SUFFIXES)]
        if (any(_looks_pickled(data) for data in files.values()) or unread) and \
                not any(n.endswith(".safetensors") for n in names):
            raise CheckpointError("{source} holds only pickle files: pickle-based checkpoints (torch.save) are "
                                  "refused: they can run code when loaded; convert to safetensors.", source=source)
        raise CheckpointError("{source} has no config.json, so it is not a MiniGPT checkpoint.", source=source)
    header = read_header(files[CONFIG_NAME])
    tensors = _tensors(files, WEIGHTS_NAME, header.config["weights_sha256"], source)
    model = _build_model(header.model_config, tensors)
    optimizer_state = None
    if with_optimizer and header.config.get("optimizer") is not None:
        optimizer_state = _optimizer_state(files, header.config["optimizer"], source)
    return Checkpoint(model.to(device).eval(), header.tokenizer, header.train_config, header.meta, optimizer_state)


def _looks_pickled(data: bytes) -> bool:
    """A pickle (protocol 2 and later begin with the PROTO opcode) or torch.save's zip around one."""
    return data[:1] == b"\x80" or (data[:4] == b"PK\x03\x04" and b"data.pkl" in data)


def _tensors(files: Mapping[str, bytes], name: str, sha256: Any, source: str) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors, once it is there, no pickle, and matches its sha256."""
    if not (isinstance(sha256, str) and _SHA256.fullmatch(sha256)):
        raise CheckpointError("config.json's sha256 of {name} must be 64 lowercase hex digits, got {sha256!r}.",
                              name=name, sha256=sha256)
    data = files.get(name)
    if data is None:
        raise CheckpointError("{name}, which config.json describes, is missing from {source}.",
                              name=name, source=source)
    if data.startswith((b"PK", b"\x80")) and data[8:9] != b"{":  # torch.save: a zip or a bare pickle
        raise CheckpointError("{name} holds a pickle, not safetensors: pickle-based checkpoints (torch.save) "
                              "are refused: they can run code when loaded; convert to safetensors.", name=name)
    if _sha256(data) != sha256:
        raise CheckpointError("{name} does not match the sha256 in config.json: the file is damaged or was "
                              "replaced.", name=name)
    try:
        return safetensors.torch.load(data)
    except Exception as error:  # safetensors raises SafetensorError and others on malformed input
        raise CheckpointError("{name} is not a valid safetensors file ({error}).", name=name, error=error) from None


def _build_model(config: GPTConfig, tensors: dict[str, torch.Tensor]) -> MiniGPT:
    stored = sum(t.numel() for t in tensors.values())
    if config.num_params() > 2 * stored + MAX_EXTRA_PARAMS:  # before allocating what the file doesn't justify
        raise CheckpointError(
            "config.json describes a model of {params} parameters but {file} holds only {stored} values: "
            "the weights do not fit this config.", params=config.num_params(), file=WEIGHTS_NAME, stored=stored,
        )
    for key, tensor in tensors.items():  # load_state_dict would silently convert any other dtype
        if tensor.dtype not in WEIGHT_DTYPES:
            raise CheckpointError("{file}: tensor {key} has dtype {dtype}; weights must be float32, float16 or "
                                  "bfloat16 (floating point, at least 2 bytes a value).",
                                  file=WEIGHTS_NAME, key=key, dtype=tensor.dtype)
    model = MiniGPT(config)
    if TIED_KEY in tensors:
        raise CheckpointError("{file} stores {key}, which is tied to token_embed.weight and never stored.",
                              file=WEIGHTS_NAME, key=TIED_KEY)
    if "token_embed.weight" in tensors:
        tensors = {**tensors, TIED_KEY: tensors["token_embed.weight"]}
    try:
        model.load_state_dict(tensors, strict=True)  # names and shapes
    except RuntimeError as error:
        detail = str(error).split(":", 1)[-1].strip().replace("\n\t", " ").replace("\n", " ")
        raise CheckpointError("{file} does not fit config.json's model: {detail}", file=WEIGHTS_NAME,
                              detail=detail) from None
    return model


def _optimizer_state(files: Mapping[str, bytes], settings: Any, source: str) -> dict[str, Any]:
    """Rebuild `optimizer.state_dict()` from its tensors and the settings in config.json."""
    if not isinstance(settings, dict) or not isinstance(settings.get("state_scalars"), dict):
        raise CheckpointError("config.json's optimizer entry is malformed.")
    tensors = _tensors(files, OPTIMIZER_NAME, settings.get("sha256"), source)
    state: dict[int, dict[str, Any]] = {}
    for key, value in {**tensors, **settings["state_scalars"]}.items():
        parts = key.split(".", 2)
        if len(parts) != 3 or parts[0] != "state" or not parts[1].isdigit():
            raise CheckpointError("{file} has an unexpected entry {key!r}; expected state.<index>.<name>.",
                                  file=OPTIMIZER_NAME, key=key)
        state.setdefault(int(parts[1]), {})[parts[2]] = value
    return {"state": state, "param_groups": _param_groups(settings.get("param_groups"))}


def _param_groups(groups: Any) -> list[dict[str, Any]]:
    ok = isinstance(groups, list) and all(
        isinstance(g, dict)
        and isinstance(g.get("params"), list)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in g["params"])
        for g in groups
    )
    if not ok:
        raise CheckpointError("config.json has malformed optimizer param groups.")
    # JSON turned tuples such as AdamW's betas into lists: give them back their type
    return [{k: (tuple(v) if isinstance(v, list) and k != "params" else v) for k, v in g.items()} for g in groups]
