# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Is the lane serving? The status playbook's verdict from every rank's status and the API probe.

One job: decide the one word an operator (or cron) reads first: serving, degraded, down, not
deployed or booting; and, when the lane is not serving, the first cause in time order (the rank
that exited first with its exit code and known failure signature, or the node that did not
answer) and the command that fixes it. Also the JSON document of ``lanekit.serving.status_lane -e
status_format=json``.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _signatures as sigs
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rankstatus import (
    RankStatus,
    exit_order,
    fabric_ips,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._report import (
    fmt_duration,
    fmt_ranks,
    rank_label,
    table_rows,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._tracker import readiness

SERVING = "serving"
DEGRADED = "degraded"
DOWN = "down"
NOT_DEPLOYED = "not deployed"
BOOTING = "booting"
VERDICTS = (SERVING, DEGRADED, DOWN, NOT_DEPLOYED, BOOTING)
# The JSON document's shape version: bump it when a key changes meaning or goes away.
DOCUMENT_VERSION = 1


@dataclass
class LaneVerdict:
    """The lane's verdict and what an operator needs to act on it."""

    lane: str
    verdict: str
    api: str = ""
    progress: str = ""
    cause: str = ""
    fix: str = ""
    culprits: list[int] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    signatures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def serving(self) -> bool:
        return self.verdict == SERVING

    @property
    def line(self) -> str:
        """The first line of the status: 'lane L: down | API ...' and the boot's progress."""
        parts = [f"lane {self.lane}: {self.verdict}"]
        if self.progress:
            parts.append(self.progress)
        if self.api:
            parts.append(self.api)
        return " | ".join(parts)

    def lines(self) -> list[str]:
        out = [self.line]
        if self.cause:
            out.append(f"cause: {self.cause}")
        if self.fix:
            out.append(f"fix: {self.fix}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "lane": self.lane, "verdict": self.verdict, "serving": self.serving, "line": self.line,
            "api": self.api, "progress": self.progress, "cause": self.cause, "fix": self.fix,
            "culprits": list(self.culprits), "unreachable": list(self.unreachable),
            "signatures": list(self.signatures),
        }


def api_summary(statuses: Mapping[int, RankStatus]) -> str:
    """'API /health 200, model listed' from the head's probe ('API not probed' without one)."""
    heads = [s for s in statuses.values() if s.is_head and s.probes.get("api")]
    if not heads:
        return "API not probed (no head reported)"
    api = heads[0].probes["api"]
    if not api.get("accepts"):
        error = api.get("error") or "connection refused"
        return f"API refuses connections ({error})"
    text = f"API /health {api.get('health_status')}"
    text += ", model listed" if api.get("model_listed") else ", model not listed"
    return text


def is_unreachable(status: RankStatus) -> bool:
    """No report for this rank: its node did not answer (state unknown)."""
    return status.state == "unknown"


def deploy_command(lane: str, inventory: str) -> str:
    return f"ansible-playbook lanekit.serving.deploy_lane -i {inventory or 'inventories/<cluster>'} -e lane={lane}"


def logs_command(lane: str, inventory: str, rank: int) -> str:
    return (f"ansible-playbook lanekit.serving.logs_lane -i {inventory or 'inventories/<cluster>'} -e lane={lane} "
            f"-e logs_ranks={rank}")


def _progress(statuses: Mapping[int, RankStatus]) -> str:
    """'r0 loading 37/64 (58%), r1-7 up' plus how long the boot has run."""
    groups: dict[str, list[int]] = {}
    for rank in sorted(statuses):
        groups.setdefault(rank_label(statuses[rank]), []).append(rank)
    ordered = sorted(groups.items(), key=lambda item: item[1][0])
    text = ", ".join(f"{fmt_ranks(ranks)} {label}" for label, ranks in ordered)
    ages = [s.started_age_s for s in statuses.values() if s.started_age_s is not None]
    if ages:
        text += f" ({fmt_duration(max(ages))} since the first rank started)"
    return text


def _first_exit(statuses: Mapping[int, RankStatus], stopped: Sequence[int]) -> int:
    """The rank that stopped first, a rank with a cause of its own before its echoes
    (:func:`~._rankstatus.exit_order`)."""
    return exit_order(statuses, stopped)[0]


def _exit_cause(statuses: Mapping[int, RankStatus], rank: int, others: Sequence[int],
                hosts: Mapping[int, str]) -> tuple[str, list[sigs.SignatureMatch]]:
    status = statuses[rank]
    where = sigs.rank_names([rank], hosts)
    if status.state in ("missing", "created"):
        text = f"{where} has no running container ({'never started' if status.state == 'created' else 'removed'})"
        return text, [sigs.derived("container_missing", [rank])]
    text = f"{where} exited first with code {status.exit_code}"
    if status.exit_code == 137 and not status.oom_killed:
        text += " (SIGKILL)"
    if status.finished_age_s is not None:
        text += f" {fmt_duration(status.finished_age_s)} ago"
    matches = sigs.collect({rank: status.signatures}, fabric_ips(statuses)) if status.signatures else []
    if status.oom_killed:
        matches.insert(0, sigs.derived("oom_killed", [rank]))
    if matches:
        first = matches[0]
        text += f"; signature [{first.id}] {first.signature.title}"
        if first.evidence:
            text += f': "{first.evidence}"'
        if first.blamed and first.blamed != [rank]:
            text += f"; the line blames {sigs.rank_names(first.blamed, hosts)}"
    else:
        matches = [sigs.derived("container_exited", [rank])]
        if status.last_exception:
            text += f'; last error: "{status.last_exception}"'
        else:
            text += " (no known failure line in its log)"
    if others:
        text += f"; then {fmt_ranks(others)} stopped too"
    return text, matches


def decide(lane: str, engine: str | None, statuses: Mapping[int, RankStatus], inventory: str = "") -> LaneVerdict:
    """The verdict of a lane from every rank's status (after ``LaneTracker.infer``)."""
    redeploy = deploy_command(lane, inventory)
    if not statuses or all(s.state == "missing" for s in statuses.values()):
        return LaneVerdict(lane, NOT_DEPLOYED, cause=f"no container of lane {lane} exists on its nodes",
                           fix=redeploy)
    hosts = {r: s.host for r, s in statuses.items()}
    api = api_summary(statuses)
    api_ok, missing_probe = readiness(engine, statuses, chat_required=False)
    silent = sorted(r for r, s in statuses.items() if is_unreachable(s))
    stopped = sorted(r for r, s in statuses.items() if not s.running and not is_unreachable(s))
    broken = DEGRADED if api_ok else DOWN
    if silent:
        nodes = sorted({statuses[r].host for r in silent if statuses[r].host})
        errors = sorted({statuses[r].gather_error for r in silent if statuses[r].gather_error})
        cause = (f"node {', '.join(nodes)} unreachable ({fmt_ranks(silent)} unknown)"
                 + (f": {errors[0]}" if errors else ""))
        if stopped:
            cause += f"; {fmt_ranks(stopped)} stopped since"
        fix = f"bring {', '.join(nodes)} back (power, network, SSH), then: {redeploy}"
        return LaneVerdict(lane, broken, api=api, cause=cause, fix=fix, culprits=silent, unreachable=nodes)
    if stopped:
        first = _first_exit(statuses, stopped)
        cause, matches = _exit_cause(statuses, first, [r for r in stopped if r != first], hosts)
        if matches[0].signature.derived:
            # The wait's fix points at its failure bundle; a status points at the live log.
            fix = f"read its log: {logs_command(lane, inventory, first)}; then: {redeploy}"
        else:
            fix = matches[0].signature.fix.rstrip(".") + f"; then: {redeploy}"
        # A line naming the peer that went away (gloo's "Connection closed by peer [IP]") blames it.
        culprits = list(matches[0].blamed) or [first]
        return LaneVerdict(lane, broken, api=api, cause=cause, fix=fix, culprits=culprits,
                           signatures=[m.to_dict() for m in matches])
    if api_ok:
        return LaneVerdict(lane, SERVING, api=api)
    fatal = [m for m in sigs.collect({r: s.signatures for r, s in statuses.items()}, fabric_ips(statuses))
             if m.signature.fatal]
    if fatal:
        top = fatal[0]
        cause = f"[{top.id}] {top.signature.title} on {sigs.rank_names(top.ranks, hosts)}"
        if top.evidence:
            cause += f': "{top.evidence}"'
        if top.blamed:
            cause += f"; the line blames {sigs.rank_names(top.blamed, hosts)}"
        return LaneVerdict(lane, DOWN, api=api, cause=cause, fix=top.signature.fix.rstrip(".") + f"; then: {redeploy}",
                           culprits=list(top.blamed or top.ranks), signatures=[m.to_dict() for m in fatal])
    heads_up = [s for s in statuses.values() if s.is_head and s.phase == "ready"]
    if heads_up:
        # The head's log says up, yet its API fails the probe: no boot left to wait for.
        return LaneVerdict(lane, DOWN, api=api, cause=f"the head logged that it is up but {missing_probe}",
                           fix=f"read the head's log (lanekit.serving.logs_lane -e logs_ranks=0), then: {redeploy}",
                           culprits=[heads_up[0].rank])
    return LaneVerdict(lane, BOOTING, api=api, progress=_progress(statuses))


def document(verdict: LaneVerdict, statuses: Mapping[int, RankStatus], table: Sequence[str]) -> dict[str, Any]:
    """The JSON document of a status: the verdict, one record per rank and the printed table."""
    rows = []
    shown = table_rows(statuses)
    for index, rank in enumerate(sorted(statuses)):
        s, row = statuses[rank], shown[index]
        rows.append({
            "rank": rank, "host": s.host, "container": s.container, "state": row["state"], "phase": row["phase"],
            "running": s.running, "exit_code": None if s.running else s.exit_code, "oom_killed": s.oom_killed,
            "uptime_s": s.uptime_s, "finished_age_s": s.finished_age_s, "restarts": s.restart_count,
            "plan": row["plan"], "image": s.image, "signatures": sorted(s.signatures), "error": s.gather_error,
        })
    return {"version": DOCUMENT_VERSION, **verdict.to_dict(), "ranks": rows, "table": list(table)}
