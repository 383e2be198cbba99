# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""File I/O of weight staging: copy while hashing, writeback and page release, the stage lock.

Everything that touches bytes or the destination's lock file lives here, so the stager only
decides *what* to move. The journal and the manifest are in ``_weights/_manifest.py``; the one atomic
writer is ``_files.atomic_write``.

Stdlib only (ctypes for ``sync_file_range``, through ``_pagecache_sys.libc``).
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import json
import mmap
import os
import socket
import threading
import time
from typing import Any, NamedTuple

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import read_regular
from ansible_collections.lanekit.serving.plugins.module_utils._weights._pagecache_sys import MIB, libc, release_pages

__all__ = ["Digest", "StageLock", "copy_and_hash", "hash_file", "os_error_sentence", "same_device",
           "start_writeback", "unlink_quiet"]

_SYNC_FILE_RANGE_WRITE = 2
_sync_file_range: Any = None
_sync_lock = threading.Lock()


def _get_sync_file_range() -> Any:
    """The libc ``sync_file_range`` function, or False where it cannot be had (not Linux)."""
    global _sync_file_range
    with _sync_lock:
        if _sync_file_range is None:
            try:
                fn = libc().sync_file_range
                fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
                fn.restype = ctypes.c_int
                _sync_file_range = fn
            except (OSError, AttributeError):
                _sync_file_range = False
    return _sync_file_range


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing back a range now (sync_file_range WRITE); best effort.

    Starting writeback while the copy goes on keeps the final fsync short and keeps the dirty
    page count of the staging host low.
    """
    fn = _get_sync_file_range()
    if fn:
        fn(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


def git_blob_sha1_prefix(size: int) -> bytes:
    """The header git hashes before a blob's bytes (the Hub's blob id of a non-LFS file)."""
    return f"blob {size}\x00".encode("ascii")


class Digest(NamedTuple):
    """What reading a file once tells: its sha256, its git blob sha1 (when asked) and its size."""

    sha256: str
    git_sha1: str | None
    size: int


def _pwrite_all(fd: int, view: memoryview, offset: int) -> None:
    """Write all of ``view`` at ``offset``; explicit offsets make a retry of the same chunk exact."""
    while view:
        n = os.pwrite(fd, view, offset)
        view = view[n:]
        offset += n


# O_DIRECT wants the buffer, the length and the file offset aligned to the device's logical block
# (512 or 4096 bytes): the buffer is an mmap (page-aligned), blocks are a multiple of the page.
_O_DIRECT = getattr(os, "O_DIRECT", 0)
_DIRECT_ALIGN = 4096


def _open_dest(dst: str, direct: bool) -> tuple[int, bool]:
    """Create ``dst`` (O_EXCL) for writing, with O_DIRECT when asked and the filesystem takes it;
    returns (fd, whether O_DIRECT is on)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    if direct and _O_DIRECT:
        try:
            return os.open(dst, flags | _O_DIRECT, 0o644), True
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            # a filesystem without O_DIRECT (some FUSE, old tmpfs) may create the file before it refuses
            unlink_quiet(dst)
    return os.open(dst, flags, 0o644), False


def _drop_direct(fd: int) -> bool:
    """Turn O_DIRECT off on ``fd`` (for an unaligned tail, or a device that refuses the alignment)."""
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_O_DIRECT)
    return False


def _advise_sequential(fd: int) -> None:
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    except OSError:
        pass


def _open_source(src: str | int) -> int:
    """An fd to read: ``src`` itself when the source opened it already (a local source opens its
    files component by component and checks them, ``LocalSource.open_fd``; the fd is ours to
    close), else the path, not followed if it became a link."""
    return src if isinstance(src, int) else os.open(src, os.O_RDONLY | os.O_NOFOLLOW)


def copy_and_hash(src: str | int, dst: str, block_size: int = 16 * MIB, want_git_sha1: bool = False,
                  sync: bool = True, release: bool = True, abort: threading.Event | None = None,
                  direct: bool = True) -> Digest:
    """Copy ``src`` (a path, or an open fd this call closes) to the new file ``dst`` (O_EXCL),
    hashing the bytes as they are written.

    ``dst`` is fsynced before returning. With ``release`` the written (and read) pages of these
    two files are released from the page cache as the copy goes, so staging does not flood the
    staging host's memory.

    With ``direct`` and ``sync`` the copy is written with O_DIRECT where the filesystem takes it:
    the bytes go from the buffer that was hashed to the device, with no second copy into the page
    cache, no dirty pages to write back and release, and about a fifth of the kernel time of the
    buffered write (issue #28: verified staging at the device's speed). The source is read through
    the cache, so its readahead keeps the device busy while the block is hashed and written. The
    fsync stays: it makes the file's size and extents durable. An unaligned tail, or a device that
    refuses the alignment, is written through the cache.
    """
    fin = _open_source(src)
    st = os.fstat(fin)
    try:
        fout, direct = _open_dest(dst, direct and sync)
    except BaseException:
        os.close(fin)
        raise
    h = hashlib.sha256()
    h1 = hashlib.sha1(git_blob_sha1_prefix(st.st_size)) if want_git_sha1 else None
    total = 0
    flushed = 0
    window = max(block_size * 4, 64 * MIB)
    try:
        _advise_sequential(fin)
        buf = mmap.mmap(-1, block_size) if direct else bytearray(block_size)
        mv = memoryview(buf)
        while True:
            if abort is not None and abort.is_set():
                raise LanekitError(f"Staging of {src} was aborted because another file failed.")
            n = os.readv(fin, [buf])
            if n == 0:
                break
            chunk = mv[:n]
            h.update(chunk)
            if h1 is not None:
                h1.update(chunk)
            if direct and (n % _DIRECT_ALIGN or total % _DIRECT_ALIGN):
                direct = _drop_direct(fout)
            try:
                _pwrite_all(fout, chunk, total)
            except OSError as exc:
                if not direct or exc.errno != errno.EINVAL:
                    raise
                direct = _drop_direct(fout)
                _pwrite_all(fout, chunk, total)
            total += n
            if sync and total - flushed >= window:
                start_writeback(fout, flushed, total - flushed)
                if release and flushed >= window:
                    # pages of the window before last are written back by now
                    release_pages(fout, 0, flushed - window)
                    release_pages(fin, 0, flushed - window)
                flushed = total
        os.fchmod(fout, 0o644)
        if sync:
            os.fsync(fout)
        if release:
            release_pages(fout)
            release_pages(fin)
    finally:
        os.close(fin)
        os.close(fout)
    return Digest(h.hexdigest(), h1.hexdigest() if h1 is not None else None, total)


def hash_file(path: str | int, block_size: int = 16 * MIB, want_git_sha1: bool = False,
              release: bool = False, abort: threading.Event | None = None) -> Digest:
    """sha256 (and git blob sha1) of a file (a path, or an open fd this call closes), read in large
    sequential blocks."""
    fd = path if isinstance(path, int) else os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        _advise_sequential(fd)
        h = hashlib.sha256()
        h1 = hashlib.sha1(git_blob_sha1_prefix(size)) if want_git_sha1 else None
        buf = bytearray(block_size)
        mv = memoryview(buf)
        total = 0
        while True:
            if abort is not None and abort.is_set():
                raise LanekitError(f"Hashing of {path} was aborted because another file failed.")
            n = os.readv(fd, [buf])
            if n == 0:
                break
            h.update(mv[:n])
            if h1 is not None:
                h1.update(mv[:n])
            total += n
        if release:
            release_pages(fd)
    finally:
        os.close(fd)
    return Digest(h.hexdigest(), h1.hexdigest() if h1 is not None else None, total)


def same_device(a: str, b: str) -> bool:
    """True when both paths exist on one filesystem (a rename between them cannot fail with EXDEV)."""
    try:
        return os.stat(a).st_dev == os.stat(b).st_dev
    except OSError:
        return False


def unlink_quiet(path: str) -> None:
    try:
        os.unlink(path)
    except (FileNotFoundError, IsADirectoryError):
        pass


def os_error_sentence(exc: OSError, rel: str, dest: str) -> str:
    """One sentence for an OSError met while writing ``rel`` under ``dest``."""
    if exc.errno == errno.ENOSPC:
        return f"The destination {dest} ran out of space while writing {rel}."
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (f"Cannot write {rel} under {dest} ({exc.strerror}); the staging host needs write access "
                "to the export.")
    return f"Staging {rel} into {dest} failed: {exc.strerror or exc} ({exc.filename or rel})."


# ---------------------------------------------------------------------------------------------
# lock


class StageLock:
    """An O_EXCL lock file in the destination (flock is not trustworthy on NFS)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.held = False

    def acquire(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        me = {"host": socket.gethostname(), "pid": os.getpid(), "started": int(time.time())}
        for _unused in range(2):
            try:
                # 0600: who holds the lock (host, pid) is for the staging runs, not for every reader of
                # the export (a pid made the old temporary names guessable)
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except FileExistsError:
                holder = self._read() or {}
                if holder.get("host") == me["host"] and not _pid_alive(holder.get("pid")):
                    unlink_quiet(self.path)  # stale: its process is gone
                    continue
                since = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(holder.get("started", 0)))
                raise LanekitError(
                    f"Another staging run holds {self.path} (host {holder.get('host', '?')}, pid "
                    f"{holder.get('pid', '?')}, since {since}). Wait for it to finish; if it is dead on "
                    "another host, remove the lock file.") from None
            with os.fdopen(fd, "w") as fh:
                json.dump(me, fh)
            self.held = True
            return
        raise LanekitError(f"Could not take the staging lock {self.path}.")

    def _read(self) -> dict[str, Any] | None:
        try:
            raw = read_regular(self.path, 64 << 10, "The staging lock")
            doc = json.loads(raw) if raw is not None else None
        except (OSError, ValueError, LanekitError):
            return None
        return doc if isinstance(doc, dict) else None

    def release(self) -> None:
        if self.held:
            unlink_quiet(self.path)
            self.held = False


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
