"""Stage file I/O: copy while hashing, and the lock that keeps two staging runs apart."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import socket

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_io import (
    StageLock,
    copy_and_hash,
    hash_file,
)


def test_lock_refuses_a_live_holder_and_takes_a_stale_one(tmp_path):
    lock = StageLock(str(tmp_path / ".lanekit" / "lock"))
    os.makedirs(str(tmp_path / ".lanekit"))
    with open(lock.path, "w") as fh:
        json.dump({"host": socket.gethostname(), "pid": os.getppid(), "started": 0}, fh)
    with pytest.raises(LanekitError, match="Another staging run"):
        lock.acquire()
    with open(lock.path, "w") as fh:
        json.dump({"host": socket.gethostname(), "pid": 2 ** 22 + 7, "started": 0}, fh)
    lock.acquire()
    assert lock.held
    lock.release()
    assert not os.path.exists(lock.path)


def test_copy_and_hash_is_exclusive_and_fsyncs(tmp_path):
    src = tmp_path / "a"
    src.write_bytes(os.urandom(3 << 20))
    d = copy_and_hash(str(src), str(tmp_path / "b"), block_size=1 << 20, want_git_sha1=True)
    assert d.sha256 == hashlib.sha256(src.read_bytes()).hexdigest()
    data = src.read_bytes()
    assert d.git_sha1 == hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()
    with pytest.raises(FileExistsError):
        copy_and_hash(str(src), str(tmp_path / "b"))


def test_hash_file_matches_the_digest_of_the_copy(tmp_path):
    src = tmp_path / "a"
    src.write_bytes(os.urandom((1 << 20) + 3))
    copied = copy_and_hash(str(src), str(tmp_path / "b"), block_size=1 << 16, sync=False, release=False)
    again = hash_file(str(tmp_path / "b"), block_size=1 << 18, want_git_sha1=True)
    assert (again.sha256, again.size) == (copied.sha256, copied.size) == (
        hashlib.sha256(src.read_bytes()).hexdigest(), (1 << 20) + 3)
    assert copied.git_sha1 is None and again.git_sha1 is not None


def test_copy_and_hash_does_not_follow_a_link_swapped_in_for_the_source(tmp_path):
    (tmp_path / "secret").write_text("root-only")
    os.symlink(tmp_path / "secret", tmp_path / "a")  # the checked real file, replaced by a link afterwards
    with pytest.raises(OSError):
        copy_and_hash(str(tmp_path / "a"), str(tmp_path / "b"))
    assert not (tmp_path / "b").exists()


class _Opens:
    """Records the flags every os.open of ``dst`` was given; refuses O_DIRECT when ``refuse``
    (after creating the file, as some filesystems do)."""

    def __init__(self, monkeypatch, dst, refuse=False):
        self.dst, self.refuse, self.flags = dst, refuse, []
        real = os.open

        def spy(path, flags, *args, **kw):
            if str(path) == self.dst:
                self.flags.append(flags)
                if self.refuse and flags & getattr(os, "O_DIRECT", 0):
                    os.close(real(path, flags & ~os.O_DIRECT, *args, **kw))
                    raise OSError(errno.EINVAL, "Invalid argument")
            return real(path, flags, *args, **kw)

        monkeypatch.setattr(os, "open", spy)


needs_o_direct = pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="O_DIRECT is Linux-only")


@needs_o_direct
def test_copy_writes_with_o_direct_and_the_unaligned_tail_through_the_cache(tmp_path, monkeypatch):
    """Issue #28: the durable copy goes straight from the hashed buffer to the device; the tail of a
    size that is not a multiple of the block is written too, byte for byte."""
    src, dst = tmp_path / "a", str(tmp_path / "b")
    src.write_bytes(os.urandom((3 << 20) + 123))
    opens = _Opens(monkeypatch, dst)
    d = copy_and_hash(str(src), dst, block_size=1 << 20)
    assert opens.flags[0] & os.O_DIRECT
    assert open(dst, "rb").read() == src.read_bytes()
    assert (d.size, d.sha256) == ((3 << 20) + 123, hashlib.sha256(src.read_bytes()).hexdigest())


@needs_o_direct
def test_copy_falls_back_to_the_cache_where_o_direct_is_refused(tmp_path, monkeypatch):
    src, dst = tmp_path / "a", str(tmp_path / "b")
    src.write_bytes(os.urandom((2 << 20) + 5))
    opens = _Opens(monkeypatch, dst, refuse=True)
    d = copy_and_hash(str(src), dst, block_size=1 << 20)
    assert len(opens.flags) == 2 and not opens.flags[1] & os.O_DIRECT
    assert open(dst, "rb").read() == src.read_bytes() and d.size == (2 << 20) + 5


@needs_o_direct
def test_copy_rewrites_a_block_the_device_refused_for_alignment(tmp_path, monkeypatch):
    """A device with a larger logical block refuses an O_DIRECT write with EINVAL: that block and
    the rest go through the cache, at the same offsets (nothing doubled, nothing lost)."""
    src, dst = tmp_path / "a", str(tmp_path / "b")
    src.write_bytes(os.urandom(4 << 20))
    real = os.pwrite
    calls = []

    def pwrite(fd, data, offset):
        calls.append(offset)
        if len(calls) == 2:
            real(fd, bytes(data[:4096]), offset)  # part of the block landed before the refusal
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    copy_and_hash(str(src), dst, block_size=1 << 20)
    assert open(dst, "rb").read() == src.read_bytes()
    assert calls[:3] == [0, 1 << 20, 1 << 20]


def test_copy_without_fsync_stays_buffered(tmp_path, monkeypatch):
    src, dst = tmp_path / "a", str(tmp_path / "b")
    src.write_bytes(os.urandom(1 << 20))
    opens = _Opens(monkeypatch, dst)
    copy_and_hash(str(src), dst, block_size=1 << 20, sync=False)
    assert not opens.flags[0] & getattr(os, "O_DIRECT", 0)
