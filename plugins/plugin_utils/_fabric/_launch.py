# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The fabric probe's containers, from the lane's plan, and what they printed.

One job: the launch. The probe's world is one process per node of the lane, in the order of the
nodes' first ranks (the head's node is probe rank 0, and its fabric address the master address,
as the lane's ranks meet). Each node's probe container is that node's first model rank as the plan
starts it: the same image, environment (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, NCCL_IB_HCA, the
profile's NCCL settings), host network and IPC, devices, GPU request, capabilities and limits,
only the program differs: ``python3 -c <_probe.py> <arguments as JSON>``, an argv list (no shell).
A P/D lane's router, which joins no collective, is left out.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

PROBE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_probe.py")
MARK = "LANEKIT_FABRIC_RESULT "
# Container options taken from the rank as they are (community.docker.docker_container names).
RANK_OPTIONS = ("image", "env", "network_mode", "ipc_mode", "devices", "ulimits", "capabilities", "shm_size",
                "device_requests", "groups", "security_opts")
# nccl-tests' size column (bytes). GPUs: up to 1 GiB, where a link's busbw has flattened out in
# nccl-tests' tables, without the 16 GiB NVIDIA's Spark check gathers (which froze a Spark with a
# desktop session: dgx-spark-playbooks issue 102). CPU nodes: gloo copies through the host's cores.
DEFAULT_SIZES = {"nccl": [16 * 2**20, 256 * 2**20, 2**30], "gloo": [2**20, 16 * 2**20, 64 * 2**20]}


def probe_source() -> str:
    with open(PROBE_FILE, encoding="utf-8") as handle:
        return handle.read()


# Accelerators whose collectives are not NCCL/RCCL (TPU: XLA over ICI/DCN, Intel XPU: oneCCL, Ascend:
# HCCL): the probe's torch.distributed measures their nodes' host network with gloo, which is the
# link the lane's ranks rendezvous over; their device fabric is not measured (docs/fabric.md).
HOST_NETWORK_KINDS = ("tpu", "xpu", "npu", "cpu")


def backend(plan: dict[str, Any]) -> str:
    """nccl on NVIDIA and AMD GPU nodes (RCCL answers to the same name in ROCm's torch), gloo on CPU nodes and
    on accelerators with their own collectives library (HOST_NETWORK_KINDS)."""
    profile = plan.get("hardware_profile") or {}
    if (profile.get("recognition") or {}).get("kind") in HOST_NETWORK_KINDS:
        return "gloo"
    return "nccl" if profile.get("gpu_name") else "gloo"


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """[{probe_rank, host, rank}] one per node holding a model rank, the head's node first."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for rank in sorted(plan.get("ranks") or [], key=lambda r: int(r["node_rank"])):
        if rank.get("role") == "router" or rank["host"] in seen:
            continue
        seen.add(rank["host"])
        out.append({"probe_rank": len(out), "host": rank["host"], "rank": rank})
    return out


def container_name(lane: str) -> str:
    return f"lanekit-{lane}-fabric"


def specs(plan: dict[str, Any], *, sizes: list[int] | None, iters: int, timeout_s: int, port: int | None,
          floor: dict[str, Any], pairs: str = "auto") -> dict[str, Any]:
    """{backend, world, master_addr, master_port, sizes, nodes: {host: {probe_rank, container}}}."""
    world = nodes(plan)
    if not world:
        raise LanekitError(f"lane {plan.get('lane')}: the plan has no model rank, so there is no fabric to measure.")
    head = world[0]["rank"]
    address = head.get("fabric_ip")
    if not address:
        raise LanekitError(f"lane {plan.get('lane')}: rank 0 ({head['host']}) has no fabric_ip, the address the probe's "
                           f"ranks meet at; set fabric_ip in the inventory for {head['host']}.")
    chosen = backend(plan)
    sizes = sorted({int(s) for s in (sizes or DEFAULT_SIZES[chosen])})
    if any(s < 4 * len(world) for s in sizes) or iters < 1 or timeout_s < 10:
        raise LanekitError(
            f"fabric_sizes {sizes}, fabric_iters {iters} and fabric_timeout_s {timeout_s} cannot measure a link: each "
            f"size must be at least {4 * len(world)} bytes, iters at least 1 and the timeout at least 10 s.")
    master_port = int(port or (plan.get("rendezvous_port") or 29500) + 1)
    source = probe_source()
    out: dict[str, Any] = {}
    for node in world:
        container = node["rank"].get("container") or {}
        args = {"rank": node["probe_rank"], "world": len(world), "master_addr": address, "master_port": master_port,
                "backend": chosen, "sizes": sizes, "iters": iters, "warmup": 2 if iters > 1 else 1,
                "timeout_s": timeout_s, "pairs": pairs, "floor_gbps": floor.get("gbps"),
                "floor_op": floor.get("op", "all_gather")}
        options = {key: container[key] for key in RANK_OPTIONS if key in container}
        options.update(
            name=container_name(str(plan.get("lane"))), entrypoint=["python3"],
            command=["-c", source, json.dumps(args, sort_keys=True)],
            labels={"io.lanekit.fabric-probe": str(plan.get("lane")), "io.lanekit.fabric-rank": str(node["probe_rank"])},
            env={**(container.get("env") or {}), "PYTHONUNBUFFERED": "1"})
        out[node["host"]] = {"probe_rank": node["probe_rank"], "node_rank": int(node["rank"]["node_rank"]),
                             "container": options}
    return {"backend": chosen, "world": len(world), "master_addr": address, "master_port": master_port,
            "sizes": sizes, "iters": iters, "nodes": out}


def parse_output(host: str, probe_rank: int, task: dict[str, Any] | None) -> dict[str, Any]:
    """The probe's result from the node's docker_container task result, or a ``failed`` or ``cannot_run``
    result that says why there is none."""
    base = {"rank": probe_rank, "host": host}
    if not task:
        return {**base, "status": "failed", "reason": f"{host} did not report (unreachable, or its task did not run)"}
    container = task.get("container") or {}
    text = "\n".join(str(part) for part in (container.get("Output"), task.get("msg"), task.get("stderr")) if part)
    for line in reversed(text.splitlines()):
        if line.startswith(MARK):
            try:
                found = json.loads(line[len(MARK):])
            except ValueError:
                break
            return {**found, **base}
    if re.search(r"executable file not found|python3: not found|no such file or directory", text, re.I):
        return {**base, "status": "cannot_run", "reason": "the image has no python3 to run the probe"}
    if task.get("timeout") or "async task did not complete" in text.lower() or "timed out" in text.lower():
        return {**base, "status": "failed", "reason": f"the probe on {host} did not finish in time"}
    tail = " | ".join(text.strip().splitlines()[-3:])[-400:] or "no output"
    return {**base, "status": "failed", "reason": f"the probe on {host} printed no result ({tail})"}
