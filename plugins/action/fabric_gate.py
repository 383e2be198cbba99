# Copyright: lanekit developers
# Apache-2.0
"""The fabric gate's controller side: what to run on the nodes, and the verdict on what they printed.

One job: the gate's two controller steps, both over the pure core in ``plugin_utils/_fabric``.
``step: prepare`` chooses the floor and the transport the lane means, builds each node's probe
container from the plan, and decides whether to measure: not with ``gate: off``, not when the
stored ``fabric.json`` has the same key (nodes, image pin, fabric env) and its figures still pass
the current floor. ``step: judge`` reads each node's container result, judges it, writes
``<reports_dir>/fabric.json`` (image, NCCL version, env, figures, verdict) and fails the task with
the verdict when the gate is strict and the fabric does not pass.
"""
from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric import (
    _cache,
    _floor,
    _launch,
    _transport,
    _verdict,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric._busbw import human_bytes
from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric._probe import VERSION as PROBE_VERSION

REPORT_VERSION = 1

ARGUMENT_SPEC = dict(
    step=dict(type="str", required=True, choices=["prepare", "judge"]),
    plan=dict(type="dict", required=True),
    gate=dict(type="str", default="strict", choices=list(_verdict.GATES)),
    floor_gbps=dict(type="raw"),
    transport=dict(type="str", default="auto", choices=list(_transport.TRANSPORT_CHOICES)),
    sizes=dict(type="list", elements="int", default=[]),
    iters=dict(type="int", default=5),
    timeout_s=dict(type="int", default=300),
    port=dict(type="int", default=0),
    remeasure=dict(type="bool", default=False),
    report_file=dict(type="path"),
    prepared=dict(type="dict"),
    outputs=dict(type="dict", default={}),
    # The hosts of this run (ansible_play_hosts_all); empty for every node of the lane.
    play_hosts=dict(type="list", elements="str", default=[]),
)


def report_path(args: dict[str, Any]) -> str:
    if args.get("report_file"):
        return str(args["report_file"])
    reports = (args["plan"] or {}).get("reports_dir")
    if not reports:
        raise LanekitError(f"lane {args['plan'].get('lane')}: the plan has no reports_dir, so the fabric result has "
                           f"nowhere to go; set lanekit_reports_dir in the inventory or give fabric_report_file.")
    return os.path.join(str(reports), "fabric.json")


def read_report(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("version") == REPORT_VERSION else None


def settings(args: dict[str, Any]) -> dict[str, Any]:
    """Floor, gate and what transport the lane means, from the plan's head rank and the options."""
    plan = args["plan"]
    head = _launch.nodes(plan)[0]["rank"] if _launch.nodes(plan) else {}
    container = head.get("container") or {}
    env = dict(container.get("env") or head.get("env") or {})
    return {"gate": args["gate"], "floor": _floor.choose(str(plan.get("hardware")), args.get("floor_gbps")),
            "transport": args["transport"], "env": _cache.fabric_env(env),
            "wants_rdma": _launch.backend(plan) == "nccl" and _transport.expects_rdma(
                env, list(container.get("devices") or []), args["transport"])}


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        if args["step"] == "prepare":
            return self.prepare(args, result)
        return self.judge(args, result)

    def prepare(self, args: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        plan, lane = args["plan"], args["plan"].get("lane")
        if args["gate"] == "off":
            result.update(run=False, msg=f"Fabric gate off (fabric_gate=off): the links between the nodes of lane {lane} are "
                                         f"not measured, on purpose.")
            return result
        chosen = settings(args)
        spec = _launch.specs(plan, sizes=args["sizes"] or None, iters=args["iters"], timeout_s=args["timeout_s"],
                             port=args["port"] or None, floor=chosen["floor"])
        outside = [host for host in spec["nodes"] if args["play_hosts"] and host not in args["play_hosts"]]
        if outside:
            result.update(run=False, msg=f"Fabric of lane {lane} not measured: this run is limited to some of its nodes "
                                         f"(--limit leaves out {', '.join(sorted(outside))}), and the fabric is measured "
                                         f"between all of them; run lanekit.serving.fabric_lane without --limit.")
            return result
        material = _cache.material(plan, spec, PROBE_VERSION)
        key = _cache.key(material)
        path = report_path(args)
        stored = read_report(path)
        result.update(run=True, spec=spec, settings=chosen, key=key, material=material, report_file=path)
        if stored and stored.get("key") == key and not args["remeasure"]:
            again = _verdict.judge(str(lane), args["gate"], stored.get("results") or [], chosen["floor"],
                                   wants_rdma=chosen["wants_rdma"], env=chosen["env"])
            if _cache.reusable(stored.get("results") or [], again["status"]):
                if again["blocking"]:
                    # Held, and still refused under this gate (a stored cannot_run with fabric_gate=strict).
                    held = f"report: {path} (measured {stored.get('measured_at')})"
                    result.update(failed=True, run=False, status=again["status"], report_file=path,
                                  msg="\n".join(_verdict.lines(again) + [held]))
                    return result
                told = again["message"] if again["status"] == "pass" else " ".join(_verdict.lines(again))
                result.update(run=False, verdict=again,
                              msg=f"Fabric of lane {lane}: the measurement of {stored.get('measured_at')} still holds (same "
                                  f"nodes, image and fabric env; -e fabric_remeasure=true measures again). {told}")
                return result
        why = "; ".join(_cache.changed((stored or {}).get("material"), material)) if not args["remeasure"] else "fabric_remeasure"
        result.update(msg=f"Measuring the fabric of lane {lane}: {spec['world']} nodes, {spec['backend']}, sizes "
                          f"{', '.join(human_bytes(size) for size in spec['sizes'])}, floor {chosen['floor']['gbps']} GB/s "
                          f"({chosen['floor']['source']}) ({why or 'the stored result no longer passes'}).")
        return result

    def judge(self, args: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        prepared, plan = args.get("prepared") or {}, args["plan"]
        if not prepared.get("spec"):
            raise LanekitError("fabric_gate step judge needs the result of step prepare (prepared) with the probe's spec.")
        chosen, spec = prepared["settings"], prepared["spec"]
        outputs = args.get("outputs") or {}
        results = [_launch.parse_output(host, node["probe_rank"], outputs.get(host))
                   for host, node in sorted(spec["nodes"].items(), key=lambda item: item[1]["probe_rank"])]
        verdict = _verdict.judge(str(plan.get("lane")), chosen["gate"], results, chosen["floor"],
                                 wants_rdma=chosen["wants_rdma"], env=chosen["env"])
        doc = {"version": REPORT_VERSION, "lane": plan.get("lane"), "plan_hash": plan.get("plan_hash"),
               "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "key": prepared["key"],
               "material": prepared["material"], "settings": chosen,
               "image": prepared["material"]["image"], "nccl_version": verdict["nccl_version"], "torch": verdict["torch"],
               "env": {node["host"]: node["env"] for node in prepared["material"]["nodes"]},
               "verdict": {k: verdict[k] for k in ("status", "message", "fix", "gate", "blocking", "headline", "rows",
                                                   "pairs", "transport", "transport_used", "floor")},
               "results": results}
        path = prepared.get("report_file") or report_path(args)
        # reports/<lane>/ is the operator's (plan.json there names the secrets' names): 0700 like every writer's
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        atomic_write(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
        lines = _verdict.lines(verdict)
        if verdict["blocking"]:
            # The sentence, the fix and the figures; the whole verdict is in the report, not in the failure.
            result.update(failed=True, status=verdict["status"], report_file=path,
                          msg="\n".join(lines + [f"report: {path}"]))
            return result
        result.update(changed=False, verdict=verdict, report_file=path, lines=lines + [f"report  {path}"],
                      msg=verdict["message"])
        return result
