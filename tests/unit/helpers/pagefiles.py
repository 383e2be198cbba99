"""Weight-like files for the page-cache tests: one written and synced, evicted and read on demand."""
from __future__ import annotations

import os

from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache_warm as pcwarm
from ansible_collections.lanekit.serving.plugins.module_utils._weights._pagecache_sys import MIB


def make_datafile(tmp_path) -> str:
    """An 8 MiB + 123 bytes file (the last page partial), on disk, not only in the cache."""
    p = tmp_path / "shard.safetensors"
    with open(p, "wb") as fh:
        fh.write(os.urandom(8 * MIB + 123))
        fh.flush()
        os.fsync(fh.fileno())
    return str(p)


def evict(path: str) -> None:
    pcwarm.evict_files([path])


def read_all(path: str) -> None:
    with open(path, "rb") as fh:
        while fh.read(1 << 20):
            pass
