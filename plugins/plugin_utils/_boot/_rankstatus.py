# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""One rank at one poll: the :class:`RankStatus` record the wait's workers exchange.

One job: turn a rank's plan entry, its container state (``docker inspect``), its
:class:`~._ranklog.RankLog` and its probe results into a :class:`RankStatus`. Statuses cross
processes (each node's worker writes its ranks' statuses as JSON for the coordinator), so the
record converts to and from plain JSON (:meth:`RankStatus.to_dict`, :meth:`RankStatus.from_dict`).
Ages are seconds before the node's own clock, so no two clocks need to agree.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _signatures as sigs
from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import RankLog, parse_docker_time

RUNNING = "running"
# States that mean no process of the rank runs, but not because the container is gone.
NOT_STARTED = ("missing", "created")


@dataclass
class RankStatus:
    """What the wait knows about one rank at one poll."""

    rank: int
    host: str = ""
    role: str = "worker"
    container: str = ""
    fabric_ip: str = ""
    planned_spec_hash: str = ""
    engine: str | None = None
    # "running", "exited", ... (docker's), "missing" (no container), "unknown" (no report).
    state: str = "unknown"
    phase: str = "started"
    gather_error: str = ""
    probes: dict[str, Any] = field(default_factory=dict)
    tail: list[str] = field(default_factory=list)
    # docker's view of the container
    exit_code: int | None = None
    oom_killed: bool = False
    error: str = ""
    restart_count: int = 0
    image: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    uptime_s: float | None = None
    started_age_s: float | None = None
    finished_age_s: float | None = None
    # When the container stopped (epoch seconds, the node's clock): orders exits across nodes,
    # which ages cannot when the ranks stop within the skew of the nodes' report times.
    finished_at: float | None = None
    # When the container started (epoch seconds, the node's clock): a rank this run started is a
    # boot, never a lane that was already serving (lane_wait's boot_since).
    started_at: float | None = None
    # the log's view
    signatures: dict[str, str] = field(default_factory=dict)
    last_exception: str = ""
    shards: tuple[int, int] | None = None
    shard_pct: int = 0
    load_rate: float | None = None
    tqdm_remaining_s: float | None = None
    capture: tuple[int, int] | None = None
    last_line: str = ""
    last_line_age_s: float | None = None
    events_age_s: dict[str, float | None] = field(default_factory=dict)
    # When the log first showed each boot phase (age, node clock): the ledger's per-rank milestones.
    phases_age_s: dict[str, float | None] = field(default_factory=dict)
    phase_age_s: float | None = None
    load_elapsed_s: float | None = None
    # the node's memory (on unified memory, what the GPU gets)
    mem_free_kb: int | None = None
    mem_available_kb: int | None = None

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    @property
    def is_head(self) -> bool:
        # The rank that answers the lane's API: the head, or a P/D lane's router.
        return self.role in ("head", "router")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (pairs become lists)."""
        out = dataclasses.asdict(self)
        for key in ("shards", "capture"):
            if out[key] is not None:
                out[key] = list(out[key])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RankStatus:
        """The record back from :meth:`to_dict` output (keys it does not know are ignored)."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["rank"] = int(values["rank"])
        for key in ("shards", "capture"):
            if values.get(key) is not None:
                values[key] = tuple(int(x) for x in values[key])
        return cls(**values)

    @classmethod
    def for_rank(cls, spec: Mapping[str, Any], **values: Any) -> RankStatus:
        """A status carrying the identity of one ``plan["ranks"]`` entry."""
        return cls(
            rank=int(spec["node_rank"]),
            host=spec.get("host", ""),
            role=spec.get("role") or "worker",
            container=spec.get("container_name", ""),
            fabric_ip=spec.get("fabric_ip") or "",
            planned_spec_hash=spec.get("spec_hash") or "",
            **values,
        )


# Exits within this many seconds of the first count as one failure when the cause is chosen: a rank
# that loses a peer exits within seconds of it, and two nodes' clocks (or two docker daemons under
# load) can record those exits in either order.
EXIT_CLUSTER_S = 10.0


def has_own_cause(status: RankStatus) -> bool:
    """Whether a stopped rank shows a cause of its own: OOM-killed, killed by a signal (exit code
    128 + N), or a root failure signature in its log. A rank that merely exited with an error is
    often the echo of a peer that went first."""
    if status.oom_killed or (status.exit_code or 0) >= 128:
        return True
    return any(sig.kind == sigs.ROOT for sig in (sigs.BY_ID.get(sid) for sid in status.signatures) if sig)


def fabric_ips(statuses: Mapping[int, RankStatus]) -> dict[str, int]:
    """Fabric address -> node rank, for the addresses that name exactly one rank (a line naming a
    peer's address then blames that rank; ranks sharing an address cannot be told apart)."""
    seen: dict[str, list[int]] = {}
    for rank, status in statuses.items():
        if status.fabric_ip:
            seen.setdefault(status.fabric_ip, []).append(rank)
    return {ip: ranks[0] for ip, ranks in seen.items() if len(ranks) == 1}


def exit_order(statuses: Mapping[int, RankStatus], stopped: Sequence[int], clocks: bool = True) -> list[int]:
    """The stopped ranks, likeliest cause first.

    Time order: the exit times on the nodes' clocks (synchronised on a cluster) when ``clocks`` and
    every rank has one, else the exit ages (each before its own node's clock); then the lowest
    rank. Among the exits within EXIT_CLUSTER_S of the first, one with a cause of its own
    (:func:`has_own_cause`) comes before those without, so a killed rank is named rather than the
    peer that exited a moment "earlier" on its own clock.
    """
    if clocks and all(statuses[r].finished_at is not None for r in stopped):
        when = {r: float(statuses[r].finished_at or 0.0) for r in stopped}
    else:
        when = {r: (float("inf") if statuses[r].finished_age_s is None else -float(statuses[r].finished_age_s or 0.0))
                for r in stopped}
    first = min(when.values(), default=0.0)

    def key(rank: int) -> tuple[bool, float, int]:
        clustered = when[rank] - first <= EXIT_CLUSTER_S
        return (not (clustered and has_own_cause(statuses[rank])), when[rank], rank)

    return sorted(stopped, key=key)


def _age(now: float, ts: float | None) -> float | None:
    if ts is None:
        return None
    return max(0.0, now - ts)


def build(
    spec: Mapping[str, Any],
    inspect: Mapping[str, Any] | None,
    log: RankLog | None,
    node_now: float,
    probes: Mapping[str, Any] | None = None,
    tail: Sequence[str] = (),
    gather_error: str = "",
) -> RankStatus:
    """The status of the rank ``spec`` (a ``plan["ranks"]`` entry) at the node's time ``node_now``.

    ``inspect`` is the container's ``docker inspect`` object (None when the container does not
    exist); ``log`` its parsed log (None when none was read).
    """
    status = RankStatus.for_rank(
        spec, engine=log.engine if log else None, gather_error=gather_error,
        probes=dict(probes or {}), tail=list(tail)[-20:],
    )
    if gather_error and inspect is None and log is None:
        return status  # state unknown: the node did not answer
    if inspect is None:
        status.state = status.phase = "missing"
        return status
    st = inspect.get("State") or {}
    config = inspect.get("Config") or {}
    started = parse_docker_time(st.get("StartedAt"))
    finished = parse_docker_time(st.get("FinishedAt"))
    status.state = st.get("Status") or (RUNNING if st.get("Running") else "unknown")
    status.exit_code = st.get("ExitCode")
    status.oom_killed = bool(st.get("OOMKilled"))
    status.error = st.get("Error") or ""
    status.restart_count = int(inspect.get("RestartCount") or 0)
    status.image = config.get("Image", "")
    status.labels = dict(config.get("Labels") or {})
    status.uptime_s = _age(node_now, started) if status.running else None
    status.started_age_s = _age(node_now, started)
    status.started_at = started
    status.finished_age_s = _age(node_now, finished) if not status.running else None
    status.finished_at = finished if not status.running else None
    found = dict(log.signatures) if log else {}
    if status.error:
        found.update({k: v for k, v in sigs.scan_text(status.error).items() if k not in found})
    status.signatures = found
    status.last_exception = log.scanner.last_exception if log else ""
    if status.state == "created":
        status.phase = "created"
        return status
    if log is None:
        return status
    status.phase = log.phase
    status.shards = log.shards
    status.shard_pct = log.shard_pct
    status.load_rate = log.load_rate()
    status.tqdm_remaining_s = log.tqdm_remaining_s
    status.capture = log.capture
    status.last_line = log.last_line
    status.last_line_age_s = _age(node_now, log.last_line_at)
    status.events_age_s = {k: _age(node_now, v) for k, v in log.events.items() if not k.startswith("phase:")}
    status.phases_age_s = {k[6:]: _age(node_now, v) for k, v in log.events.items() if k.startswith("phase:")}
    status.phase_age_s = _age(node_now, log.events.get("phase:" + log.phase))
    begin = log.events.get("load_begin")
    if begin is not None:
        end = log.events.get("loaded")
        status.load_elapsed_s = max(0.0, (node_now if end is None else end) - begin)
    return status
