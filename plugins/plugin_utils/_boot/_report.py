# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What a user reads about a lane's boot: labels, durations, the failure message, the rank table.

One job: words and tables. The tracker (``_boot``) decides; this module only formats rank
statuses (:class:`~._rankstatus.RankStatus`) and verdicts for the status line, the failure
message and the per-rank table of the status playbook.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _signatures as sigs
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rankstatus import RankStatus

# Short labels for the status line, long ones for tables and messages.
SHORT = {
    "missing": "missing",
    "created": "created",
    "started": "started",
    "rendezvous": "rendezvous",
    "loading": "loading",
    "barrier": "barrier",
    "kv_profile": "kv-profile",
    "graph_capture": "graphs",
    "warmup": "warm-up",
    "ready": "up",
}
LONG = {
    "missing": "no container",
    "created": "container created",
    "started": "container started",
    "rendezvous": "rendezvous",
    "loading": "loading shards",
    "barrier": "post-load barrier",
    "kv_profile": "KV profiling",
    "graph_capture": "graph capture",
    "warmup": "warm-up",
    "ready": "up",
}

# States with no exit code to show.
_LIVE_STATES = ("running", "created", "missing", "unknown")


def fmt_duration(seconds: float | None) -> str:
    """'45s', '12m05s', '1h20m'."""
    if seconds is None:
        return "?"
    seconds = int(round(max(0.0, seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def fmt_ranks(ranks: Sequence[int]) -> str:
    """[1, 2, 4, 5, 7] -> 'r1-2,4-5,7'."""
    ordered = sorted(set(ranks))
    if not ordered:
        return ""
    parts: list[str] = []
    start = prev = ordered[0]
    for rank in ordered[1:]:
        if rank == prev + 1:
            prev = rank
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = rank
    parts.append(str(start) if start == prev else f"{start}-{prev}")
    return "r" + ",".join(parts)


def rank_label(status: RankStatus, long: bool = False) -> str:
    """What the status line says about one rank: 'loading 37/64 (58%)', 'EXITED(1)'."""
    state = status.state
    if state not in _LIVE_STATES:
        text = f"EXITED({status.exit_code})" if state in ("exited", "dead") else state.upper()
        return text + (" OOM" if status.oom_killed else "")
    if state == "unknown":
        return "no-status"
    phase = status.phase
    label = (LONG if long else SHORT)[phase]
    if phase == "loading" and status.shards:
        done, total = status.shards
        label += f" {done}/{total}" + (f" ({status.shard_pct}%)" if long or done < total else "")
    elif phase == "graph_capture" and status.capture:
        done, total = status.capture
        label += f" {done}/{total}"
    elif phase == "ready" and status.is_head:
        label = "API up" if long else "up(api)"
    return label


def memory_note(statuses: Mapping[int, RankStatus]) -> str:
    """'MemFree min 1.6G r5': the tightest node's free memory (on unified memory, what the GPU gets)."""
    free = {r: s.mem_free_kb for r, s in statuses.items() if s.mem_free_kb is not None}
    if not free:
        return ""
    low = min(free.values())
    ranks = sorted(r for r, kb in free.items() if kb == low)
    return f"MemFree min {low / 1048576:.1f}G {fmt_ranks(ranks)}"


def failure_message(lane: str, verdict: Any, hosts: Mapping[int, str], bundle: str = "",
                    poll_s: float | None = None) -> str:
    """The sentence(s) a user reads when the wait fails (``verdict`` is a ``_boot.Verdict``)."""
    lines = [f"Lane {lane} failed to boot: {verdict.summary}."]
    if verdict.culprits:
        lines.append(f"Blamed: {sigs.rank_names(verdict.culprits, hosts)}.")
    if verdict.noticed_after_s is not None:
        polls = verdict.polls_after_exit
        lines.append(f"Noticed {verdict.noticed_after_s:.1f} s after the first rank exited"
                     + (f", at poll {polls} after the exit" if polls else "")
                     + (f" (one poll every {poll_s:g} s)" if poll_s else "") + ".")
    for match in verdict.matches:
        lines.append(sigs.describe(match, hosts))
    if bundle:
        lines.append(f"Logs, docker state, the plan and host memory are in {bundle}; "
                     "the containers were left in place.")
    return "\n".join(lines)


def _plan_match(status: RankStatus) -> str:
    """'current' when the container carries the plan's spec hash, 'differs' when not, '-' unknown."""
    have = next((v for k, v in status.labels.items() if k.endswith(("spec-hash", "spec_hash"))), None)
    if not status.planned_spec_hash or have is None:
        return "-"
    return "current" if have == status.planned_spec_hash else "differs"


def table_rows(statuses: Mapping[int, RankStatus]) -> list[dict[str, str]]:
    """One row per rank (rank order) as the table shows it.

    A rank that is not running shows no phase: its log's last phase is history, not the present.
    A rank without a report (its node did not answer) is ``unreachable``.
    """
    rows = []
    for rank in sorted(statuses):
        s = statuses[rank]
        if s.state == "unknown":
            state = "unreachable" if s.gather_error else "unknown"
        elif s.state in _LIVE_STATES:
            state = s.state
        else:
            state = f"{s.state}({s.exit_code})" + (" OOM" if s.oom_killed else "")
        if s.running:
            phase = rank_label(s, long=True)
        elif s.state in ("missing", "created"):
            phase = LONG[s.state]
        else:
            phase = "-"
        rows.append({
            "rank": f"r{rank}", "host": s.host, "container": s.container, "state": state, "phase": phase,
            "uptime": fmt_duration(s.uptime_s) if s.uptime_s is not None else "-",
            "restarts": str(s.restart_count), "plan": _plan_match(s), "image": s.image or "-",
        })
    return rows


def render_table(statuses: Mapping[int, RankStatus], lane: str = "") -> list[str]:
    """Per-rank table: rank, host, container, state, phase, uptime, restarts, plan, image."""
    header = ("rank", "host", "container", "state", "phase", "uptime", "restarts", "plan", "image")
    rows = [header] + [tuple(row[key] for key in header) for row in table_rows(statuses)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    out = [f"lane {lane}"] if lane else []
    for row in rows:
        out.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return out
