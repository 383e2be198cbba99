# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Durable file writes: the one atomic writer every part of the collection uses.

A reader (a node, a person, a later run) sees either the old file or the new one under its
final name, never a half-written one: write a temporary name in the same directory, fsync,
rename, fsync the directory.
"""
from __future__ import annotations

import os


def fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes | str, mode: int = 0o644) -> None:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` through a temp name in the same directory, fsync, rename."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    fsync_dir(d)
