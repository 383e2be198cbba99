# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The fabric gate's verdict: pass, or why not, with the figures, the slowest pair and the fix.

One job: the judgement. In order: a node where the probe cannot run (no torch in the image, no GPU
in the container) is ``cannot_run``, never a pass; a rank that failed (rendezvous, a collective,
a timeout, a node that did not report) is ``failed``; NCCL over TCP sockets on a lane that means
RDMA is ``wrong_transport``; the headline busbw (the floor's collective at the largest size) under
the floor is ``below_floor``, with the pair search naming the slow link or node. The gate setting
decides what that means: strict stops the deploy on anything but a pass, warn only reports, off
never measures.
"""
from __future__ import annotations

from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric import _busbw, _pairs, _transport

GATES = ("strict", "warn", "off")
OFF_HINT = "-e fabric_gate=warn (measure and report only) or -e fabric_gate=off (do not measure)"


def check_gate(gate: Any) -> str:
    if gate not in GATES:
        raise LanekitError(f"fabric_gate is {gate!r}; expected strict (stop the deploy below the floor), warn (report "
                           f"only) or off (do not measure), e.g. -e fabric_gate=warn.")
    return str(gate)


def _gb(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.3g}" if value < 10 else f"{value:.1f}"


def _by_status(results: list[dict[str, Any]], status: str) -> list[str]:
    return [f"{r.get('host')}: {r.get('reason') or status}" for r in sorted(results, key=lambda r: int(r.get("rank", 0)))
            if r.get("status") == status]


def _link_text(link: dict[str, Any]) -> str:
    return f"{link['src_host']} -> {link['dst_host']} at {_gb(link['gbps'])} GB/s"


def _pair_sentence(search: dict[str, Any]) -> tuple[str, str]:
    """(the slowest pair and the node it points at, the fix for it)."""
    slowest = search.get("slowest")
    if not slowest:
        return "No neighbour pair was measured.", ""
    node = search.get("node")
    host = {link["src"]: link["src_host"] for link in search["links"]} | {link["dst"]: link["dst_host"] for link in search["links"]}
    back = next((link for link in search["links"] if link["src"] == slowest["dst"] and link["dst"] == slowest["src"]), None)
    text = f"Slowest pair: {_link_text(slowest)}" + (f" (back: {_gb(back['gbps'])} GB/s)" if back else "") + "."
    if node is None:
        if search.get("slow") and len(search["slow"]) == len(search["links"]):
            return (text + " Every link is below the floor: the fabric as a whole, not one node.",
                    "check the switch, the link speed and MTU of every node (ethtool, ip link), and that the interface of "
                    "the lane (fabric_ifname) is the fast fabric, not a management network")
        return text, "check the NICs, cables and switch ports of the slow links above"
    side = {"send": "on its send side", "receive": "on its receive side", "both": "in both directions"}[search["side"]]
    name = host.get(node, str(node))
    return (text + f" {name} is slow {side}.",
            f"check the NIC, cable and switch port of {name} (ethtool <ifname>: speed and errors; ip -s link), its MTU and "
            f"any traffic shaping (tc qdisc show dev <ifname>), or leave {name} out of the lane")


def judge(lane: str, gate: str, results: list[dict[str, Any]], floor: dict[str, Any], *, wants_rdma: bool,
          env: dict[str, str]) -> dict[str, Any]:
    """The verdict: {status, blocking, message, fix, rows, headline, pairs, transport, nccl_version, torch}."""
    gate = check_gate(gate)
    rows = _busbw.summarize([r for r in results if r.get("status") == "ok"])
    lines = [line for r in results for line in r.get("nccl_lines") or []]
    transport = _transport.parse(lines)
    # What torch reports per rank; NCCL's own line when torch did not say.
    versions = sorted({str(r["nccl_version"]) for r in results if r.get("nccl_version")}) or (
        [transport["nccl_version"]] if transport.get("nccl_version") else [])
    out: dict[str, Any] = {"status": "pass", "gate": gate, "rows": rows, "headline": None, "pairs": None,
                           "transport": transport, "transport_used": _transport.used(transport) or (
                               "gloo/tcp" if any(r.get("backend") == "gloo" and r.get("status") == "ok" for r in results) else ""),
                           "nccl_version": versions[0] if len(versions) == 1 else (versions or None),
                           "torch": sorted({str(r["torch"]) for r in results if r.get("torch")}) or None,
                           "floor": floor, "fix": ""}
    # The sentences carry no apostrophe: Ansible's YAML output doubles it ('') in quoted text.
    where = f"the fabric of lane {lane} ({len(results)} nodes)"
    if cannot := _by_status(results, "cannot_run"):
        out.update(status="cannot_run", message=f"The fabric gate cannot run on lane {lane} ({len(results)} nodes): {'; '.join(cannot)}.",
                   fix=f"use an image with torch and torch.distributed (every vLLM and SGLang image has them), or go on "
                       f"without the measurement on purpose: {OFF_HINT}")
    elif failed := _by_status(results, "failed"):
        head = next((r for r in results if int(r.get("rank", -1)) == 0), {})
        out.update(status="failed", message=f"The fabric test of lane {lane} ({len(results)} nodes) failed: {'; '.join(failed)}.",
                   fix="check that every node runs its probe (docker on each node), that NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME "
                       f"(fabric_ifname) name the fabric interface on every node, and that the fabric address of "
                       f"{head.get('host', 'the head')} and the port of the probe are reachable from every node")
    elif problem := _transport.problem(transport, wants_rdma, env):
        out.update(status="wrong_transport", message=f"{where[0].upper()}{where[1:]} is refused: {problem}",
                   fix=_transport.RDMA_FIX)
    else:
        headline = _busbw.headline(rows, floor.get("op", "all_gather"))
        out["headline"] = headline
        figures = "; ".join(f"{row['op']} busbw {_gb(row['busbw'])} GB/s at {_busbw.human_bytes(row['size'])}"
                            for row in rows if row is _busbw.headline(rows, row["op"]))
        floor_text = (f"floor {_gb(floor['gbps'])} GB/s{' (estimate)' if floor.get('estimated') else ''}"
                      if floor.get("gbps") else "no floor for this hardware (lanekit_fabric_floor_gbps)")
        transfers = [t for r in results for t in r.get("transfers") or []]
        hosts = {int(r["rank"]): str(r.get("host")) for r in results}
        if transfers:
            out["pairs"] = _pairs.search(transfers, floor.get("gbps"), hosts)
        if headline is None:
            out.update(status="failed", message=f"The fabric test of lane {lane} returned no {floor.get('op')} timing.",
                       fix="run it again with -e fabric_remeasure=true; if it repeats, report it")
        elif floor.get("gbps") and headline["busbw"] < float(floor["gbps"]):
            pair_text, pair_fix = _pair_sentence(out["pairs"] or {})
            out.update(status="below_floor",
                       message=f"{where[0].upper()}{where[1:]} is below its floor: {figures}; {floor_text}. {pair_text}",
                       fix=(pair_fix + ", then deploy again" if pair_fix else "check the fabric")
                       + f"; or lower the floor on purpose (lanekit_fabric_floor_gbps), or {OFF_HINT}")
        else:
            out.update(message=f"{where[0].upper()}{where[1:]} passes: {figures}; {floor_text}; transport "
                               f"{out['transport_used'] or 'unknown'}.")
    out["blocking"] = gate == "strict" and out["status"] != "pass"
    return out


def lines(verdict: dict[str, Any]) -> list[str]:
    """The verdict as the play prints it: the sentence, the fix, then the table of figures."""
    out = [verdict["message"]]
    if verdict.get("fix"):
        out.append(f"fix: {verdict['fix']}.")
    if verdict.get("status") != "pass" and verdict.get("gate") == "warn":
        out.append("fabric_gate=warn: the deploy goes on.")
    for row in verdict.get("rows") or []:
        out.append(f"  {row['op']:<10} {_busbw.human_bytes(row['size']):>9}  time {row['time_s'] * 1e3:9.2f} ms  "
                   f"algbw {_gb(row['algbw']):>7} GB/s  busbw {_gb(row['busbw']):>7} GB/s")
    for link in ((verdict.get("pairs") or {}).get("links") or []):
        out.append(f"  link {link['src_host']} -> {link['dst_host']}: {_gb(link['gbps'])} GB/s")
    return out
