# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What the timeline charts show, computed here so the drawing script only draws.

One job: chart data. :func:`boot_chart` turns one deploy record into rows of bars on the
deploy's clock (a row for the deploy's phases, then one row per rank: its boot phases from the
container's start to the end of the wait, the failure marked where it happened); :func:`history_chart`
turns the ledger into points (boot duration and outcome per record). ``_draw.py`` renders either
with matplotlib.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._record import PHASES, LedgerRecord

# The rank phases the chart names (the boot tracker's, without the states before a start).
RANK_PHASES = ("started", "rendezvous", "loading", "barrier", "kv_profile", "graph_capture", "warmup", "ready")
COLORS = {
    "image": "#8c564b", "weights": "#9467bd", "cache": "#e377c2", "ranks": "#7f7f7f", "ready": "#2ca02c",
    "started": "#c7c7c7", "rendezvous": "#17becf", "loading": "#1f77b4", "barrier": "#bcbd22",
    "kv_profile": "#ff7f0e", "graph_capture": "#ffbb78", "warmup": "#98df8a",
}
OUTCOME_COLORS = {"good": "#2ca02c", "bad": "#d62728", "other": "#7f7f7f"}


def _segments(starts: dict[str, float], end: float, order: Sequence[str]) -> list[dict[str, Any]]:
    """Bars from each phase's start to the next phase's start (the last to ``end``), in time order."""
    ordered = sorted(((t, p) for p, t in starts.items() if p in order), key=lambda x: (x[0], order.index(x[1])))
    out = []
    for i, (start, phase) in enumerate(ordered):
        stop = ordered[i + 1][0] if i + 1 < len(ordered) else end
        if phase == "ready" and i + 1 == len(ordered):
            stop = max(stop, start)  # the ready mark is an instant when the wait ended on it
        out.append({"phase": phase, "start": round(start, 1), "end": round(max(stop, start), 1)})
    return out


def boot_chart(record: LedgerRecord) -> dict[str, Any]:
    """The timeline of one deploy: ``rows`` (label, bars, failure mark), seconds from the deploy's first phase.

    The deploy's phases come first (their durations laid end to end); each rank's bars start
    where its container started, placed on that clock by how long before the wait's end it began.
    """
    t = 0.0
    lane_starts: dict[str, float] = {}
    for phase in PHASES:
        if phase in record.phases:
            lane_starts[phase] = t
            t += record.phases[phase]
    end = t if record.phases else max([r.end_s or 0.0 for r in record.ranks] + [0.0])
    rows: list[dict[str, Any]] = [
        {"label": "deploy", "bars": _segments(lane_starts, end, PHASES), "failed_at": None, "stopped_at": None}
    ] if lane_starts else []
    blamed = any(r.failed for r in record.ranks)
    for rank in record.ranks:
        if rank.start_s is not None:
            offset = rank.start_s
        else:
            offset = end - rank.started_before_end_s if rank.started_before_end_s is not None else 0.0
        rank_end = offset + (rank.end_s if rank.end_s is not None else max(rank.milestones.values(), default=0.0))
        starts = {"started": offset, **{p: offset + s for p, s in rank.milestones.items()}}
        # The rank blamed is marked where it failed; the others that exited with it (its echoes)
        # where they stopped. Without a culprit every failed exit is marked as a failure.
        stopped = rank.exit_code not in (None, 0) or rank.state in ("exited", "dead")
        failed = rank.failed or (stopped and not blamed)
        rows.append({"label": f"r{rank.rank} {rank.host}".strip(), "bars": _segments(starts, rank_end, RANK_PHASES),
                     "failed_at": round(rank_end, 1) if failed else None,
                     "stopped_at": round(rank_end, 1) if stopped and not failed else None})
    if record.outcome == "failed" and rows and not any(r["failed_at"] is not None for r in rows):
        rows[0]["failed_at"] = round(end, 1)  # a failure no rank shows (an earlier phase, a stall): on the deploy row
    title = f"{record.lane} boot #{record.boot} ({record.time}): {record.outcome}"
    if record.cause and (record.cause.signature or record.cause.title):
        title += f" — {record.cause.signature or record.cause.title}"
    drawn = {b["phase"] for r in rows for b in r["bars"]}
    legend = [p for p in dict.fromkeys((*PHASES, *RANK_PHASES)) if p in drawn]
    return {"kind": "boot", "title": title, "rows": rows, "legend": legend,
            "colors": {p: COLORS[p] for p in legend}, "end": round(end, 1)}


def _duration(record: LedgerRecord) -> float | None:
    """The same measure for every bar: the boot, i.e. the ready phase's wait. A ready deploy's wait
    gives its boot_s; a failed boot has none, and its ready phase is the wait until the failure was
    named (the whole deploy would add image, weights and ranks to the red bars only). A failure before
    any wait (an earlier phase) has no boot to show: its bar is the phases it ran."""
    if record.boot_s is not None:
        return record.boot_s
    if record.phases.get("ready"):
        return round(record.phases["ready"], 1)
    total = sum(record.phases.values())
    return round(total, 1) if total else None


def history_chart(records: Sequence[LedgerRecord]) -> dict[str, Any]:
    """The ledger across time: each deploy's (or watch heal's) duration, coloured by its outcome, failures marked."""
    points = []
    for record in records:
        if record.event not in ("deploy", "watch"):
            continue
        if record.event == "watch" and record.outcome in ("healthy", "probe-failed"):
            continue  # every probe would drown the boots; restarts, heals and give-ups stay
        kind = "good" if record.good else ("bad" if record.outcome in ("failed", "gave-up", "not-restartable")
                                           else "other")
        # A deploy whose wait never ran (an earlier phase failed): its bar is its phases, drawn apart from the boots.
        before_boot = record.event == "deploy" and record.boot_s is None and not record.phases.get("ready")
        points.append({"boot": record.boot, "time": record.time, "duration_s": _duration(record),
                       "before_boot": before_boot,
                       "outcome": record.outcome, "event": record.event, "color": OUTCOME_COLORS[kind],
                       "label": (record.cause.signature if record.cause and record.cause.signature else "")})
    lane = records[0].lane if records else ""
    return {"kind": "history", "title": f"{lane}: boot durations and outcomes across the ledger", "points": points}
