# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""How much page cache warming may add, and in which order: pure policy, no I/O.

One job: the figures. The engine claims its memory fraction of the device memory at start;
warming never pushes MemFree (MemAvailable on a discrete GPU) below that claim plus a headroom,
and reads this rank's files first. The caller reads the memory figures (``_pagecache_sys``) and
runs the loop (``_pagecache_warm``).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence


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
