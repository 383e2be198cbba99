"""Stage file I/O: copy while hashing, and the lock that keeps two staging runs apart."""
from __future__ import annotations

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
