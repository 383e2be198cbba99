# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The pair search: which link, and which node, makes the lane's fabric slow.

One job: from timed transfers between neighbours, name the slowest link and, when the evidence
points at one, the node. The probe sends one buffer over each link of the ring the ranks form
(rank i to i+1 and back, the last to the first), one transfer at a time, each timed by its
receiver. A node whose every outgoing link is slow while another node sends fast is slow on its
send side (its NIC, cable or switch port, or a shaped uplink); every incoming link slow, on its
receive side; a node in every slow link, on both. Two nodes have one link per direction: a slow
direction names its sender, the side that shapes and duplex faults most often limit.
"""
from __future__ import annotations

from typing import Any

from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric._busbw import algbw


def neighbour_pairs(n: int) -> list[tuple[int, int]]:
    """The directed links the probe measures: each rank to its ring neighbour and back."""
    if n < 2:
        return []
    ring = [(0, 1)] if n == 2 else [(i, (i + 1) % n) for i in range(n)]
    return [link for a, b in ring for link in ((a, b), (b, a))]


def links(transfers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """{src, dst, size, seconds, gbps} per directed link (its mean time; GB/s = size / time), slowest first."""
    out = []
    for transfer in transfers:
        seconds = [float(s) for s in transfer.get("seconds") or [] if float(s) > 0]
        if not seconds:
            continue
        mean = sum(seconds) / len(seconds)
        out.append({"src": int(transfer["src"]), "dst": int(transfer["dst"]), "size": int(transfer["size"]),
                    "seconds": mean, "gbps": algbw(int(transfer["size"]), mean)})
    return sorted(out, key=lambda link: link["gbps"])


def search(transfers: list[dict[str, Any]], floor_gbps: float | None, hosts: dict[int, str]) -> dict[str, Any]:
    """The slowest link and the node to blame.

    ``hosts`` maps a probe rank to its inventory host. Slow means below the floor; without a floor,
    below half the median link (an outlier among its peers). Returns {links, slow, slowest, node,
    side, threshold_gbps}; node is None when no single node explains the slow links."""
    measured = links(transfers)
    for link in measured:
        link["src_host"], link["dst_host"] = hosts.get(link["src"], str(link["src"])), hosts.get(link["dst"], str(link["dst"]))
    result: dict[str, Any] = {"links": measured, "slow": [], "slowest": measured[0] if measured else None,
                              "node": None, "side": None, "threshold_gbps": None}
    if not measured:
        return result
    if floor_gbps:
        threshold = float(floor_gbps)
    else:
        speeds = sorted(link["gbps"] for link in measured)
        threshold = speeds[len(speeds) // 2] / 2
    result["threshold_gbps"] = threshold
    slow = [link for link in measured if link["gbps"] < threshold]
    result["slow"] = slow
    if not slow or len(slow) == len(measured):
        return result
    nodes = sorted({link["src"] for link in measured} | {link["dst"] for link in measured})
    slow_set = {(link["src"], link["dst"]) for link in slow}
    for node in nodes:
        outgoing = [(link["src"], link["dst"]) for link in measured if link["src"] == node]
        incoming = [(link["src"], link["dst"]) for link in measured if link["dst"] == node]
        send_slow = bool(outgoing) and all(link in slow_set for link in outgoing)
        receive_slow = bool(incoming) and all(link in slow_set for link in incoming)
        # Two nodes: a slow direction alone is the sender's; the receiver's other direction is then fast.
        if len(nodes) == 2 and receive_slow and not send_slow:
            continue
        if send_slow or receive_slow:
            result["node"], result["side"] = node, "both" if send_slow and receive_slow else ("send" if send_slow else "receive")
            return result
    common = [node for node in nodes if all(node in pair for pair in slow_set)]
    if len(common) == 1:
        result["node"], result["side"] = common[0], "both"
    return result
