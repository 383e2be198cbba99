# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""How far the lane's boot got and how long it still takes: elapsed, ETA, who joined the rendezvous.

One job: estimate from the ranks' statuses (never decide: the tracker does). The ETA comes from
the load bars (shards per minute, the bar's own estimate), from how long the loaded ranks took,
or from the plan's figures (:class:`~._bootconfig.BootConfig`), in that order of preference.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

import statistics
from collections.abc import Mapping

from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import ORDER
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._bootconfig import BootConfig
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rankstatus import RankStatus
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._report import fmt_duration


def phase_order(status: RankStatus) -> int:
    """The rank's phase as a number of the ranklog's order (an unknown phase counts as started)."""
    return ORDER.get(status.phase, ORDER["started"])


def elapsed(statuses: Mapping[int, RankStatus]) -> float | None:
    """Seconds since the first rank started (node clocks), or None before any did."""
    ages = [s.started_age_s for s in statuses.values() if s.started_age_s is not None]
    return max(ages) if ages else None


def eta(cfg: BootConfig, statuses: Mapping[int, RankStatus]) -> tuple[float | None, str]:
    """(seconds left, how it was estimated) for the lane to be up."""
    running = [s for s in statuses.values() if s.running]
    if not running:
        return None, ""
    phase = min((s.phase for s in running), key=lambda p: ORDER[p])
    warm = cfg.expected_warmup_s
    if phase == "ready":
        return 0.0, ""
    if ORDER[phase] < ORDER["loading"]:
        if cfg.expected_load_s is None:
            return None, ""
        # Nothing measured yet: the plan's figures, less the time already spent.
        spent = elapsed(statuses) or 0.0
        return cfg.expected_load_s + (warm or 0.0) - spent, "planned"
    if phase == "loading":
        return _loading_eta(cfg, running, warm)
    # Loaded: the post-load phases.
    if warm is None:
        return None, ""
    since_loaded = [a for a in (s.events_age_s.get("loaded") for s in running) if a is not None]
    if len(since_loaded) != len(running):
        return warm, "warm-up planned"
    return max(0.0, warm - min(since_loaded)), "warm-up planned"


def _loading_eta(cfg: BootConfig, running: list[RankStatus], warm: float | None) -> tuple[float | None, str]:
    barred = [s for s in running if s.shards]
    left: float | None = None
    how = ""
    for status in barred:
        done, total = status.shards  # type: ignore[misc]
        rate = status.load_rate
        if rate and rate > 0 and done < total:
            # The bar's last update is a few seconds old; count from it.
            since = status.last_line_age_s or 0.0
            candidate = max(0.0, (total - done) / rate - since)
            how = f"at {rate * 60:.1f} shards/min"
        elif status.tqdm_remaining_s is not None and done < total:
            candidate = status.tqdm_remaining_s
            how = "per the load bar"
        else:
            continue
        left = candidate if left is None else max(left, candidate)
    loaded = [s.load_elapsed_s for s in running if phase_order(s) >= ORDER["barrier"] and s.load_elapsed_s]
    loading = [s for s in running if s.phase == "loading"]
    if loaded and loading:
        typical = statistics.median(loaded)
        lag = max(max(0.0, typical - (s.load_elapsed_s or 0.0)) for s in loading)
        if left is None or (not barred or all(s.phase != "loading" for s in barred)):
            left, how = lag, "as long as the loaded ranks took"
    if left is None:
        if cfg.expected_load_s is None:
            return None, ""
        elapsed = max((s.load_elapsed_s or 0.0) for s in running)
        left, how = max(0.0, cfg.expected_load_s - elapsed), "planned"
    how = f"load {fmt_duration(left)} {how}"
    if warm:
        how += f" + warm-up {fmt_duration(warm)} planned"
    return left + (warm or 0.0), how


def joined(statuses: Mapping[int, RankStatus]) -> tuple[list[int], list[int]] | None:
    """(joined, missing) ranks of the rendezvous, from the connections to the head's store.

    Every rank keeps a TCP connection to the head's rendezvous port while the group forms;
    a rank whose fabric address has none has not joined. None when not measurable.
    """
    heads = [s for s in statuses.values() if s.is_head and s.running]
    if not heads:
        return None
    info = heads[0].probes.get("rendezvous")
    if not info:
        return None
    peers = set(info.get("peers") or [])
    ips = {r: s.fabric_ip for r, s in statuses.items()}
    if not all(ips.values()) or len(set(ips.values())) != len(ips):
        return None   # addresses unknown or shared (one machine): cannot tell ranks apart
    joined = sorted(r for r, ip in ips.items() if ip in peers or statuses[r].is_head)
    missing = sorted(set(ips) - set(joined))
    return joined, missing
