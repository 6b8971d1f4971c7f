"""minigpt/archive.py: checkpoints as zips, made and read in memory, and the zips it refuses.

    pytest tests/minigpt/test_archive.py
"""
from __future__ import annotations

import builtins
import io
import os
import pickle
import struct
import warnings
import zipfile
from pathlib import Path

import pytest
import torch

from helpers.checkpoints import (TOKENIZER, bomb_zip, checkpoint_model, folder_files, logits_of, make_zip, saved,
                                 saved_with_optimizer)
from minigpt import CheckpointError, checkpoint_zip, load_zip
from minigpt.archive import folder_zip
from minigpt.header import CONFIG_NAME, WEIGHTS_NAME


def test_zip_round_trip_gives_identical_checkpoint(tmp_path):
    path, model = saved_with_optimizer(tmp_path, meta={"step": 1})
    data = folder_zip(path)
    assert sorted(zipfile.ZipFile(io.BytesIO(data)).namelist()) == sorted(p.name for p in path.iterdir())
    ckpt = load_zip(data, with_optimizer=True)
    assert torch.equal(logits_of(ckpt.model), logits_of(model))
    assert ckpt.tokenizer == TOKENIZER and ckpt.meta == {"step": 1}
    assert ckpt.optimizer_state is not None


def test_a_zip_made_in_memory_holds_what_a_saved_folder_holds(tmp_path):
    model = checkpoint_model()
    data = checkpoint_zip(model, TOKENIZER, meta={"step": 3})
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert sorted(archive.namelist()) == [CONFIG_NAME, WEIGHTS_NAME]
    assert archive.read(WEIGHTS_NAME) == (saved(tmp_path, meta={"step": 3}) / WEIGHTS_NAME).read_bytes()
    assert torch.equal(logits_of(load_zip(data).model), logits_of(model))


def test_zip_with_files_in_one_folder_loads(tmp_path):
    entries = {f"my-ckpt/{name}": data for name, data in folder_files(saved(tmp_path)).items()}
    entries["__MACOSX/my-ckpt/._config.json"] = b"finder junk"
    ckpt = load_zip(make_zip(entries))
    assert torch.equal(logits_of(ckpt.model), logits_of(checkpoint_model()))


def test_a_zip_is_read_in_memory_without_touching_the_disk(tmp_path, monkeypatch):
    data = folder_zip(saved(tmp_path))
    opened = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    monkeypatch.setattr(os, "mkdir", lambda *a, **k: opened.append(a[0]))
    load_zip(data)
    assert opened == []


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


def _valid_entries(tmp_path: Path) -> dict[str, bytes]:
    return folder_files(saved(tmp_path))


def _one_name_twice_zip(tmp_path):
    """A whole checkpoint, and its config.json a second time: which of the two would a reader take?"""
    entries = _valid_entries(tmp_path)
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w") as archive:
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name, and writes it
        for name, data in entries.items():
            archive.writestr(name, data)
        archive.writestr(CONFIG_NAME, entries[CONFIG_NAME])
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
    "zip bomb by size": (bomb_zip, "more than the 67108864 allowed"),
    "zip bomb by ratio": (lambda tmp_path: bomb_zip(tmp_path, 10 * 2**20), "zip bomb"),
    "lying size header": (_lying_header_zip, "damaged|zip bomb"),
    "one name twice": (_one_name_twice_zip, "more than once"),
    "no checkpoint inside": (lambda tmp_path: make_zip({"notes.txt": b"hello"}), "no config.json"),
    "damaged checkpoint inside": (
        lambda tmp_path: make_zip({**_valid_entries(tmp_path), CONFIG_NAME: b"{oops"}), "not valid UTF-8 JSON"),
}


@pytest.mark.parametrize("build, match", BAD_ZIPS.values(), ids=BAD_ZIPS.keys())
def test_bad_zip_is_refused_and_nothing_is_written(tmp_path, build, match):
    data = build(tmp_path)
    before = sorted(p.name for p in tmp_path.parent.iterdir())
    with pytest.raises(CheckpointError, match=match):
        load_zip(data)
    assert not (tmp_path / "evil").exists() and not (tmp_path / "abs-evil").exists()
    assert sorted(p.name for p in tmp_path.parent.iterdir()) == before


def _stored_zip(entries: dict[str, bytes]) -> bytes:
    """Entries stored as they are: incompressible data, so no ratio check can stand in for a size check."""
    return make_zip(entries, zipfile.ZIP_STORED)


def test_the_files_of_a_zip_together_may_not_unpack_past_the_total_limit(monkeypatch):
    """Three entries, each within the per-file limit, that together pass the total: refused from
    their declared sizes, before any entry is unpacked. The limits are made small here so that the
    zip is too; the arithmetic is the same at 64 and 128 MB."""
    from minigpt import archive

    per_file, total = 2 * 2**20, 5 * 2**20
    monkeypatch.setattr(archive, "MAX_UNCOMPRESSED", per_file)
    monkeypatch.setattr(archive, "MAX_TOTAL_UNCOMPRESSED", total)
    size = per_file - 1  # each file fits on its own; three of them need 6 MB - 3 bytes > 5 MB
    data = _stored_zip({name: os.urandom(size) for name in ("a.bin", "b.bin", "c.bin")})
    opened = []
    real_open = zipfile.ZipFile.open
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda self, *a, **k: opened.append(a[0]) or real_open(self, *a, **k))
    with pytest.raises(CheckpointError, match=f"unpacks to {3 * size} bytes, more than the {total} allowed"):
        load_zip(data)
    assert opened == []  # judged before a byte was unpacked
    two = _stored_zip({name: os.urandom(size) for name in ("a.bin", "b.bin")})  # 4 MB in all: within the total
    with pytest.raises(CheckpointError, match="no config.json, so it is not a MiniGPT checkpoint"):
        load_zip(two)  # past the size checks, refused for what it holds: random bytes, no pickle


def test_a_zip_at_the_real_limits_whose_files_fit_one_by_one_but_not_together_is_refused():
    """The limits as shipped, written out by hand: 64 MB a file, 128 MB in all. Three stored files
    of 43 MB each fit the first and pass the second (129 MB), so only the total refuses the zip; a
    total cap set 1000 times too large would let it through to be unpacked. Stored zeros compress
    1:1, so no ratio check can stand in for the size check."""
    per_file, total = 64 * 2**20, 128 * 2**20
    size = 43 * 2**20
    assert size < per_file and 3 * size > total and 2 * size < total
    data = _stored_zip(dict.fromkeys(("a.bin", "b.bin", "c.bin"), bytes(size)))
    with pytest.raises(CheckpointError, match=f"unpacks to {3 * size} bytes, more than the {total} allowed"):
        load_zip(data)


def test_a_zip_of_other_files_is_not_a_minigpt_checkpoint_and_a_pickle_inside_is_named_as_one(tmp_path):
    """Issue: a random .zip was refused as "holds only pickle files" when it held none (its files
    ended in .bin). A pickle is known by its bytes, not its name."""
    with pytest.raises(CheckpointError, match="no config.json, so it is not a MiniGPT checkpoint"):
        load_zip(_stored_zip({"weights.bin": os.urandom(2048), "notes.txt": b"hello"}))
    buffer = io.BytesIO()
    torch.save({"w": torch.zeros(3)}, buffer)
    with pytest.raises(CheckpointError, match="holds only pickle files"):
        load_zip(_stored_zip({"pytorch_model.bin": buffer.getvalue()}))
    with pytest.raises(CheckpointError, match="holds only pickle files"):
        load_zip(_stored_zip({"weights.bin": pickle.dumps({"w": [1.0]}, protocol=4)}))
