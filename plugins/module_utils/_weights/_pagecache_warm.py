# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Bounded warming of weight files into the page cache, and explicit eviction.

One job: the loop. Warming is parallel large sequential reads (``sendfile`` to /dev/null, or
``pread`` into a reused buffer), ordered, skipping ranges that are already resident, and bounded
by a free-memory floor read from ``/proc/meminfo`` before every block: on unified-memory hosts
(GB10) page cache is memory the GPU does not see as free. Eviction is
``posix_fadvise(DONTNEED)`` on the named files only. The floor and the order come from
``_pagecache_budget``; the syscalls and meminfo from ``_pagecache_sys``.

Stdlib only.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable

from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache_sys as pcsys
from ansible_collections.lanekit.serving.plugins.module_utils._weights._pagecache_sys import MIB


class WarmResult:
    """What a warm did: bytes read and skipped, time, why it stopped, the lowest free memory seen."""

    def __init__(self) -> None:
        self.bytes_read = 0
        self.bytes_skipped_resident = 0
        self.seconds = 0.0
        self.limited_by = "done"
        self.min_mem_free: int | None = None
        self.errors: list[str] = []


def warm_files(files: Iterable[tuple[str, int]], threads: int = 4, block_size: int = 16 * MIB,
               floor_bytes: int = 0, budget_bytes: int | None = None, max_seconds: float | None = None,
               segment_bytes: int = 256 * MIB, meminfo: Callable[[], dict[str, int]] | None = None,
               skip_resident: bool = True, use_sendfile: bool = True, free_key: str = "MemFree") -> WarmResult:
    """Read ``files`` ([(path, size)] in priority order) into the page cache.

    Work is split into segments taken in order by ``threads`` workers; each segment is read
    sequentially in ``block_size`` pieces, with ``sendfile`` to /dev/null (the kernel reads the
    pages into the page cache and copies nothing to user space), or ``pread`` into a reused
    buffer where sendfile is refused. Before each block the worker
    checks ``free - threads*block_size >= floor_bytes`` (free is the ``free_key`` line of
    /proc/meminfo: MemFree on unified memory, MemAvailable otherwise) and the byte budget, and stops
    everyone when either would be crossed (``limited_by='budget'``) or when ``max_seconds`` is
    over (``'time'``). With cachestat available a block already resident is skipped.
    """
    res = WarmResult()
    # Looked up at call time, so a caller (or a test) that replaces pcsys.read_meminfo is heard.
    meminfo = meminfo or pcsys.read_meminfo
    segs = []
    for path, size in files:
        off = 0
        while off < size:
            n = min(segment_bytes, size - off)
            segs.append((path, off, n))
            off += n
    lock = threading.Lock()
    stop = threading.Event()
    state = {"next": 0, "new": 0}
    t0 = time.monotonic()
    margin = threads * block_size

    def limit(reason: str) -> None:
        with lock:
            if res.limited_by == "done":
                res.limited_by = reason
        stop.set()

    def allowed(nbytes: int) -> bool:
        if max_seconds is not None and time.monotonic() - t0 > max_seconds:
            limit("time")
            return False
        mi = meminfo()
        free = mi.get(free_key, 0)
        with lock:
            if res.min_mem_free is None or free < res.min_mem_free:
                res.min_mem_free = free
            if budget_bytes is not None and state["new"] + nbytes > budget_bytes:
                over = True
            else:
                over = False
                state["new"] += nbytes
        if over or free - margin - nbytes < floor_bytes:
            if not over:
                with lock:
                    state["new"] -= nbytes
            limit("budget")
            return False
        return True

    def worker() -> None:
        buf = bytearray(block_size)
        fds: dict[str, int] = {}
        try:
            null_fd = os.open(os.devnull, os.O_WRONLY) if use_sendfile else None
        except OSError:
            null_fd = None
        psize = pcsys.page_size()
        use_cs = skip_resident and pcsys.cachestat_nr() is not None
        try:
            while not stop.is_set():
                with lock:
                    i = state["next"]
                    if i >= len(segs):
                        return
                    state["next"] = i + 1
                path, off, n = segs[i]
                fd = fds.get(path)
                if fd is None:
                    try:
                        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOATIME", 0))
                    except PermissionError:
                        fd = os.open(path, os.O_RDONLY)
                    try:
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
                    except OSError:
                        pass
                    fds[path] = fd
                end = off + n
                pos = off
                while pos < end and not stop.is_set():
                    ln = min(block_size, end - pos)
                    new = ln
                    if use_cs:
                        try:
                            cached = pcsys.cachestat(fd, pos, ln)[0]
                            new = max(0, ln - cached * psize)
                        except OSError:
                            use_cs = False
                    if use_cs and new == 0:
                        with lock:
                            res.bytes_skipped_resident += ln
                        pos += ln
                        continue
                    if not allowed(new):
                        return
                    got = None
                    if null_fd is not None:
                        try:
                            # zero-copy: the pages land in the page cache, nothing is copied to us
                            got = os.sendfile(null_fd, fd, pos, ln)
                        except OSError:
                            got = None
                            os.close(null_fd)
                            null_fd = None
                    if got is None:
                        got = os.preadv(fd, [memoryview(buf)[:ln]], pos)
                    with lock:
                        res.bytes_read += got
                    if got <= 0:
                        break
                    pos += got
        except OSError as exc:
            with lock:
                res.errors.append(f"{exc.filename or 'read'}: {exc.strerror or exc}")
            stop.set()
        finally:
            for fd in fds.values():
                os.close(fd)
            if null_fd is not None:
                os.close(null_fd)

    ths = [threading.Thread(target=worker, daemon=True) for _slot in range(max(1, threads))]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    res.seconds = time.monotonic() - t0
    if res.errors and res.limited_by == "done":
        res.limited_by = "error"
    return res


def evict_files(paths: Iterable[str]) -> int:
    """posix_fadvise(DONTNEED) on each file; returns how many files were advised."""
    n = 0
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            n += pcsys.release_pages(fd)
        finally:
            os.close(fd)
    return n
