# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The exits the nodes saw at the event, on the controller: who exited first, and how long the
wait took to name it (issue #28 part 3).

One job: the controller's side of the exit watch. Each node's ``rank_status`` watches its rank
containers' ``docker events`` until the next poll or the first exit
(:mod:`~..module_utils._boot._events`), and its worker puts the events in its report. Here the
events of every host are merged per rank (an ``oom`` joins its rank's ``die``) and ordered
likeliest cause first, with the rule the polls use
(:func:`~._rankstatus.exit_order`): time order, but among the exits within ``EXIT_CLUSTER_S`` of
the first, one with a cause of its own (OOM-killed, killed by a signal) before the peers that
exited with an error because they lost it.

Event times are the nodes' clocks, taken as the controller's: a cluster keeps its clocks in sync
(NTP; the engines' own distributed timeouts assume it, and :func:`~._rankstatus.exit_order`
already compares exit times across nodes), and on the simulated cluster every node is the same
kernel's clock. Correcting by a report's arrival would add the connection's latency, seconds
under load, to each estimate: worse than the skew it would remove.

Pure: no I/O.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rankstatus import EXIT_CLUSTER_S

# A watch shorter than this is not worth a docker events process: the status read follows anyway.
MIN_WATCH_S = 0.5


@dataclass
class SeenExit:
    """One rank's exit as its node's docker reported it, on the controller's clock."""

    rank: int
    host: str
    container: str
    at: float  # the node's clock (see the module docstring)
    exit_code: int | None = None
    oom: bool = False

    @property
    def own_cause(self) -> bool:
        """OOM-killed or killed by a signal (128 + N): not the echo of a peer's exit."""
        return self.oom or (self.exit_code or 0) >= 128

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "host": self.host, "container": self.container, "at": self.at,
                "exit_code": self.exit_code, "oom": self.oom}


def exits_from_reports(reports: Mapping[str, Mapping[str, Any]],
                       rank_of_container: Mapping[str, int]) -> list[SeenExit]:
    """Every rank exit in the hosts' reports (``exit_events``), one per rank (its latest ``die``,
    with ``oom`` when docker reported one for that container)."""
    out: dict[int, SeenExit] = {}
    for host, report in reports.items():
        events = sorted(report.get("exit_events") or [], key=lambda e: int(e.get("time_ns") or 0))
        oom: set[str] = set()
        for event in events:
            name = str(event.get("container") or "")
            rank = rank_of_container.get(name)
            if rank is None:
                continue
            if event.get("action") == "oom":
                oom.add(name)
                continue
            if event.get("action") != "die":
                continue
            at = int(event.get("time_ns") or 0) / 1e9
            code = event.get("exit_code")
            out[rank] = SeenExit(rank, host, name, at, code if isinstance(code, int) else None, name in oom)
    return list(out.values())


def first_exits(exits: Sequence[SeenExit], cluster_s: float = EXIT_CLUSTER_S) -> list[SeenExit]:
    """The exits, likeliest cause first: time order, except that among the exits within
    ``cluster_s`` of the first one with a cause of its own goes before those without."""
    if not exits:
        return []
    first = min(e.at for e in exits)
    return sorted(exits, key=lambda e: (not (e.at - first <= cluster_s and e.own_cause), e.at, e.rank))


def watch_seconds(now: float, deadline: float, overhead_s: float) -> float:
    """How long the next status call should watch for exits so that it returns near ``deadline``
    (the next poll): the time left, less what a call costs besides the watch; 0 when too short."""
    left = deadline - now - max(0.0, overhead_s)
    return round(left, 3) if left >= MIN_WATCH_S else 0.0


def named_after(exit_seen: SeenExit, named_at: float) -> float:
    """Seconds from the exit to the status line that named it; never negative (clocks in sync
    still differ by milliseconds)."""
    return max(0.0, named_at - exit_seen.at)
