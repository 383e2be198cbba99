# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""When a fabric result still holds: the cache key.

One job: the key. A measurement stays valid for the lane while what it measured is unchanged:
the nodes (hosts, fabric addresses, order), the image (the pin every node holds: a new image may
bring another NCCL) and the fabric environment (every NCCL_*, GLOO_*, UCX_* and *_VISIBLE_DEVICES
variable, and the container's devices, GPU request, capabilities, limits, network and IPC mode),
plus the probe's sizes, iterations and version (not its port: the fabric is the same). The floor
is not in the key: a changed floor judges the stored figures again without measuring
(``_verdict``), and a re-run pays for a measurement only when the stored one no longer passes.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any

FABRIC_ENV = re.compile(r"^(NCCL_|GLOO_|UCX_|NVSHMEM_|RCCL_)|_VISIBLE_DEVICES$")
FABRIC_OPTIONS = ("network_mode", "ipc_mode", "devices", "device_requests", "capabilities", "ulimits", "shm_size",
                  "groups", "security_opts")


def fabric_env(env: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in sorted((env or {}).items()) if FABRIC_ENV.search(k)}


def material(plan: dict[str, Any], spec: dict[str, Any], probe_version: int) -> dict[str, Any]:
    """What the key is made of, kept in fabric.json so a changed key can be explained."""
    image = plan.get("image") or {}
    pin = image.get("pin") or {}
    nodes = []
    for host, node in sorted(spec["nodes"].items(), key=lambda item: item[1]["probe_rank"]):
        container = node["container"]
        nodes.append({"host": host, "probe_rank": node["probe_rank"],
                      "fabric_ip": next((r.get("fabric_ip") for r in plan.get("ranks") or [] if r.get("host") == host), None),
                      "env": fabric_env(container.get("env") or {}),
                      "options": {k: container.get(k) for k in FABRIC_OPTIONS if container.get(k) not in (None, [], "")}})
    return {"probe_version": probe_version, "lane": plan.get("lane"), "backend": spec["backend"],
            "image": {"ref": pin.get("ref") or image.get("ref"), "content_hash": pin.get("content_hash") or image.get("content_hash"),
                      "rootfs": pin.get("rootfs") or ""},
            "nodes": nodes, "sizes": spec["sizes"], "iters": spec["iters"]}


# Reasons a probe cannot run that belong to the image itself (its torch), which the key pins: such a
# result holds as long as the key does, so a lane whose image has no torch (a stand-in, a trimmed image)
# is told so once, not re-probed on every deploy. A missing GPU or a failed rendezvous is measured again.
IMAGE_REASONS = ("the image has no usable torch", "was built without torch.distributed")


def reusable(results: list[dict[str, Any]], status: str) -> bool:
    """Whether a stored result with the same key still holds without measuring: a pass, or a cannot_run
    that every node owes to the image."""
    if status == "pass":
        return True
    return status == "cannot_run" and bool(results) and all(
        r.get("status") == "cannot_run" and any(reason in str(r.get("reason") or "") for reason in IMAGE_REASONS)
        for r in results)


def key(material_: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(material_, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def changed(old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    """Which parts of the key moved since the stored result (for the line that says why it measures again)."""
    if not old:
        return ["no stored result"]
    out = [part for part in ("image", "backend", "sizes", "iters", "probe_version") if old.get(part) != new.get(part)]
    old_nodes = {n["host"]: n for n in old.get("nodes") or []}
    new_nodes = {n["host"]: n for n in new.get("nodes") or []}
    if set(old_nodes) != set(new_nodes) or [n["host"] for n in old.get("nodes") or []] != [n["host"] for n in new.get("nodes") or []]:
        out.append("nodes")
    else:
        out += [f"{host} {part}" for host, node in new_nodes.items() for part in ("fabric_ip", "env", "options")
                if old_nodes[host].get(part) != node.get(part)]
    return out
