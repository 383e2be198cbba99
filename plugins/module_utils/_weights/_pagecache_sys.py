# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Page-cache residency of weight files and the memory figures, read from the kernel.

One job: ask the kernel, never read file data. Measurement:

- ``cachestat(2)`` (Linux >= 6.5, syscall 451 on every architecture that has it) gives the
  cached page count of a whole file in one call;
- otherwise ``mmap`` + ``mincore(2)`` over windows;
- ``mincore`` reports *every page resident* for a caller who may neither write nor own the file
  (kernel >= 5.2), and ``cachestat`` refuses the same caller with EPERM: in that case the
  residency is reported as unknown (None), never as warm.

Also ``/proc/meminfo`` (the collection's one parser), whether the GPU shares the host's memory
(unified memory: page cache is memory the GPU does not see as free), ``posix_fadvise(DONTNEED)``
on one open file, and which processes hold files under a directory. Nothing here touches the
kernel's global cache controls. The warming loop and eviction are ``_pagecache_warm``; the
budget policy is ``_pagecache_budget``.

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
from collections.abc import Sequence
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
    rb = sum(r.resident_bytes(psize) or 0 for r in known)  # known: never None; "or 0" is for the type
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
    d: dict[str, Any] = {k: mi.get(k) for k in keys}
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


def release_pages(fd: int, offset: int = 0, length: int = 0) -> bool:
    """posix_fadvise(DONTNEED) on a range of one open file (clean pages only); best effort.

    Only ever called on files lanekit names (staged weights, its own copies), never globally.
    """
    try:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    except (OSError, AttributeError):
        return False
    return True


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
