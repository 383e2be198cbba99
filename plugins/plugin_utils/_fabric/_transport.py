# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Which transport NCCL really used, read from its NCCL_DEBUG=INFO lines, and whether the lane meant RDMA.

One job: the transport check. NCCL says what it chose in a few lines (NCCL 2.4 to 2.28 print them
alike): ``NCCL version 2.21.5+cuda12.4``; ``NET/IB : Using [0]mlx5_0:1/IB ; OOB ...`` or
``NET/IB : No device found.``; ``NET/Socket : Using [0]eth0:10.0.0.1<0>``; ``Using network IB`` or
``Using network Socket`` (the network it settled on); and one line per channel connection,
``Channel 03/0 : 5[5] -> 12[4] [send] via NET/IB/3`` (``NET/IBext_v8/2/GDRDMA`` with the RDMA plugin,
``NET/Socket/0`` over TCP, ``P2P/IPC/read`` or ``SHM/direct/direct`` inside a node). The fabric probe
runs one rank per node, so every channel it opens crosses the fabric.

A lane means RDMA when its ranks are given an HCA (NCCL_IB_HCA) or the RDMA devices
(/dev/infiniband), or the profile sets NCCL_IB_DISABLE=0 (DGX Spark), unless NCCL_IB_DISABLE=1 or
NCCL_NET=Socket says otherwise; ``lanekit_fabric_transport`` (rdma, socket, any) decides instead when set.
"""
from __future__ import annotations

import re
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

TRANSPORT_CHOICES = ("auto", "rdma", "socket", "any")

_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+[^\s]*)")
_NETWORK = re.compile(r"Using network (\S+)")
_VIA = re.compile(r"\bvia (\S+(?: pointer)?(?:/\S+)?)")
_CHANNEL = re.compile(r"Channel \d+(?:/\d+)? ?: (\d+)\[[0-9a-fx]+\] -> (\d+)\[[0-9a-fx]+\]")
_IB_USING = re.compile(r"NET/IB ?: Using (.+?)(?: ; OOB|$)")
_IB_VIRTUAL = re.compile(r"NET/IB ?: Made virtual device \[\d+\] name=(\S+)")
_SOCKET_USING = re.compile(r"NET/Socket ?: Using (.+)$")
_IB_NONE = re.compile(r"NET/IB ?: No device found|Failed to open libibverbs")
# Network plugins that move data by RDMA: NCCL's own IB (InfiniBand and RoCE), the IB plugin
# (IBext), AWS EFA's libfabric and other OFI plugins.
_RDMA_NETS = re.compile(r"^(IB|IBext|IBext_v\d+|AWS Libfabric|OFI|Libfabric)$", re.I)


def kind(via: str) -> str:
    """rdma, socket, p2p, shm, nvls, collnet or other for one channel's ``via`` text."""
    head, rest = via.split("/", 1)[0], via.partition("/")[2]
    if head == "NET":
        net = rest.split("/", 1)[0]
        if net == "Socket":
            return "socket"
        return "rdma" if _RDMA_NETS.match(net) else "other"
    return {"P2P": "p2p", "SHM": "shm", "NVLS": "nvls", "CollNet": "collnet"}.get(head, "other")


def parse(lines: list[str]) -> dict[str, Any]:
    """What NCCL's INFO lines say: version, the network it chose, the devices each network offered,
    and the channel transports by kind with a count each."""
    out: dict[str, Any] = {"nccl_version": None, "network": None, "ib_devices": [], "socket_devices": [],
                           "ib_missing": False, "channels": {}, "via": []}
    via_seen: set[str] = set()
    for raw in lines:
        line = raw.rstrip()
        if (match := _VERSION.search(line)) and not out["nccl_version"]:
            out["nccl_version"] = match.group(1)
        if match := _NETWORK.search(line):
            out["network"] = match.group(1)
        if _IB_NONE.search(line):
            out["ib_missing"] = True
        for pattern, key in ((_IB_USING, "ib_devices"), (_IB_VIRTUAL, "ib_devices"), (_SOCKET_USING, "socket_devices")):
            if match := pattern.search(line):
                for device in re.findall(r"\[\d+\]\s*(\S+)", match.group(1)) or [match.group(1).strip()]:
                    if device not in out[key]:
                        out[key].append(device)
        if _CHANNEL.search(line) and (match := _VIA.search(line)):
            via = match.group(1)
            out["channels"][kind(via)] = out["channels"].get(kind(via), 0) + 1
            via_seen.add(via)
    out["via"] = sorted(via_seen)
    return out


def used(summary: dict[str, Any]) -> str:
    """The transport that carried the traffic between nodes: rdma, socket, another kind, or '' when the
    lines do not say (gloo, or NCCL_DEBUG output missing)."""
    channels = summary.get("channels") or {}
    network = str(summary.get("network") or "")
    if channels.get("rdma"):
        return "rdma"
    if channels.get("socket"):
        return "socket"
    if network:
        return "socket" if network == "Socket" else ("rdma" if _RDMA_NETS.match(network) else network)
    for other in ("p2p", "shm", "nvls", "collnet", "other"):
        if channels.get(other):
            return other
    return ""


def expects_rdma(env: dict[str, str], devices: list[str], setting: str = "auto") -> bool:
    """Whether the lane means RDMA between its nodes (the module docstring says how that is read)."""
    if setting not in TRANSPORT_CHOICES:
        raise LanekitError(
            f"lanekit_fabric_transport is {setting!r}; expected one of {', '.join(TRANSPORT_CHOICES)} "
            f"(rdma: refuse a run over TCP sockets; socket or any: accept it; auto: read the env and devices of the lane).")
    if setting != "auto":
        return setting == "rdma"
    if env.get("NCCL_IB_DISABLE") == "1" or env.get("NCCL_NET", "").lower() == "socket":
        return False
    return bool(env.get("NCCL_IB_HCA")) or env.get("NCCL_IB_DISABLE") == "0" or any(
        str(d).split(":", 1)[0].startswith("/dev/infiniband") for d in devices)


def problem(summary: dict[str, Any], wants_rdma: bool, env: dict[str, str]) -> str:
    """One sentence when NCCL carried the traffic over sockets although the lane means RDMA, else ''."""
    got = used(summary)
    if not wants_rdma or got != "socket":
        return ""
    why = "NCCL found no RDMA device (its line: NET/IB : No device found)" if summary.get("ib_missing") else (
        f"NCCL chose network {summary.get('network') or 'Socket'}")
    meant = ", ".join(f"{k}={env[k]}" for k in ("NCCL_IB_HCA", "NCCL_IB_DISABLE") if env.get(k)) or "/dev/infiniband"
    return (f"NCCL carried the traffic between the nodes over TCP sockets ({', '.join(summary.get('via') or ['NET/Socket'])}) "
            f"although the lane means RDMA ({meant}): {why}.")


RDMA_FIX = (
    "give the rank containers the RDMA devices and limits (lanekit_rank_devices: [/dev/infiniband], "
    "lanekit_rank_cap_add: [IPC_LOCK], lanekit_rank_ulimits: ['memlock=-1:-1']), make NCCL_IB_HCA (ib_hca of "
    "each host) name HCAs that exist and are up on every node (ibv_devinfo), or set lanekit_fabric_transport: socket "
    "when the cluster has no RDMA on purpose")
