# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What runs where: the lanes and other GPU holders found on a cluster's nodes, in one table.

One job: from each node's containers (``docker inspect`` objects) and GPU processes, tell which
lanekit lanes run where (by the containers' ``io.lanekit.*`` labels), in what state, and what
else holds the GPUs (containers asking for GPUs, processes the GPU query lists). The node-side
module (``node_workloads``) gathers; this module classifies and formats.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

LABEL_PREFIXES = ("io.lanekit", "lanekit")


def label(labels: Mapping[str, str] | None, key: str) -> str | None:
    for prefix in LABEL_PREFIXES:
        value = (labels or {}).get(f"{prefix}.{key}")
        if value not in (None, ""):
            return value
    return None


def wants_gpu(obj: Mapping[str, Any]) -> str:
    """Why a container holds GPUs ('gpus requested', 'nvidia runtime', 'NVIDIA_VISIBLE_DEVICES=0'), or ''."""
    host = obj.get("HostConfig") or {}
    for request in host.get("DeviceRequests") or []:
        caps = [c for group in (request.get("Capabilities") or []) for c in (group or [])]
        if "gpu" in caps or request.get("Driver") == "nvidia":
            count = request.get("Count")
            ids = request.get("DeviceIDs") or []
            which = ",".join(ids) if ids else ("all" if count == -1 else str(count))
            return f"gpus={which}"
    if host.get("Runtime") == "nvidia":
        return "nvidia runtime"
    for item in (obj.get("Config") or {}).get("Env") or []:
        key, _sep, value = str(item).partition("=")
        if key == "NVIDIA_VISIBLE_DEVICES" and value not in ("", "void", "none"):
            return f"NVIDIA_VISIBLE_DEVICES={value}"
    return ""


@dataclass
class Workload:
    """One thing on one node: a lane's rank container, another container or a GPU process."""

    host: str
    kind: str  # "rank", "container", "process", "node"
    name: str
    state: str
    lane: str = ""
    rank: int | None = None
    plan_hash: str = ""
    image: str = ""
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Overview:
    """Every workload of a cluster, and the lanes summarised."""

    workloads: list[Workload] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)

    def lanes(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for w in self.workloads:
            if w.kind != "rank":
                continue
            lane = out.setdefault(w.lane, {"lane": w.lane, "ranks": {}, "hosts": [], "plan_hashes": [], "states": {}})
            lane["ranks"][str(w.rank)] = {"host": w.host, "state": w.state, "container": w.name}
            if w.host not in lane["hosts"]:
                lane["hosts"].append(w.host)
            if w.plan_hash and w.plan_hash not in lane["plan_hashes"]:
                lane["plan_hashes"].append(w.plan_hash)
            lane["states"][w.state] = lane["states"].get(w.state, 0) + 1
        for lane in out.values():
            lane["hosts"].sort()
            total = sum(lane["states"].values())
            running = lane["states"].get("running", 0)
            lane["state"] = ("running" if running == total else "stopped" if running == 0 else "partly running")
            lane["summary"] = f"{running}/{total} ranks running"
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"lanes": self.lanes(), "workloads": [w.to_dict() for w in self.workloads],
                "unreachable": dict(self.unreachable)}


def classify(host: str, result: Mapping[str, Any]) -> list[Workload]:
    """One node's ``node_workloads`` result as workloads (rank containers, GPU holders)."""
    out: list[Workload] = []
    for obj in result.get("containers") or []:
        config = obj.get("Config") or {}
        labels = config.get("Labels") or {}
        name = str(obj.get("Name") or "").lstrip("/")
        state = (obj.get("State") or {}).get("Status") or "unknown"
        if state == "exited":
            state = f"exited({(obj.get('State') or {}).get('ExitCode')})"
        lane = label(labels, "lane")
        if lane:
            rank = label(labels, "rank")
            out.append(Workload(host, "rank", name, state, lane=lane,
                                rank=int(rank) if rank and rank.isdigit() else None,
                                plan_hash=label(labels, "plan-hash") or "", image=config.get("Image") or ""))
            continue
        gpu = wants_gpu(obj)
        running = (obj.get("State") or {}).get("Running")
        if gpu or running:
            out.append(Workload(host, "container", name, state, image=config.get("Image") or "",
                                detail=gpu or "no GPU request seen"))
    for proc in result.get("gpu_processes") or []:
        if proc.get("container"):
            continue  # already listed as its container
        memory = proc.get("used_memory_mib")
        out.append(Workload(host, "process", f"pid {proc.get('pid')} {proc.get('name') or '?'}", "running",
                            detail=f"{memory} MiB GPU memory" if memory is not None else "GPU process"))
    if result.get("gpu_query_error"):
        out.append(Workload(host, "node", "GPU query", "-", detail=result["gpu_query_error"]))
    return out


def other_lanes(workloads: Sequence[Workload], lane: str) -> list[str]:
    """'lane L (r3 running)' for each other lane whose rank runs on this node: it holds the GPU."""
    found: dict[str, list[str]] = {}
    for w in workloads:
        if w.kind == "rank" and w.lane != lane and w.state == "running":
            found.setdefault(w.lane, []).append(f"r{w.rank}")
    return [f"lane {name} ({', '.join(ranks)} running)" for name, ranks in sorted(found.items())]


def other_lane_names(workloads: Sequence[Workload], lane: str) -> list[str]:
    """The names of the other lanes whose ranks run on this node (what a replacement tears down)."""
    return sorted({w.lane for w in workloads if w.kind == "rank" and w.lane != lane and w.state == "running"})


def overview(found: Mapping[str, Mapping[str, Any] | None]) -> Overview:
    """Every node's result ({host: registered node_workloads result}) as one overview."""
    view = Overview()
    for host in sorted(found):
        res = found[host] or {}
        if res.get("unreachable") or res.get("failed") or res.get("skipped"):
            msg = str(res.get("msg") or ("skipped" if res.get("skipped") else "no answer")).splitlines() or ["no answer"]
            view.unreachable[host] = msg[0][:160]
            continue
        view.workloads.extend(classify(host, res))
    return view


def render(view: Overview) -> list[str]:
    """The lanes summarised, then one table of every workload node by node."""
    lines = []
    lanes = view.lanes()
    for name in sorted(lanes):
        lane = lanes[name]
        plans = ",".join(h[:12] for h in lane["plan_hashes"]) or "-"
        lines.append(f"lane {name}: {lane['state']}, {lane['summary']} on {', '.join(lane['hosts'])} (plan {plans})")
    if not lanes:
        lines.append("no lanekit lane found on the nodes")
    header = ("node", "workload", "kind", "state", "detail")
    rows: list[Sequence[str]] = [header]
    for w in sorted(view.workloads, key=lambda w: (w.host, w.kind != "rank", w.lane, w.rank or 0, w.name)):
        what = f"{w.lane} r{w.rank}" if w.kind == "rank" else w.name
        detail = w.detail or (f"plan {w.plan_hash[:12]}" if w.plan_hash else w.image)
        rows.append((w.host, what, "lane" if w.kind == "rank" else w.kind, w.state, detail or "-"))
    for host, why in sorted(view.unreachable.items()):
        rows.append((host, "-", "node", "unreachable", why))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    for row in rows:
        lines.append("  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return lines
