# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Bus bandwidth exactly as nccl-tests defines it, from the probe's timings.

One job: the arithmetic. nccl-tests (src/all_reduce.cu ``AllReduceGetBw``, src/all_gather.cu
``AllGatherGetBw``, doc/PERFORMANCE.md) reports two figures per operation and size, in GB/s with
GB = 10^9 bytes:

- algbw = S / t, where S is the "size" column: for all-reduce the buffer each rank reduces
  (count x type size); for all-gather the GATHERED buffer, every rank's share together
  (count x type size x n, where count is what one rank sends).
- busbw = algbw x factor, the traffic one link carries, comparable across rank counts:
  all-reduce 2(n-1)/n, all-gather (n-1)/n, send/recv 1.

t is the time of one operation, the mean over the ranks (nccl-tests averages each rank's time
across the ranks before it divides). ``_probe.py`` duplicates the factor table because it runs alone
inside the lane's image; a unit test pins that both agree.
"""
from __future__ import annotations

from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

GB = 1e9
OPS = ("all_reduce", "all_gather", "sendrecv")


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw factor for ``op`` over ``n`` ranks."""
    if n < 1:
        raise LanekitError(f"a fabric measurement needs at least one rank, not {n}.")
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op == "all_gather":
        return (n - 1) / n
    if op == "sendrecv":
        return 1.0
    raise LanekitError(f"unknown collective {op!r}; the fabric gate measures {', '.join(OPS)}.")


def algbw(size_bytes: int, seconds: float) -> float:
    """GB/s of ``size_bytes`` (nccl-tests' size column) moved in ``seconds``."""
    if seconds <= 0:
        raise LanekitError(f"a fabric timing of {seconds} s is not a measurement (it must be above 0).")
    return size_bytes / GB / seconds


def busbw(op: str, n: int, size_bytes: int, seconds: float) -> float:
    """nccl-tests' bus bandwidth (GB/s) of one ``op`` of ``size_bytes`` over ``n`` ranks in ``seconds``."""
    return algbw(size_bytes, seconds) * bus_factor(op, n)


def per_rank_count(op: str, n: int, size_bytes: int, elem_bytes: int = 4) -> int:
    """Elements each rank passes to the call for nccl-tests' size ``size_bytes``: the whole buffer for
    all-reduce and send/recv, one n-th (what a rank sends) for all-gather."""
    share = size_bytes // n if op == "all_gather" else size_bytes
    return max(1, share // elem_bytes)


def summarize(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (op, size) from every rank's timings.

    ``results`` is one probe result per rank: ``{"rank", "world", "timings": [{"op", "size",
    "seconds": [per-iteration seconds]}]}``. Each row: op, size (bytes), ranks, time_s (mean over
    ranks of each rank's mean), algbw and busbw (GB/s), the slowest rank and its time."""
    by_key: dict[tuple[str, int], dict[int, float]] = {}
    world = 0
    for result in results:
        world = max(world, int(result.get("world") or 0))
        for timing in result.get("timings") or []:
            seconds = [float(s) for s in timing.get("seconds") or [] if float(s) > 0]
            if not seconds:
                continue
            key = (str(timing["op"]), int(timing["size"]))
            by_key.setdefault(key, {})[int(result["rank"])] = sum(seconds) / len(seconds)
    rows = []
    for (op, size), per_rank in sorted(by_key.items(), key=lambda item: (OPS.index(item[0][0]), item[0][1])):
        mean = sum(per_rank.values()) / len(per_rank)
        slowest = max(per_rank, key=lambda r: per_rank[r])
        rows.append({"op": op, "size": size, "ranks": world or len(per_rank), "time_s": mean,
                     "algbw": algbw(size, mean), "busbw": busbw(op, world or len(per_rank), size, mean),
                     "slowest_rank": slowest, "slowest_time_s": per_rank[slowest]})
    return rows


def headline(rows: list[dict[str, Any]], op: str) -> dict[str, Any] | None:
    """The row the floor is compared with: ``op`` at its largest size (nccl-tests' figure for a link is
    the large-message one; small sizes measure latency)."""
    mine = [row for row in rows if row["op"] == op]
    return max(mine, key=lambda row: row["size"]) if mine else None


def human_bytes(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"
