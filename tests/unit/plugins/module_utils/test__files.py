"""The one atomic writer: readers see the old file or the new one, never a half-written one."""
from __future__ import annotations

import errno
import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils import _files


def test_atomic_write_replaces_whole_file(tmp_path):
    p = str(tmp_path / "f.json")
    _files.atomic_write(p, b"one")
    _files.atomic_write(p, b"two")
    assert open(p, "rb").read() == b"two"
    assert os.listdir(tmp_path) == ["f.json"]


def _disk_full_after(monkeypatch, nbytes):
    """os.write that writes ``nbytes`` once, then fails as a full disk does."""
    real_write = os.write
    state = {"written": False}

    def write(fd, data):
        if state["written"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        state["written"] = True
        return real_write(fd, bytes(data)[:nbytes])

    monkeypatch.setattr(_files.os, "write", write)


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    p = str(tmp_path / "plan.json")
    _files.atomic_write(p, "old")
    _disk_full_after(monkeypatch, 3)
    with pytest.raises(OSError, match="No space"):
        _files.atomic_write(p, b"new content that does not fit")
    monkeypatch.undo()
    assert open(p, "rb").read() == b"old"
    assert os.listdir(tmp_path) == ["plan.json"]


def test_failed_first_write_leaves_nothing_under_the_final_name(tmp_path, monkeypatch):
    p = str(tmp_path / "sub" / "MANIFEST.json")
    _disk_full_after(monkeypatch, 5)
    with pytest.raises(OSError, match="No space"):
        _files.atomic_write(p, b"0123456789")
    monkeypatch.undo()
    assert os.listdir(tmp_path / "sub") == []


def test_read_bytes_is_none_for_a_missing_file(tmp_path):
    assert _files.read_bytes(str(tmp_path / "nope")) is None
    (tmp_path / "x").write_bytes(b"\x00\x01")
    assert _files.read_bytes(str(tmp_path / "x")) == b"\x00\x01"
