# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The one status line a boot prints per poll.

One job: render. Time, lane, elapsed/budget, every rank's phase (ranks in the same phase
grouped), the ETA and how it was estimated, the barrier, who joined the rendezvous, the tightest
node's memory, how long nothing moved, and the tracker's note.

Pure: no I/O, no Ansible imports; the wall clock is only read for the time of day when the caller
gives none.
"""
from __future__ import annotations

import time
from collections.abc import Mapping

from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import ORDER
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _estimate as estimate
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._bootconfig import BootConfig
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._estimate import phase_order
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rankstatus import RankStatus
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._report import (
    fmt_duration,
    fmt_ranks,
    memory_note,
    rank_label,
)


def barrier_note(cfg: BootConfig, statuses: Mapping[int, RankStatus]) -> str:
    """How long the post-load barrier stays open and who it waits for ('' without a barrier)."""
    if cfg.barrier_timeout_s is None:
        return ""
    running = [s for s in statuses.values() if s.running]
    loaded_ages = [a for a in (s.events_age_s.get("loaded") for s in running) if a is not None]
    behind = sorted(s.rank for s in running if phase_order(s) < ORDER["barrier"])
    if not loaded_ages or not behind:
        return ""
    closes = cfg.barrier_timeout_s - max(loaded_ages)
    if closes < 0:
        return f"barrier expired {fmt_duration(-closes)} ago, {fmt_ranks(behind)} not loaded"
    return f"barrier closes in {fmt_duration(closes)}, waiting for {fmt_ranks(behind)}"


def render(lane: str, cfg: BootConfig, statuses: Mapping[int, RankStatus], now: float | None = None,
           quiet_s: float | None = None, note: str = "") -> str:
    """One line: time, lane, elapsed/budget, every rank's phase, ETA and warnings."""
    clock = time.strftime("%H:%M:%S", time.localtime(now if now is not None else time.time()))
    groups: dict[str, list[int]] = {}
    for rank in sorted(statuses):
        groups.setdefault(rank_label(statuses[rank]), []).append(rank)
    ordered = sorted(groups.items(), key=lambda item: item[1][0])
    ranks_txt = " | ".join(f"{fmt_ranks(ranks)} {label}" for label, ranks in ordered)
    elapsed = estimate.elapsed(statuses)
    parts = [f"[{clock}] {lane} {fmt_duration(elapsed)}/{fmt_duration(cfg.budget_s)}", ranks_txt]
    left, how = estimate.eta(cfg, statuses)
    if left is not None and left < 0:
        parts.append(f"ETA overdue by {fmt_duration(-left)} ({how or 'planned'})")
    elif left is not None and left > 0:
        eta = f"ETA ~{fmt_duration(left)}"
        if how:
            eta += f" ({how})"
        if elapsed is not None and elapsed + left > cfg.budget_s:
            eta += f" > budget by {fmt_duration(elapsed + left - cfg.budget_s)}"
        parts.append(eta)
    barrier = barrier_note(cfg, statuses)
    if barrier:
        parts.append(barrier)
    running = [s for s in statuses.values() if s.running]
    if running and min(phase_order(s) for s in running) <= ORDER["rendezvous"]:
        joined = estimate.joined(statuses)
        if joined is not None:
            done, missing = joined
            parts.append(f"joined {len(done)}/{len(statuses)}"
                         + (f", waiting for {fmt_ranks(missing)}" if missing else ""))
    mem = memory_note(statuses)
    if mem:
        parts.append(mem)
    if quiet_s is not None and quiet_s >= max(2 * cfg.poll_s, 60.0):
        parts.append(f"no progress {fmt_duration(quiet_s)}/{fmt_duration(cfg.stall_s)}")
    if note:
        parts.append(note)
    return " | ".join(parts)
