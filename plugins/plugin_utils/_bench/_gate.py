# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The bench's validity gate: is a measurement a result, or only a record?

Before the run every rank must be up on the plan's hash and the API must answer; after it the
same ranks must still run the same containers (no restart: same StartedAt and RestartCount), the
API must still answer, and the tools must say their run completed with no failed sample. Each
problem is one sentence; a run with any is kept on disk but marked invalid.
"""
from __future__ import annotations

from typing import Any

PLAN_HASH_LABEL = "io.lanekit.plan-hash"


def rank_snapshot(plan: dict[str, Any], containers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per planned rank from ``rank_status`` results (``containers`` from every node:
    {name, exists, inspect}): running, started_at, restart_count, the plan-hash label."""
    by_name = {c.get("name"): c for c in containers if isinstance(c, dict)}
    out = []
    for spec in plan.get("ranks") or []:
        entry = by_name.get(spec.get("container_name")) or {}
        inspect = entry.get("inspect") or {}
        state = inspect.get("State") or {}
        labels = (inspect.get("Config") or {}).get("Labels") or {}
        out.append({
            "rank": int(spec.get("node_rank", 0)), "host": spec.get("host", ""),
            "container": spec.get("container_name", ""),
            "exists": bool(entry.get("exists")) and bool(inspect),
            "running": bool(state.get("Running")),
            "started_at": state.get("StartedAt") or "",
            "restart_count": int(inspect.get("RestartCount") or 0),
            "plan_hash": labels.get(PLAN_HASH_LABEL) or labels.get("lanekit.plan-hash") or "",
            "reachable": not entry.get("unreachable", False),
        })
    return out


def check_before(lane: str, plan_hash: str, ranks: list[dict[str, Any]], api: dict[str, Any]) -> list[str]:
    """Problems that forbid starting a run (empty: go)."""
    problems = []
    if not ranks:
        problems.append(f"Lane {lane} has no planned ranks; re-plan it with this collection.")
    for r in ranks:
        if not r.get("reachable", True):
            problems.append(f"Rank {r['rank']} of lane {lane}: node {r['host']} did not answer.")
        elif not r["exists"]:
            problems.append(f"Rank {r['rank']} of lane {lane} has no container {r['container']} on {r['host']}: "
                            f"deploy the lane first (ansible-playbook lanekit.serving.deploy_lane -i <inventory> "
                            f"-e lane={lane}).")
        elif not r["running"]:
            problems.append(f"Rank {r['rank']} of lane {lane} ({r['container']} on {r['host']}) is not running: "
                            f"see ansible-playbook lanekit.serving.status_lane -i <inventory> -e lane={lane}.")
        elif r["plan_hash"] != plan_hash:
            problems.append(f"Rank {r['rank']} of lane {lane} runs plan {r['plan_hash'][:12] or 'unknown'}, not "
                            f"{plan_hash[:12]}: redeploy the lane so every rank runs the current plan.")
    if not api.get("ok"):
        problems.append(f"The API of lane {lane} at {api.get('url', '?')} did not answer: {api.get('error') or 'no reply'}.")
    return problems


def check_after(lane: str, before: list[dict[str, Any]], after: list[dict[str, Any]], api: dict[str, Any],
                tool: dict[str, Any]) -> list[str]:
    """Problems that make a finished run invalid (empty: the run is a result).

    ``tool``: {rc, status, samples, failed, error} from the tool's result.json (or its absence).
    """
    problems = []
    then = {r["rank"]: r for r in before}
    for r in after:
        old = then.get(r["rank"])
        if old is None:
            continue
        if not r.get("reachable", True):
            problems.append(f"Rank {r['rank']}: node {r['host']} did not answer after the run.")
        elif not r["running"]:
            problems.append(f"Rank {r['rank']} ({r['container']} on {r['host']}) stopped during the run.")
        elif r["started_at"] != old["started_at"] or r["restart_count"] != old["restart_count"]:
            problems.append(f"Rank {r['rank']} ({r['container']} on {r['host']}) restarted during the run "
                            f"(started {old['started_at'] or '?'}, now {r['started_at'] or '?'}; restarts "
                            f"{old['restart_count']} -> {r['restart_count']}).")
        elif r["plan_hash"] != old["plan_hash"]:
            problems.append(f"Rank {r['rank']} changed plan during the run ({old['plan_hash'][:12]} -> "
                            f"{r['plan_hash'][:12]}).")
    if not api.get("ok"):
        problems.append(f"The API of lane {lane} did not answer after the run: {api.get('error') or 'no reply'}.")
    if tool.get("error"):
        problems.append(tool["error"])
    elif tool.get("rc") not in (0, None):
        problems.append(f"tool-eval-bench exited with code {tool['rc']}.")
    if not tool.get("error"):
        if tool.get("status") != "completed":
            problems.append(f"tool-eval-bench reported status {tool.get('status')!r}, not 'completed'.")
        if tool.get("failed"):
            problems.append(f"{tool['failed']} of {tool.get('samples', '?')} throughput samples failed.")
        if not tool.get("samples"):
            problems.append("The throughput grid produced no sample.")
    return problems
