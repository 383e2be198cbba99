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


# Issue 38, item 1: whoever can write a directory lanekit writes into as root (a model directory on an
# export that another node mounts) must not be able to send that write anywhere else.

def _plant_links(directory, name, target, pids):
    """Links where a writer that names its temporary file after a pid would create it."""
    for pid in pids:
        os.symlink(target, os.path.join(directory, f".{name}.tmp-{pid}"))


def test_a_temporary_name_planted_as_a_link_is_never_written_through(tmp_path):
    export = tmp_path / "model"
    export.mkdir()
    outside = tmp_path / "outside" / "sourced-by-a-shell"
    outside.parent.mkdir()
    _plant_links(str(export), "SHA256SUMS", str(outside), [os.getpid()] + list(range(2, 400)))
    _files.atomic_write(str(export / "SHA256SUMS"), b"abc  $(touch pwned).safetensors\n")
    assert not outside.exists(), "root's write followed a link planted under the temporary name"
    final = export / "SHA256SUMS"
    assert not final.is_symlink() and final.read_bytes() == b"abc  $(touch pwned).safetensors\n"


def test_the_temporary_name_says_nothing_about_the_writer(tmp_path, monkeypatch):
    created = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *, dir_fd=None):
        if flags & os.O_CREAT:
            created.append((os.path.basename(path), flags))
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(_files.os, "open", spy)
    _files.atomic_write(str(tmp_path / "MANIFEST.json"), b"{}")
    monkeypatch.undo()
    [(name, flags)] = created
    assert str(os.getpid()) not in name
    assert flags & os.O_EXCL and flags & os.O_NOFOLLOW


def test_a_link_planted_under_the_final_name_is_replaced_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"keep")
    (tmp_path / "d").mkdir()
    os.symlink(str(target), str(tmp_path / "d" / "MANIFEST.json"))
    _files.atomic_write(str(tmp_path / "d" / "MANIFEST.json"), b"new")
    assert target.read_bytes() == b"keep"
    assert not (tmp_path / "d" / "MANIFEST.json").is_symlink()


def test_inside_a_shared_tree_a_directory_swapped_for_a_link_stops_the_write(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    os.symlink(str(elsewhere), str(model / ".lanekit"))
    with pytest.raises(OSError) as err:
        _files.atomic_write(str(model / ".lanekit" / "journal.jsonl"), b"{}\n", inside=str(model))
    assert err.value.errno in (errno.ELOOP, errno.ENOTDIR)
    assert os.listdir(elsewhere) == []


def test_inside_a_shared_tree_missing_directories_are_made_and_the_file_written(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    _files.atomic_write(str(model / ".lanekit" / "journal.jsonl"), b"{}\n", inside=str(model))
    assert (model / ".lanekit" / "journal.jsonl").read_bytes() == b"{}\n"
    with pytest.raises(_files.LanekitError, match="not a file inside"):
        _files.atomic_write(str(tmp_path / "other"), b"x", inside=str(model))


# Issue 38, item 7: a file another node can replace is read as a regular file of bounded size.

def test_reading_a_shared_file_never_follows_a_link_to_a_device(tmp_path):
    os.symlink("/dev/zero", str(tmp_path / "MANIFEST.json"))
    with pytest.raises(_files.LanekitError, match="MANIFEST.json is a symbolic link"):
        _files.read_regular(str(tmp_path / "MANIFEST.json"), 1 << 20, "The weights manifest")
    assert not _files.holds_exactly(str(tmp_path / "MANIFEST.json"), b"")


def test_reading_a_shared_file_stops_at_its_bound_and_refuses_a_fifo(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * 5000)
    with pytest.raises(_files.LanekitError, match="larger than 4096 bytes"):
        _files.read_regular(str(big), 4096, "The staging journal")
    assert _files.read_regular(str(big), 5000, "The staging journal") == b"x" * 5000
    os.mkfifo(str(tmp_path / "fifo"))
    with pytest.raises(_files.LanekitError, match="not a regular file"):
        _files.read_regular(str(tmp_path / "fifo"), 4096, "The safetensors index")
    assert _files.read_regular(str(tmp_path / "absent"), 10, "x") is None
