"""Checkpoints: save a trained MiniGPT to a folder, load it back, move it as a zip.

Layout, in Hugging Face's style, one folder:
- `config.json`: format tag and version, the model config, the tokenizer vocabulary, the
  training config, training metadata (`meta`), and the name and sha256 of each data file;
- `model-<hash>.safetensors`: the weights. The LM head is tied to the token embedding, so
  only `token_embed.weight` is stored and MiniGPT's constructor re-ties the head on load;
- `optimizer-<hash>.safetensors` (optional, for resuming): the optimizer's tensors as
  `state.<param index>.<name>`, its param groups as JSON in the file's metadata.
A folder whose config.json names no weights file is read from a plain `model.safetensors`.

Saves are atomic. A reader looking at the folder at any instant, even one where the writer
was SIGKILLed, finds the complete old checkpoint or the complete new one:
1. every file is written and fsynced in a fresh sibling staging folder,
   `.<name>.tmp-<pid>-<random>`, on the same filesystem;
2. the first save renames the whole staging folder to the checkpoint folder;
3. later saves move the data files in first. Their names carry a hash of their content,
   so they never overwrite a file that the current config.json names;
4. `config.json` is then swapped in by one `os.replace`: this is the commit point;
5. last, data files that the new config.json does not name are deleted.
A reader reads config.json, then the files it names. If one vanished in between (step 5 of
a save running meanwhile), config.json has changed, and the read starts over from it.
One writer per folder at a time: two concurrent saves may delete each other's files.

Loading never unpickles: json and safetensors only. Each data file's sha256 is checked
against config.json, and every refusal is a `CheckpointError` saying what is wrong.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import safetensors.torch
import torch

from .config import ConfigError, GPTConfig, TrainConfig
from .model import MiniGPT
from .tokenizer import CharTokenizer

FORMAT = "minigpt"
FORMAT_VERSION = 1
CONFIG_NAME = "config.json"
PLAIN_WEIGHTS_NAME = "model.safetensors"
PLAIN_OPTIMIZER_NAME = "optimizer.safetensors"
TIED_KEY = "lm_head.weight"  # the same tensor as token_embed.weight
PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".ckpt")
PICKLE_REFUSAL = (
    "pickle-based checkpoints (torch.save) are refused: they can run code when loaded; "
    "convert to safetensors."
)

MAX_ZIP_ENTRIES = 32
MAX_UNCOMPRESSED = 64 * 2**20        # bytes per unpacked file
MAX_TOTAL_UNCOMPRESSED = 128 * 2**20
MAX_COMPRESSION_RATIO = 100          # float weights barely compress; a zip bomb's zeros do ~1000:1
MAX_POSITION_TABLE = 2**25           # max_len * d_model: the one allocation the weights don't bound
MAX_EXTRA_PARAMS = 2**20             # slack over the stored values before a config counts as doctored

_RATIO_FREE_BYTES = 2**20            # small files such as config.json may compress well
_CHUNK = 2**20
_READ_ATTEMPTS = 20
_STALE_STAGING_S = 3600
_SHA256 = re.compile(r"[0-9a-f]{64}")
_FILE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*\.safetensors")
_DATA_FILE = re.compile(r"(model|optimizer)(-[0-9a-f]{16})?\.safetensors")
_ZIP_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
_REQUIRED_KEYS = {"format", "format_version", "model", "vocab", "weights_sha256"}
_OPTIONAL_KEYS = {"train", "meta", "weights_file", "optimizer_file", "optimizer_sha256"}
_OPTIMIZER_KEY = "minigpt.optimizer"  # the one metadata key: safetensors writes several in random order


class CheckpointError(ValueError):
    """A checkpoint that cannot be saved or loaded, with a sentence saying why."""


@dataclass
class Checkpoint:
    """A loaded checkpoint; `model` is in eval mode on the requested device."""

    model: MiniGPT
    tokenizer: CharTokenizer
    train_config: TrainConfig | None
    meta: dict[str, Any] = field(default_factory=dict)
    optimizer_state: dict[str, Any] | None = None


@dataclass
class _Snapshot:
    """One consistent read: a config.json and the bytes of the data files it names."""

    config: dict[str, Any]
    files: dict[str, bytes]   # config.json included
    sha256: dict[str, str]    # data file name -> hash that config.json promises


# ---------------------------------------------------------------- saving


def save_pretrained(
    directory: str | os.PathLike,
    model: MiniGPT,
    tokenizer: CharTokenizer,
    *,
    train_config: TrainConfig | None = None,
    meta: dict[str, Any] | None = None,
    optimizer: torch.optim.Optimizer | dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint folder atomically (see the module docstring) and return its path.

    `optimizer` is an optimizer or a copy of its `state_dict()`, kept so training can resume.
    """
    files = _serialize(model, tokenizer, train_config, meta, optimizer)
    target = _save_target(directory)
    _remove_stale_staging(target)
    staging = _new_staging_dir(target)
    try:
        _write_files(staging, files)
        if not _rename_into_place(staging, target):
            _install(staging, target, files)
            _collect_garbage(target, keep=set(files))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _save_target(directory: str | os.PathLike) -> Path:
    target = Path(directory).resolve()  # staging must sit beside the real folder, not a symlink
    if target.exists() and not target.is_dir():
        raise CheckpointError(f"cannot save a checkpoint to {target}: it exists and is not a folder.")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _serialize(
    model: MiniGPT,
    tokenizer: CharTokenizer,
    train_config: TrainConfig | None,
    meta: dict[str, Any] | None,
    optimizer: torch.optim.Optimizer | dict[str, Any] | None,
) -> dict[str, bytes]:
    """Every file of the checkpoint by name, config.json last."""
    net = _unwrap(model)
    if tokenizer.vocab_size != net.config.vocab_size:
        raise CheckpointError(
            f"the tokenizer has {tokenizer.vocab_size} characters but the model's vocab_size "
            f"is {net.config.vocab_size}."
        )
    if meta is not None and not isinstance(meta, dict):
        raise CheckpointError(f"meta must be a dict, got {type(meta).__name__}.")
    config: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": net.config.to_dict(),
        "vocab": list(tokenizer.chars),
        "train": train_config.to_dict() if train_config is not None else None,
        "meta": dict(meta or {}),
    }
    files: dict[str, bytes] = {}
    config.update(_add_data_file(files, "weights", "model", _weights_bytes(net)))
    opt = _optimizer_bytes(optimizer) if optimizer is not None else None
    config.update(_add_data_file(files, "optimizer", "optimizer", opt))
    files[CONFIG_NAME] = _config_bytes(config)
    return files


def _unwrap(model: torch.nn.Module) -> MiniGPT:
    """The MiniGPT inside torch.compile or DistributedDataParallel, whose keys carry prefixes."""
    while not isinstance(model, MiniGPT):
        inner = getattr(model, "_orig_mod", None) or getattr(model, "module", None)
        if inner is None:
            raise CheckpointError(f"save_pretrained expects a MiniGPT, got {type(model).__name__}.")
        model = inner
    return model


def _add_data_file(files: dict[str, bytes], key: str, prefix: str, data: bytes | None) -> dict[str, Any]:
    """Name a data file by its content (see step 3 of the design) and return its config entries."""
    if data is None:
        return {f"{key}_file": None, f"{key}_sha256": None}
    digest = hashlib.sha256(data).hexdigest()
    name = f"{prefix}-{digest[:16]}.safetensors"
    files[name] = data
    return {f"{key}_file": name, f"{key}_sha256": digest}


def _weights_bytes(model: MiniGPT) -> bytes:
    state = model.state_dict()
    state.pop(TIED_KEY, None)  # safetensors refuses tensors that share memory
    tensors = {name: t.detach().to("cpu").contiguous() for name, t in state.items()}
    return safetensors.torch.save(tensors, metadata={"format": "pt"})


def _optimizer_bytes(optimizer: torch.optim.Optimizer | dict[str, Any]) -> bytes:
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
    settings = {"param_groups": state_dict["param_groups"], "state_scalars": scalars}
    try:
        text = json.dumps(settings, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"the optimizer's settings cannot be stored as JSON ({error}).") from None
    return safetensors.torch.save(tensors, metadata={_OPTIMIZER_KEY: text})


def _config_bytes(config: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(config, ensure_ascii=False, indent=2)
    except (TypeError, ValueError) as error:
        raise CheckpointError(
            f"meta must hold only JSON values (numbers, strings, lists, dicts): {error}."
        ) from None
    return (text + "\n").encode("utf-8")


def _staging_prefix(target: Path) -> str:
    return f".{target.name}.tmp-"


def _new_staging_dir(target: Path) -> Path:
    staging = target.parent / f"{_staging_prefix(target)}{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir()
    return staging


def _write_files(staging: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        with open(staging / name, "xb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
    _fsync_dir(staging)


def _fsync_dir(path: Path) -> None:
    """Make renames inside `path` durable; without it a power cut can undo them."""
    if os.name != "posix":  # Windows cannot open a folder to fsync it
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _rename_into_place(staging: Path, target: Path) -> bool:
    """A first save renames the whole staging folder, so the checkpoint appears complete."""
    if target.exists():
        return False
    try:
        os.rename(staging, target)
    except OSError:  # the folder appeared meanwhile: fall back to moving files in
        return False
    _fsync_dir(target.parent)
    return True


def _install(staging: Path, target: Path, files: dict[str, bytes]) -> None:
    for name in files:
        if name != CONFIG_NAME:
            os.replace(staging / name, target / name)
    _fsync_dir(target)  # data files must be durable before a config.json names them
    _publish_config(staging, target)


def _publish_config(staging: Path, target: Path) -> None:
    """The commit point: before it readers see the old checkpoint, after it the new one."""
    os.replace(staging / CONFIG_NAME, target / CONFIG_NAME)
    _fsync_dir(target)


def _collect_garbage(target: Path, keep: set[str]) -> None:
    """Delete data files of earlier saves, which the new config.json no longer names."""
    for path in target.iterdir():
        if _DATA_FILE.fullmatch(path.name) and path.name not in keep:
            path.unlink(missing_ok=True)


def _remove_stale_staging(target: Path) -> None:
    """Remove staging folders of saves that were killed midway; a live writer's are kept."""
    prefix = _staging_prefix(target)
    for path in target.parent.iterdir():
        if path.name.startswith(prefix) and _is_stale(path, path.name[len(prefix):]):
            shutil.rmtree(path, ignore_errors=True)


def _is_stale(path: Path, suffix: str) -> bool:
    try:
        if time.time() - path.stat().st_mtime > _STALE_STAGING_S:
            return True
    except FileNotFoundError:
        return False
    pid = suffix.split("-", 1)[0]
    if os.name != "posix" or not pid.isdigit():  # no cheap liveness test: age alone decides
        return False
    try:
        os.kill(int(pid), 0)  # signal 0 only checks that the process exists
    except ProcessLookupError:
        return True
    except OSError:  # alive, owned by someone else
        return False
    return False


# ---------------------------------------------------------------- loading


def from_pretrained(
    directory: str | os.PathLike, *, device: str | torch.device = "cpu", with_optimizer: bool = False
) -> Checkpoint:
    """Load a checkpoint folder, verifying every file; the optimizer state only on request."""
    snapshot = _read_snapshot(directory, with_optimizer=with_optimizer)
    config = snapshot.config
    model_config = _model_config(config["model"])
    tokenizer = _tokenizer(config["vocab"], model_config.vocab_size)
    train_config = _train_config(config.get("train"))
    meta = _meta(config.get("meta"))
    weights_name = _weights_name(config)
    model = _build_model(model_config, _decode(snapshot, weights_name), weights_name)
    optimizer_state = None
    optimizer_name = _optimizer_name(config)
    if with_optimizer and optimizer_name is not None:
        optimizer_state = _optimizer_state(snapshot, optimizer_name)
    model.to(device).eval()
    return Checkpoint(model, tokenizer, train_config, meta, optimizer_state)


def _read_snapshot(directory: str | os.PathLike, *, with_optimizer: bool) -> _Snapshot:
    """Read config.json and the files it names, starting over if a save swapped them meanwhile."""
    root = _checkpoint_dir(directory)
    for _ in range(_READ_ATTEMPTS):
        config_bytes = _read_config_bytes(root)
        config = _parse_config(config_bytes)
        wanted = _data_files(config, with_optimizer)
        try:
            files = {name: (root / name).read_bytes() for name in wanted}
        except FileNotFoundError as error:
            if _read_or_none(root / CONFIG_NAME) == config_bytes:
                _refuse_missing(root, Path(error.filename).name)
            continue
        files[CONFIG_NAME] = config_bytes
        return _Snapshot(config, files, wanted)
    raise CheckpointError(f"{root} kept changing while it was read; try again once the save has finished.")


def _checkpoint_dir(directory: str | os.PathLike) -> Path:
    root = Path(directory)
    if not root.exists():
        raise CheckpointError(f"checkpoint folder {root} does not exist.")
    if not root.is_dir():
        raise CheckpointError(f"{root} is not a folder; a checkpoint is a folder holding config.json.")
    if not any(root.iterdir()):
        raise CheckpointError(f"checkpoint folder {root} is empty.")
    return root


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _read_config_bytes(root: Path) -> bytes:
    try:
        return (root / CONFIG_NAME).read_bytes()
    except FileNotFoundError:
        _refuse_pickles(root)
        raise CheckpointError(f"{root} has no config.json, so it is not a MiniGPT checkpoint.") from None
    except OSError as error:
        raise CheckpointError(f"cannot read {root / CONFIG_NAME}: {error.strerror}.") from None


def _refuse_pickles(root: Path) -> None:
    try:
        names = [p.name for p in root.iterdir()]
    except OSError:  # the folder vanished meanwhile; the caller's message still holds
        return
    if any(n.endswith(PICKLE_SUFFIXES) for n in names) and not any(n.endswith(".safetensors") for n in names):
        raise CheckpointError(f"{root} holds only pickle files: {PICKLE_REFUSAL}")


def _refuse_missing(root: Path, name: str) -> None:
    _refuse_pickles(root)
    raise CheckpointError(f"{name}, named by config.json, is missing from {root}.")


def _parse_config(config_bytes: bytes) -> dict[str, Any]:
    """Check config.json's envelope: format, version, keys and the data files it names."""
    try:
        config = json.loads(config_bytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise CheckpointError(f"config.json is not valid UTF-8 JSON ({error}).") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"config.json must hold a JSON object, got {type(config).__name__}.")
    if config.get("format") != FORMAT:
        raise CheckpointError(
            f"config.json is not a MiniGPT checkpoint: its format is {config.get('format')!r}, expected {FORMAT!r}."
        )
    _check_version(config.get("format_version"))
    _check_keys(config)
    _check_data_entries(config)
    return config


def _check_version(version: Any) -> None:
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(f"config.json's format_version must be a positive integer, got {version!r}.")
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"this checkpoint uses format version {version}, newer than the {FORMAT_VERSION} this "
            f"MiniGPT reads; update MiniGPT to load it."
        )


def _check_keys(config: dict[str, Any]) -> None:
    unknown = sorted(set(config) - _REQUIRED_KEYS - _OPTIONAL_KEYS)
    if unknown:
        raise CheckpointError(f"config.json has unknown keys: {', '.join(unknown)}.")
    missing = sorted(_REQUIRED_KEYS - set(config))
    if missing:
        raise CheckpointError(f"config.json lacks required keys: {', '.join(missing)}.")


def _check_data_entries(config: dict[str, Any]) -> None:
    for key in ("weights_file", "optimizer_file"):
        name = config.get(key)
        if name is not None and (not isinstance(name, str) or not _FILE_NAME.fullmatch(name)):
            raise CheckpointError(f"config.json's {key} must be a plain *.safetensors file name, got {name!r}.")
    for key in ("weights_sha256", "optimizer_sha256"):
        digest = config.get(key)
        if (digest is not None or key == "weights_sha256") and not (
            isinstance(digest, str) and _SHA256.fullmatch(digest)
        ):
            raise CheckpointError(f"config.json's {key} must be 64 lowercase hex digits, got {digest!r}.")
    if config.get("optimizer_file") is not None and config.get("optimizer_sha256") is None:
        raise CheckpointError("config.json names an optimizer_file but gives no optimizer_sha256.")


def _weights_name(config: dict[str, Any]) -> str:
    return config.get("weights_file") or PLAIN_WEIGHTS_NAME


def _optimizer_name(config: dict[str, Any]) -> str | None:
    if config.get("optimizer_sha256") is None:
        return None
    return config.get("optimizer_file") or PLAIN_OPTIMIZER_NAME


def _data_files(config: dict[str, Any], with_optimizer: bool) -> dict[str, str]:
    """The data files to read, each with the sha256 that config.json promises."""
    files = {_weights_name(config): config["weights_sha256"]}
    optimizer_name = _optimizer_name(config)
    if with_optimizer and optimizer_name is not None:
        files[optimizer_name] = config["optimizer_sha256"]
    return files


def _model_config(data: Any) -> GPTConfig:
    try:
        config = GPTConfig.from_dict(data)
    except ConfigError as error:
        raise CheckpointError(f"config.json's model config is invalid: {error}") from None
    if config.max_len * config.d_model > MAX_POSITION_TABLE:
        raise CheckpointError(
            f"config.json asks for max_len x d_model = {config.max_len * config.d_model} position "
            f"values, more than the {MAX_POSITION_TABLE} this loader allows."
        )
    return config


def _tokenizer(vocab: Any, vocab_size: int) -> CharTokenizer:
    if not isinstance(vocab, list):
        raise CheckpointError(f"config.json's vocab must be a list of characters, got {type(vocab).__name__}.")
    try:
        tokenizer = CharTokenizer(vocab)
    except ValueError as error:
        raise CheckpointError(f"config.json's vocab is invalid: {error}.") from None
    if tokenizer.vocab_size != vocab_size:
        raise CheckpointError(
            f"config.json lists {tokenizer.vocab_size} vocabulary characters but the model's "
            f"vocab_size is {vocab_size}."
        )
    return tokenizer


def _train_config(data: Any) -> TrainConfig | None:
    if data is None:
        return None
    try:
        return TrainConfig.from_dict(data)
    except ConfigError as error:
        raise CheckpointError(f"config.json's training config is invalid: {error}") from None


def _meta(meta: Any) -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise CheckpointError(f"config.json's meta must be a JSON object, got {type(meta).__name__}.")
    return meta


def _decode(snapshot: _Snapshot, name: str) -> dict[str, torch.Tensor]:
    """Tensors of a data file, after the pickle check and the sha256 check."""
    data = snapshot.files[name]
    if _looks_like_pickle(data):
        raise CheckpointError(f"{name} holds a pickle, not safetensors: {PICKLE_REFUSAL}")
    _verify_sha256(name, data, snapshot.sha256[name])
    try:
        return safetensors.torch.load(data)
    except Exception as error:  # safetensors raises SafetensorError and others on malformed input
        raise CheckpointError(f"{name} is not a valid safetensors file ({error}).") from None


def _looks_like_pickle(data: bytes) -> bool:
    """torch.save writes a zip (PK) or a bare pickle (0x80, protocol). A safetensors file opens
    with an 8-byte header length and then '{', which rules out a false alarm."""
    if data[8:9] == b"{":
        return False
    return data.startswith((b"PK", b"\x80"))


def _verify_sha256(name: str, data: bytes, expected: str) -> None:
    if hashlib.sha256(data).hexdigest() != expected:
        raise CheckpointError(
            f"{name} does not match the sha256 in config.json: the file is damaged or was replaced."
        )


def _build_model(config: GPTConfig, tensors: dict[str, torch.Tensor], name: str) -> MiniGPT:
    _check_model_size(config, tensors, name)
    model = MiniGPT(config)  # re-ties lm_head.weight to token_embed.weight
    expected = model.state_dict()
    expected.pop(TIED_KEY)
    _check_tensors(tensors, expected, name)
    result = model.load_state_dict(tensors, strict=False)
    if result.missing_keys != [TIED_KEY] or result.unexpected_keys:
        raise CheckpointError(
            f"{name} does not fit the model: missing {result.missing_keys}, "
            f"unexpected {result.unexpected_keys}."
        )
    return model


def _check_model_size(config: GPTConfig, tensors: dict[str, torch.Tensor], name: str) -> None:
    """Refuse, before building it, a model far bigger than the stored weights, so a doctored
    config.json cannot make the loader allocate memory the file does not justify."""
    stored = sum(t.numel() for t in tensors.values())
    if config.num_params() > 2 * stored + MAX_EXTRA_PARAMS:
        raise CheckpointError(
            f"config.json describes a model of {config.num_params()} parameters but {name} holds "
            f"only {stored} values: the weights do not fit this config."
        )


def _check_tensors(tensors: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], name: str) -> None:
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise CheckpointError(f"{name} lacks tensors the model needs: {_few(missing)}.")
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise CheckpointError(f"{name} has tensors the model does not have: {_few(unexpected)}.")
    for key, tensor in tensors.items():
        if tensor.shape != expected[key].shape:
            raise CheckpointError(
                f"{name}: tensor {key} has shape {tuple(tensor.shape)} but config.json's model "
                f"needs {tuple(expected[key].shape)}."
            )
        if not tensor.dtype.is_floating_point:
            raise CheckpointError(f"{name}: tensor {key} has dtype {tensor.dtype}; weights must be floating point.")


def _few(names: list[str]) -> str:
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return ", ".join(names[:5]) + more


def _optimizer_state(snapshot: _Snapshot, name: str) -> dict[str, Any]:
    """Rebuild `optimizer.state_dict()` from its tensors and the JSON in the file's metadata."""
    tensors = _decode(snapshot, name)
    settings = _optimizer_settings(snapshot.files[name], name)
    state: dict[int, dict[str, Any]] = {}
    for key, value in {**tensors, **settings["state_scalars"]}.items():
        index, item = _state_key(key, name)
        state.setdefault(index, {})[item] = value
    return {"state": state, "param_groups": _param_groups(settings["param_groups"], name)}


def _optimizer_settings(data: bytes, name: str) -> dict[str, Any]:
    """The JSON in the file's metadata; safetensors has already validated the header."""
    size = int.from_bytes(data[:8], "little")
    metadata = json.loads(data[8 : 8 + size]).get("__metadata__") or {}
    try:
        settings = json.loads(metadata[_OPTIMIZER_KEY])
    except (KeyError, json.JSONDecodeError):
        raise CheckpointError(f"{name} lacks readable optimizer settings in its metadata.") from None
    if not isinstance(settings, dict) or not isinstance(settings.get("state_scalars"), dict):
        raise CheckpointError(f"{name} has malformed optimizer settings.")
    return settings


def _state_key(key: str, name: str) -> tuple[int, str]:
    parts = key.split(".", 2)
    if len(parts) != 3 or parts[0] != "state" or not parts[1].isdigit():
        raise CheckpointError(f"{name} has an unexpected entry {key!r}; expected state.<index>.<name>.")
    return int(parts[1]), parts[2]


def _param_groups(groups: Any, name: str) -> list[dict[str, Any]]:
    ok = isinstance(groups, list) and all(
        isinstance(g, dict)
        and isinstance(g.get("params"), list)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in g["params"])
        for g in groups
    )
    if not ok:
        raise CheckpointError(f"{name} has malformed optimizer param groups.")
    return [_restore_tuples(group) for group in groups]


def _restore_tuples(group: dict[str, Any]) -> dict[str, Any]:
    """JSON turned tuples such as AdamW's betas into lists; give them back their type."""
    return {k: (tuple(v) if isinstance(v, list) and k != "params" else v) for k, v in group.items()}


# ---------------------------------------------------------------- zip


def checkpoint_to_zip(directory: str | os.PathLike) -> bytes:
    """The checkpoint's files (config.json and the data files it names) as a flat zip."""
    snapshot = _read_snapshot(directory, with_optimizer=True)
    for name, expected in snapshot.sha256.items():
        _verify_sha256(name, snapshot.files[name], expected)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in snapshot.files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def load_zip(
    data: bytes,
    *,
    device: str | torch.device = "cpu",
    workdir: str | os.PathLike | None = None,
    with_optimizer: bool = False,
) -> Checkpoint:
    """Load a zipped checkpoint after checking every entry.

    The files are extracted into `workdir` (created if missing, and it must be empty), or
    into a temporary folder that is removed once the checkpoint is in memory.
    """
    with _open_zip(data) as archive:
        plan = _plan_extraction(archive)
        if workdir is not None:
            return _extract_and_load(archive, plan, _empty_workdir(workdir), device, with_optimizer)
        scratch = Path(tempfile.mkdtemp(prefix="minigpt-zip-"))
        try:
            return _extract_and_load(archive, plan, scratch, device, with_optimizer)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _open_zip(data: bytes) -> zipfile.ZipFile:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CheckpointError(f"load_zip expects the zip file's bytes, got {type(data).__name__}.")
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise CheckpointError("the upload is not a zip archive.") from None


def _plan_extraction(archive: zipfile.ZipFile) -> list[tuple[zipfile.ZipInfo, str]]:
    """Each file entry with the flat name it will get, once every entry has passed the checks."""
    infos = archive.infolist()
    if len(infos) > MAX_ZIP_ENTRIES:
        raise CheckpointError(f"the zip holds {len(infos)} entries; a checkpoint has at most {MAX_ZIP_ENTRIES}.")
    for info in infos:
        _check_entry(info)
    files = [i for i in infos if not i.is_dir() and not _is_junk(i.filename)]
    if not files:
        raise CheckpointError("the zip archive is empty.")
    _refuse_torch_save(files)
    _check_sizes(files)
    return list(zip(files, _flat_names(files)))


def _entry_parts(name: str) -> list[str]:
    return [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]


def _check_entry(info: zipfile.ZipInfo) -> None:
    name = info.filename
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        raise CheckpointError(f"zip entry {name!r} has an absolute path; refusing to extract it.")
    if ".." in _entry_parts(name):
        raise CheckpointError(f"zip entry {name!r} points outside the archive folder ('..'); refusing it.")
    if stat.S_ISLNK(info.external_attr >> 16):
        raise CheckpointError(f"zip entry {name!r} is a symbolic link; refusing it.")
    if info.flag_bits & 0x1:
        raise CheckpointError(f"zip entry {name!r} is encrypted; upload an unencrypted zip.")


def _refuse_torch_save(files: list[zipfile.ZipInfo]) -> None:
    """torch.save writes a zip too: <name>/data.pkl beside the tensor storages. Say so, rather
    than complain about its layout."""
    if any(_entry_parts(info.filename)[-1] == "data.pkl" for info in files):
        raise CheckpointError(f"the zip is a torch.save file: {PICKLE_REFUSAL}")


def _is_junk(name: str) -> bool:
    """Folders that macOS's Finder adds to every zip it makes."""
    parts = _entry_parts(name)
    return bool(parts) and (parts[0] == "__MACOSX" or parts[-1] == ".DS_Store")


def _check_sizes(files: list[zipfile.ZipInfo]) -> None:
    """Judge the declared sizes before unpacking anything (extraction caps them again)."""
    for info in files:
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > MAX_UNCOMPRESSED:
            raise CheckpointError(
                f"zip entry {info.filename!r} unpacks to {info.file_size} bytes, more than the "
                f"{MAX_UNCOMPRESSED} allowed per file."
            )
        if info.file_size > _RATIO_FREE_BYTES and ratio > MAX_COMPRESSION_RATIO:
            raise CheckpointError(
                f"zip entry {info.filename!r} expands {ratio:.0f}-fold, "
                f"which looks like a zip bomb; refusing it."
            )
    total = sum(info.file_size for info in files)
    if total > MAX_TOTAL_UNCOMPRESSED:
        raise CheckpointError(f"the zip unpacks to {total} bytes, more than the {MAX_TOTAL_UNCOMPRESSED} allowed.")


def _flat_names(files: list[zipfile.ZipInfo]) -> list[str]:
    """Accept files at the top level or all inside one folder; return their bare names."""
    parts = [_entry_parts(info.filename) for info in files]
    if all(len(p) == 1 for p in parts):
        names = [p[0] for p in parts]
    elif all(len(p) == 2 for p in parts) and len({p[0] for p in parts}) == 1:
        names = [p[1] for p in parts]
    else:
        raise CheckpointError("the zip must hold the checkpoint files at its top level or inside one folder.")
    for name in names:
        if not _ZIP_NAME.fullmatch(name):
            raise CheckpointError(f"zip entry name {name!r} is not a plain file name; refusing it.")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise CheckpointError(f"the zip holds {duplicates[0]!r} more than once.")
    return names


def _empty_workdir(workdir: str | os.PathLike) -> Path:
    path = Path(workdir)
    if path.exists() and not path.is_dir():
        raise CheckpointError(f"workdir {path} is not a folder.")
    path.mkdir(parents=True, exist_ok=True)
    if any(path.iterdir()):
        raise CheckpointError(f"workdir {path} must be empty, so that only the zip's files are loaded.")
    return path


def _extract_and_load(
    archive: zipfile.ZipFile,
    plan: list[tuple[zipfile.ZipInfo, str]],
    target: Path,
    device: str | torch.device,
    with_optimizer: bool,
) -> Checkpoint:
    """Unpack into `target` only, then load; on any failure remove what was unpacked."""
    budget = MAX_TOTAL_UNCOMPRESSED
    written: list[Path] = []
    try:
        for info, name in plan:
            written.append(target / name)  # target is empty and names unique: the file is ours
            budget -= _extract_member(archive, info, target / name, budget)
        try:
            return from_pretrained(target, device=device, with_optimizer=with_optimizer)
        except CheckpointError as error:  # name the zip, not the server folder it was unpacked into
            raise CheckpointError(str(error).replace(str(target), "the zip")) from None
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise


def _extract_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, dest: Path, budget: int) -> int:
    """Stream one entry with a byte cap, so a header that lies about its size cannot explode."""
    limit = min(info.file_size, MAX_UNCOMPRESSED, budget)
    size = 0
    try:
        with archive.open(info) as src, open(dest, "xb") as out:
            while chunk := src.read(_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise CheckpointError(
                        f"zip entry {info.filename!r} unpacks to more than its header declares; "
                        f"refusing it as a possible zip bomb."
                    )
                out.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as error:
        raise CheckpointError(f"zip entry {info.filename!r} is damaged or unsupported ({error}).") from None
    return size
