# Copyright: lanekit developers
# Apache-2.0
"""Helpers the benchmark scripts share: import the collection from the checkout, evict the
benchmark's own files from the page cache, write incompressible filler files, and time the
device's own sequential read and write with ``dd`` (O_DIRECT), the limit staging and warming
are measured against."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30
MIB = 1 << 20


def import_collection():
    """Make ``ansible_collections.lanekit.serving`` importable from this checkout."""
    link = ROOT / ".collections"
    if (link / "ansible_collections" / "lanekit" / "serving" / "plugins").is_dir():
        base = link
    else:
        base = Path(tempfile.mkdtemp(prefix="lanekit-coll-"))
        (base / "ansible_collections" / "lanekit").mkdir(parents=True)
        os.symlink(ROOT, base / "ansible_collections" / "lanekit" / "serving")
    sys.path.insert(0, str(base))
    return base


def evict(paths):
    """posix_fadvise(DONTNEED) on the benchmark's own files only (never a global cache drop)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def write_filler(path, size, seed=0, block=16 * MIB):
    """Incompressible, distinct-per-block data, fsynced."""
    base = bytearray(os.urandom(block))
    with open(path, "wb") as fh:
        left, i = size, 0
        while left > 0:
            n = min(block, left)
            base[0:16] = (seed * 1_000_003 + i).to_bytes(16, "little")
            fh.write(memoryview(base)[:n])
            left -= n
            i += 1
        fh.flush()
        os.fsync(fh.fileno())


def dd_read_direct(paths, block_mib=64):
    """The device's sequential read: ``dd iflag=direct`` of each file in turn (the page cache is
    neither used nor filled, so no eviction is needed before or after)."""
    for p in paths:
        subprocess.run(["dd", f"if={p}", "of=/dev/null", f"bs={block_mib}M", "iflag=direct", "status=none"],
                       check=True)


def dd_write_direct(sizes, dest_dir, block_mib=64):
    """The device's sequential write of the same bytes: one ``dd oflag=direct conv=fsync`` file per
    size under ``dest_dir`` (created, then removed after the timing by the caller)."""
    os.makedirs(dest_dir, exist_ok=True)
    for i, size in enumerate(sizes):
        subprocess.run(["dd", "if=/dev/zero", f"of={dest_dir}/dd-{i:05d}", f"bs={block_mib}M", f"count={size}",
                        "iflag=count_bytes", "oflag=direct", "conv=fsync", "status=none"], check=True)


def gibps(nbytes, seconds):
    return nbytes / GIB / seconds if seconds > 0 else float("inf")
