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


def new_bytes_per_block(fd: int, off: int, n: int, block_size: int, psize: int) -> list[int]:
    """Bytes of each ``block_size`` block of ``[off, off+n)`` that are not in the page cache now.

    One cachestat for the whole range answers the common cases (cold: nothing cached; warm:
    everything); the blocks are asked one by one only when part of the range is cached. Raises
    OSError where cachestat cannot be had.
    """
    blocks = [(p, min(block_size, off + n - p)) for p in range(off, off + n, block_size)]
    cached = pcsys.cachestat(fd, off, n)[0]
    if cached == 0:
        return [ln for _p, ln in blocks]
    if cached * psize >= n + (off % psize):
        return [0 for _p, _ln in blocks]
    return [max(0, ln - pcsys.cachestat(fd, p, ln)[0] * psize) for p, ln in blocks]


def _residency_before(files: list[tuple[str, int]], block_size: int, psize: int) -> dict[str, list[int] | None]:
    """{path: bytes not cached per block} before anything is read; None where unknown (read it all)."""
    out: dict[str, list[int] | None] = {}
    for path, size in files:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            out[path] = None  # the worker meets the error and reports it
            continue
        try:
            out[path] = new_bytes_per_block(fd, 0, size, block_size, psize) if size > 0 else []
        except OSError:
            out[path] = None
        finally:
            os.close(fd)
    return out


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

    Residency is read once, for every block, before the first read, never block by block as the
    read goes: the kernel's readahead caches the next blocks while one is read, and a
    block skipped because it was in flight (cachestat counts pages under read) leaves the
    readahead marker untouched, so the stream stalled into a synchronous read every other block
    (0.65-0.74x the speed of ``cat``, issue #28). Reading those blocks costs nothing but a wait for
    the pages in flight, keeps the readahead going, and counts them in the budget, which is
    what they are: bytes this warm brought into memory.
    """
    res = WarmResult()
    # Looked up at call time, so a caller (or a test) that replaces pcsys.read_meminfo is heard.
    meminfo = meminfo or pcsys.read_meminfo
    t0 = time.monotonic()
    files = list(files)
    psize = pcsys.page_size()
    # whole blocks per segment, so a segment's blocks are the pre-pass's blocks
    segment_bytes = max(block_size, segment_bytes - segment_bytes % block_size)
    before = _residency_before(files, block_size, psize) \
        if skip_resident and pcsys.cachestat_nr() is not None else {}
    segs = []
    for path, size in files:
        off = 0
        news = before.get(path)
        while off < size:
            n = min(segment_bytes, size - off)
            first = off // block_size
            count = (n + block_size - 1) // block_size
            # None: no residency known, every block is read
            segs.append((path, off, n, news[first:first + count] if news is not None else None))
            off += n
    lock = threading.Lock()
    stop = threading.Event()
    state = {"next": 0, "new": 0}
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
        try:
            while not stop.is_set():
                with lock:
                    i = state["next"]
                    if i >= len(segs):
                        return
                    state["next"] = i + 1
                path, off, n, news = segs[i]
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
                skip = news is not None
                if news is None:
                    news = [min(block_size, off + n - p) for p in range(off, off + n, block_size)]
                for k, new in enumerate(news):
                    if stop.is_set():
                        return
                    pos = off + k * block_size
                    end = min(pos + block_size, off + n)
                    if skip and new == 0:
                        with lock:
                            res.bytes_skipped_resident += end - pos
                        continue
                    if not allowed(new):
                        return
                    while pos < end:
                        got = None
                        if null_fd is not None:
                            try:
                                # zero-copy: the pages land in the page cache, nothing is copied to us
                                got = os.sendfile(null_fd, fd, pos, end - pos)
                            except OSError:
                                got = None
                                os.close(null_fd)
                                null_fd = None
                        if got is None:
                            got = os.preadv(fd, [memoryview(buf)[:end - pos]], pos)
                        if got <= 0:
                            break  # the file is shorter than listed: the caller's residency check says so
                        with lock:
                            res.bytes_read += got
                        pos += got
                    if pos < end:
                        break
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
