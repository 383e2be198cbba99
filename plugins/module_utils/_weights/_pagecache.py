# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Page-cache residency of weight files, bounded warming and explicit eviction.

Measurement never reads file data:

- ``cachestat(2)`` (Linux >= 6.5, syscall 451 on every architecture that has it) gives the
  cached page count of a whole file in one call;
- otherwise ``mmap`` + ``mincore(2)`` over windows;
- ``mincore`` reports *every page resident* for a caller who may neither write nor own the file
  (kernel >= 5.2), and ``cachestat`` refuses the same caller with EPERM: in that case the
  residency is reported as unknown (None), never as warm.

Warming is parallel large sequential reads (``pread`` into a reused buffer), ordered, skipping
ranges that are already resident, and bounded by a MemFree floor read from ``/proc/meminfo``:
on unified-memory hosts (GB10) page cache is memory the GPU does not see as free.

Eviction is ``posix_fadvise(DONTNEED)`` on the named files only. Nothing here touches the
kernel's global cache controls.

Stdlib only (ctypes for the syscalls).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import glob
import os
import platform
import re
import stat as statmod
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

GIB = 1 << 30
MIB = 1 << 20

# cachestat was added with the same number on every architecture's table (generic and x86).
_CACHESTAT_NR = {"x86_64": 451, "amd64": 451, "aarch64": 451, "arm64": 451, "ppc64le": 451,
                 "s390x": 451, "riscv64": 451, "i686": 451, "i386": 451, "armv7l": 451,
                 "loongarch64": 451, "mips64": 451}

PROT_READ = 0x1
MAP_SHARED = 0x01
MAP_FAILED = ctypes.c_void_p(-1).value

UMA_GPU_RE = re.compile(r"GB10|GH200|GB200|GB300|Thor|Orin|Xavier", re.I)


class _CachestatRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    _fields_ = [("nr_cache", ctypes.c_uint64), ("nr_dirty", ctypes.c_uint64),
                ("nr_writeback", ctypes.c_uint64), ("nr_evicted", ctypes.c_uint64),
                ("nr_recently_evicted", ctypes.c_uint64)]


_libc: Any = None
_libc_lock = threading.Lock()
_cachestat_state: dict[str, bool | None] = {"available": None}


def libc() -> Any:
    """The C library with the prototypes used here (mmap, mincore, syscall); raises OSError if absent."""
    global _libc
    with _libc_lock:
        if _libc is None:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            lib.syscall.restype = ctypes.c_long
            lib.mmap.restype = ctypes.c_void_p
            lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_int, ctypes.c_int64]
            lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            lib.munmap.restype = ctypes.c_int
            lib.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
            lib.mincore.restype = ctypes.c_int
            _libc = lib
    return _libc


def page_size() -> int:
    return os.sysconf("SC_PAGE_SIZE")


def pages_for(nbytes: int, psize: int) -> int:
    """Number of pages a file of ``nbytes`` spans (the last one partial)."""
    if nbytes <= 0:
        return 0
    return (nbytes + psize - 1) // psize


def resident_bytes(resident_pages: int, size: int, psize: int) -> int:
    """Bytes of a ``size``-byte file covered by ``resident_pages`` cached pages (never > size)."""
    return min(size, resident_pages * psize)


def pct(part: float | None, whole: float | None) -> float | None:
    if part is None or whole is None:
        return None
    if whole <= 0:
        return 100.0
    return round(100.0 * part / whole, 2)


# ---------------------------------------------------------------------------------------------
# cachestat / mincore


def cachestat_nr() -> int | None:
    return _CACHESTAT_NR.get(platform.machine().lower())


def cachestat(fd: int, offset: int = 0, length: int = 0) -> tuple[int, int, int, int, int]:
    """Return (nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted) or raise OSError.

    ``length`` 0 means "to the end of the file". ENOSYS means the kernel lacks it.
    """
    nr = cachestat_nr()
    if nr is None or _cachestat_state["available"] is False:
        raise OSError(errno.ENOSYS, "cachestat not available")
    rng = _CachestatRange(offset, length)
    cs = _Cachestat()
    lib = libc()
    rc = lib.syscall(ctypes.c_long(nr), ctypes.c_int(fd), ctypes.byref(rng), ctypes.byref(cs), ctypes.c_uint(0))
    if rc != 0:
        e = ctypes.get_errno()
        if e == errno.ENOSYS:
            _cachestat_state["available"] = False
        raise OSError(e, os.strerror(e))
    _cachestat_state["available"] = True
    return (cs.nr_cache, cs.nr_dirty, cs.nr_writeback, cs.nr_evicted, cs.nr_recently_evicted)


_MASK = bytes(b & 1 for b in range(256))


def mincore_pages(fd: int, size: int, window: int = 1 * GIB) -> int:
    """Resident page count of the first ``size`` bytes of ``fd`` via mmap + mincore windows."""
    if size <= 0:
        return 0
    lib = libc()
    psize = page_size()
    window = max(psize, (window // psize) * psize)
    total = 0
    off = 0
    while off < size:
        length = min(window, size - off)
        addr = lib.mmap(None, length, PROT_READ, MAP_SHARED, fd, off)
        if addr is None or addr == MAP_FAILED:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        try:
            n = pages_for(length, psize)
            vec = (ctypes.c_ubyte * n)()
            if lib.mincore(ctypes.c_void_p(addr), length, vec) != 0:
                e = ctypes.get_errno()
                raise OSError(e, os.strerror(e))
            raw = bytes(vec).translate(_MASK)
            total += n - raw.count(0)
        finally:
            lib.munmap(ctypes.c_void_p(addr), length)
        off += length
    return total


def mincore_trustworthy(path: str, st: os.stat_result) -> bool:
    """mincore answers truthfully only for a caller who owns the file or may write it (or has
    CAP_FOWNER, which root has); for anyone else it reports every page resident."""
    euid = os.geteuid()
    if euid == 0 or st.st_uid == euid:
        return True
    try:
        if os.access in os.supports_effective_ids:
            return os.access(path, os.W_OK, effective_ids=True)
    except (TypeError, NotImplementedError):
        pass
    return os.access(path, os.W_OK)


class FileResidency:
    """Page-cache residency of one file; ``resident_pages`` None means unknown (never "warm")."""

    __slots__ = ("path", "size", "pages", "resident_pages", "method", "reason", "dirty_pages",
                 "evicted_pages", "recently_evicted_pages")

    def __init__(self, path: str, size: int, pages: int, resident_pages: int | None = None,
                 method: str = "unknown", reason: str | None = None) -> None:
        self.path = path
        self.size = size
        self.pages = pages
        self.resident_pages = resident_pages
        self.method = method
        self.reason = reason
        self.dirty_pages: int | None = None
        self.evicted_pages: int | None = None
        self.recently_evicted_pages: int | None = None

    def resident_bytes(self, psize: int) -> int | None:
        if self.resident_pages is None:
            return None
        return resident_bytes(self.resident_pages, self.size, psize)

    def as_dict(self, psize: int, name: str | None = None) -> dict[str, Any]:
        rb = self.resident_bytes(psize)
        d = {"path": name or self.path, "size": self.size, "pages": self.pages,
             "resident_pages": self.resident_pages, "resident_bytes": rb,
             "resident_pct": pct(rb, self.size), "method": self.method}
        if self.reason:
            d["reason"] = self.reason
        if self.recently_evicted_pages is not None:
            d["recently_evicted_pages"] = self.recently_evicted_pages
        return d


def measure_fd(fd: int, path: str, size: int, method: str = "auto", st: os.stat_result | None = None,
               psize: int | None = None) -> FileResidency:
    psize = psize or page_size()
    pages = pages_for(size, psize)
    res = FileResidency(path, size, pages)
    if method in ("auto", "cachestat"):
        try:
            c = cachestat(fd)
            res.resident_pages = min(pages, c[0])
            res.dirty_pages = c[1]
            res.evicted_pages = c[3]
            res.recently_evicted_pages = c[4]
            res.method = "cachestat"
            return res
        except OSError as exc:
            if exc.errno == errno.EPERM:
                # the same caller would get fake all-resident data from mincore
                res.reason = "cachestat refused (EPERM): not owner and no write permission; run as root"
                return res
            if method == "cachestat":
                res.reason = f"cachestat unavailable ({exc.strerror or exc})"
                return res
    st = st or os.fstat(fd)
    if not mincore_trustworthy(path, st):
        res.reason = "mincore would report fake residency for a non-owner without write permission; run as root"
        return res
    try:
        res.resident_pages = min(pages, mincore_pages(fd, size))
        res.method = "mincore"
    except OSError as exc:
        res.reason = f"mincore failed ({exc.strerror or exc})"
    return res


def measure_file(path: str, method: str = "auto", psize: int | None = None) -> FileResidency:
    """Residency of one file. Missing or unreadable files come back with method 'unknown'."""
    psize = psize or page_size()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOATIME", 0))
    except PermissionError:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            return FileResidency(path, 0, 0, None, "unknown", f"cannot open ({exc.strerror})")
    except OSError as exc:
        return FileResidency(path, 0, 0, None, "unknown", f"cannot open ({exc.strerror})")
    try:
        st = os.fstat(fd)
        return measure_fd(fd, path, st.st_size, method=method, st=st, psize=psize)
    finally:
        os.close(fd)


def summarize(results: Sequence[FileResidency], psize: int) -> dict[str, Any]:
    total = sum(r.size for r in results)
    known = [r for r in results if r.resident_pages is not None]
    unknown = [r for r in results if r.resident_pages is None]
    rb = sum(r.resident_bytes(psize) for r in known)
    methods = sorted({r.method for r in results})
    out = {
        "files": len(results), "bytes_total": total,
        "bytes_resident": None if unknown else rb,
        "bytes_resident_known": rb,
        "pct": None if unknown else pct(rb, total),
        "unknown_files": [r.path for r in unknown],
        "method": methods[0] if len(methods) == 1 else ",".join(methods),
    }
    return out


# ---------------------------------------------------------------------------------------------
# memory


MEMINFO_KEYS = ("MemTotal", "MemFree", "MemAvailable", "Cached", "Buffers", "Active(file)",
                "Inactive(file)", "Dirty", "Writeback", "Mlocked")


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo text -> {key: value}; values with a ``kB`` unit are converted to bytes.

    The one meminfo parser of the collection: every key of the file is kept (``MemTotal``,
    ``MemFree``, ``MemAvailable``, ``Cached``, ``HugePages_Total``...); unitless counters stay counts.
    """
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^([\w()]+):\s+(\d+)(?:\s+(\w+))?", line)
        if not m:
            continue
        val = int(m.group(2))
        if (m.group(3) or "").lower() == "kb":
            val *= 1024
        out[m.group(1)] = val
    return out


def read_meminfo(path: str = "/proc/meminfo") -> dict[str, int]:
    """Parse ``path`` (``/proc/meminfo``); OSError propagates to the caller, which knows the context."""
    with open(path) as fh:
        return parse_meminfo(fh.read())


def meminfo_report(mi: dict[str, int]) -> dict[str, Any]:
    keys = ("MemTotal", "MemFree", "MemAvailable", "Cached")
    d = {k: mi.get(k) for k in keys}
    d.update({k.lower() + "_gib": round(mi[k] / GIB, 2) for k in keys if k in mi})
    if "MemAvailable" in mi and "MemFree" in mi:
        d["available_minus_free"] = mi["MemAvailable"] - mi["MemFree"]
        d["available_minus_free_gib"] = round((mi["MemAvailable"] - mi["MemFree"]) / GIB, 2)
    return d


def detect_uma(root: str = "/proc/driver/nvidia/gpus") -> tuple[bool, str | None]:
    """(True/False, gpu model) from the NVIDIA driver's per-GPU information files."""
    for info in sorted(glob.glob(os.path.join(root, "*", "information"))):
        try:
            with open(info) as fh:
                text = fh.read()
        except OSError:
            continue
        m = re.search(r"^Model:\s*(.+)$", text, re.M)
        model = m.group(1).strip() if m else ""
        if UMA_GPU_RE.search(model):
            return True, model
        return False, model
    return False, None


def engine_claim_bytes(memory_fraction: float, device_memory_bytes: int) -> int:
    """Memory the engine will take at start: its fraction of the device memory."""
    if memory_fraction < 0 or memory_fraction > 1:
        raise ValueError("memory_fraction must be within 0..1")
    return int(memory_fraction * max(0, device_memory_bytes))


def memfree_floor(memory_fraction: float, device_memory_bytes: int, headroom_bytes: int) -> int:
    """The MemFree level warming must never push below: the engine's claim plus headroom."""
    return engine_claim_bytes(memory_fraction, device_memory_bytes) + max(0, int(headroom_bytes))


def warm_budget(mem_free: int, floor: int, need: int, cap: int | None = None) -> int:
    """Bytes that may be newly cached: what is needed, at most MemFree - floor, at most ``cap``."""
    room = max(0, mem_free - floor)
    b = min(max(0, need), room)
    if cap is not None:
        b = min(b, max(0, int(cap)))
    return b


# ---------------------------------------------------------------------------------------------
# ordering


def natural_key(s: str) -> list[int | str]:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", s)]


def order_for_rank(paths: Iterable[str], rank: int | None = None, world_size: int | None = None,
                   first: Sequence[str] | None = None) -> list[str]:
    """Warm order: explicitly named files, then this rank's share of the sorted files
    (``sorted[rank::world_size]``, the split the engines' own prefetch uses), then the rest;
    natural order inside each group."""
    ps = sorted(paths, key=natural_key)
    first = [p for p in (first or []) if p in set(ps)]
    mine = []
    if rank is not None and world_size and world_size > 0:
        big = [p for p in ps if p not in first]
        mine = big[rank % world_size::world_size]
    head = first + [p for p in mine if p not in first]
    seen = set(head)
    return head + [p for p in ps if p not in seen]


# ---------------------------------------------------------------------------------------------
# warm


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
    meminfo = meminfo or read_meminfo
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
        fds = {}
        try:
            null_fd = os.open(os.devnull, os.O_WRONLY) if use_sendfile else None
        except OSError:
            null_fd = None
        psize = page_size()
        use_cs = skip_resident and cachestat_nr() is not None
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
                            cached = cachestat(fd, pos, ln)[0]
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


def release_pages(fd: int, offset: int = 0, length: int = 0) -> bool:
    """posix_fadvise(DONTNEED) on a range of one open file (clean pages only); best effort.

    Only ever called on files lanekit names (staged weights, its own copies), never globally.
    """
    try:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    except (OSError, AttributeError):
        return False
    return True


def evict_files(paths: Iterable[str]) -> int:
    """posix_fadvise(DONTNEED) on each file; returns how many files were advised."""
    n = 0
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            n += release_pages(fd)
        finally:
            os.close(fd)
    return n


def processes_mapping(prefix: str, proc: str = "/proc") -> list[int]:
    """PIDs (of this PID namespace) that map or hold open a file under ``prefix``."""
    prefix = prefix.rstrip("/") + "/"
    me = os.getpid()
    out = []
    for d in os.listdir(proc):
        if not d.isdigit() or int(d) == me:
            continue
        hit = False
        try:
            with open(os.path.join(proc, d, "maps")) as fh:
                for line in fh:
                    if prefix in line:
                        hit = True
                        break
        except OSError:
            pass
        if not hit:
            try:
                for fdn in os.listdir(os.path.join(proc, d, "fd")):
                    try:
                        if os.readlink(os.path.join(proc, d, "fd", fdn)).startswith(prefix):
                            hit = True
                            break
                    except OSError:
                        continue
            except OSError:
                pass
        if hit:
            out.append(int(d))
    return out


def is_regular(path: str) -> bool:
    try:
        return statmod.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False
