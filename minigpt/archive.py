"""Checkpoints as zip files, for the dashboard's download and upload, made and read in memory.

A zip holds a checkpoint folder's files at its top level or inside one folder. Reading one
never touches the disk: entries are unpacked into memory under caps on their number, their
sizes and their compression ratio (a zip bomb expands ~1000-fold; float weights barely
compress), then handed to `checkpoint.load_files`, the same checks a folder gets.
"""
from __future__ import annotations

import io
import os
import re
import stat
import zipfile
import zlib
from typing import Any

import torch

from .checkpoint import Checkpoint, checkpoint_files, checkpoint_folder, from_pretrained, load_files
from .header import CONFIG_NAME, OPTIMIZER_NAME, WEIGHTS_NAME, CheckpointError
from .messages import Message
from .model import MiniGPT
from .tokenizer import CharTokenizer

MAX_ZIP_ENTRIES = 32
MAX_UNCOMPRESSED = 64 * 2**20        # bytes per unpacked file
MAX_TOTAL_UNCOMPRESSED = 128 * 2**20
MAX_COMPRESSION_RATIO = 100
_RATIO_FREE_BYTES = 2**20            # small files such as config.json may compress well
_CHUNK = 2**20


def checkpoint_zip(model: MiniGPT, tokenizer: CharTokenizer, **parts: Any) -> bytes:
    """A checkpoint's files as a zip, straight from memory; `parts` as in `checkpoint_files`."""
    return _zip(checkpoint_files(model, tokenizer, **parts))


def folder_zip(path: str | os.PathLike) -> bytes:
    """A checkpoint folder (or a run folder's newest checkpoint) as a zip, once it loads."""
    folder = checkpoint_folder(path)
    from_pretrained(folder, with_optimizer=True)  # refuse to pack what would not load
    names = [n for n in (CONFIG_NAME, WEIGHTS_NAME, OPTIMIZER_NAME) if (folder / n).is_file()]
    return _zip({n: (folder / n).read_bytes() for n in names})


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def load_zip(data: bytes, *, device: str | torch.device = "cpu", with_optimizer: bool = False) -> Checkpoint:
    """Load a zipped checkpoint from its bytes, after checking every entry."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CheckpointError("load_zip expects the zip file's bytes, got {type}.", type=type(data).__name__)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise CheckpointError("the upload is not a zip archive.") from None
    with archive:
        files = _unpack(archive)
    return load_files(files, device=device, with_optimizer=with_optimizer, source=Message("the zip"))


def _unpack(archive: zipfile.ZipFile) -> dict[str, bytes]:
    """Each file entry's bytes by its bare name, once every entry has passed the checks."""
    infos = archive.infolist()
    if len(infos) > MAX_ZIP_ENTRIES:
        raise CheckpointError("the zip holds {entries} entries; a checkpoint has at most {limit}.",
                              entries=len(infos), limit=MAX_ZIP_ENTRIES)
    for info in infos:
        _check_entry(info)
    entries = [i for i in infos if not i.is_dir() and not _is_junk(i.filename)]
    if not entries:
        raise CheckpointError("the zip archive is empty.")
    if any(_parts(i.filename)[-1] == "data.pkl" for i in entries):  # torch.save writes a zip too
        raise CheckpointError("the zip is a torch.save file: pickle-based checkpoints (torch.save) are refused: "
                              "they can run code when loaded; convert to safetensors.")
    _check_sizes(entries)
    names = _bare_names(entries)
    budget, files = MAX_TOTAL_UNCOMPRESSED, {}
    for info, name in zip(entries, names):
        files[name] = _read(archive, info, budget)
        budget -= len(files[name])
    return files


def _parts(name: str) -> list[str]:
    return [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]


def _check_entry(info: zipfile.ZipInfo) -> None:
    """Nothing is extracted, but an entry no archive tool could place inside its folder says the
    zip was made to attack, not to carry a checkpoint."""
    name = info.filename
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        raise CheckpointError("zip entry {name!r} has an absolute path; refusing the zip.", name=name)
    if ".." in _parts(name):
        raise CheckpointError("zip entry {name!r} points outside the archive folder ('..'); refusing the zip.",
                              name=name)
    if stat.S_ISLNK(info.external_attr >> 16):
        raise CheckpointError("zip entry {name!r} is a symbolic link; refusing the zip.", name=name)
    if info.flag_bits & 0x1:
        raise CheckpointError("zip entry {name!r} is encrypted; upload an unencrypted zip.", name=name)


def _is_junk(name: str) -> bool:
    """Folders that macOS's Finder adds to every zip it makes."""
    parts = _parts(name)
    return bool(parts) and (parts[0] == "__MACOSX" or parts[-1] == ".DS_Store")


def _check_sizes(entries: list[zipfile.ZipInfo]) -> None:
    """Judge the declared sizes before unpacking anything (reading caps them again)."""
    for info in entries:
        if info.file_size > MAX_UNCOMPRESSED:
            raise CheckpointError("zip entry {name!r} unpacks to {size} bytes, more than the {limit} allowed per "
                                  "file.", name=info.filename, size=info.file_size, limit=MAX_UNCOMPRESSED)
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > _RATIO_FREE_BYTES and ratio > MAX_COMPRESSION_RATIO:
            raise CheckpointError("zip entry {name!r} expands {ratio:.0f}-fold, which looks like a zip bomb; "
                                  "refusing it.", name=info.filename, ratio=ratio)
    total = sum(info.file_size for info in entries)
    if total > MAX_TOTAL_UNCOMPRESSED:
        raise CheckpointError("the zip unpacks to {total} bytes, more than the {limit} allowed.",
                              total=total, limit=MAX_TOTAL_UNCOMPRESSED)


def _bare_names(entries: list[zipfile.ZipInfo]) -> list[str]:
    """Accept files at the top level or all inside one folder; return their bare names."""
    parts = [_parts(info.filename) for info in entries]
    if all(len(p) == 1 for p in parts):
        names = [p[0] for p in parts]
    elif all(len(p) == 2 for p in parts) and len({p[0] for p in parts}) == 1:
        names = [p[1] for p in parts]
    else:
        raise CheckpointError("the zip must hold the checkpoint files at its top level or inside one folder.")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise CheckpointError("the zip holds {name!r} more than once.", name=duplicates[0])
    return names


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int) -> bytes:
    """One entry's bytes, read with a cap, so a header that lies about its size cannot explode."""
    limit = min(info.file_size, MAX_UNCOMPRESSED, budget)
    chunks, size = [], 0
    try:
        with archive.open(info) as src:
            while chunk := src.read(_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise CheckpointError("zip entry {name!r} unpacks to more than its header declares; "
                                          "refusing it as a possible zip bomb.", name=info.filename)
                chunks.append(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as error:
        raise CheckpointError("zip entry {name!r} is damaged or unsupported ({error}).", name=info.filename,
                              error=error) from None
    return b"".join(chunks)
