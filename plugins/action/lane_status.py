# Copyright: lanekit developers
# Apache-2.0
"""Print a lane's verdict (serving, degraded, down, not deployed, booting) and its per-rank table.

One job: one gathering of every rank's status, the verdict and the table (or their JSON). Like ``lane_wait`` the task runs on
every node of the lane at once; each node's worker reads its own ranks (one
``lanekit.serving.rank_status`` run, health probes only, no chat completion) and shares them
through the controller-side rendezvous; the coordinator (the head's host) decides the verdict
(``_verdict``) and prints it, then the table. A node that cannot be reached reports its ranks as
unknown (the worker catches the connection error), so the verdict names it instead of aborting.
Without a plan, ``lane`` names the lane and its containers are found by their label.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import RankLog
from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _rankstatus as rankstatus
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _verdict
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._bundle import secret_args
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._lane_poll import (
    LaneTaskError,
    LaneWorker,
    lane_members,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rankstatus import RankStatus
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rendezvous import Rendezvous
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._report import render_table
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._tracker import BootConfig, LaneTracker
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _charts as ledger_charts
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _store as ledger_store
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._table import status_line

display = Display()

ARGUMENT_SPEC = dict(
    plan=dict(type="dict"),
    lane=dict(type="str"),
    engine=dict(type="str"),
    probe_from=dict(type="str", default="head", choices=["head", "controller"]),
    probe_address=dict(type="str"),
    tail_lines=dict(type="int", default=2000),
    sync_timeout_s=dict(type="float", default=60.0),
    status_format=dict(type="str", default="text", choices=["text", "json"]),
    status_file=dict(type="str"),
    inventory=dict(type="str"),
)


def inventory_name(args: dict, task_vars: dict) -> str:
    """The inventory to name in the fix command: the argument, else the play's first source."""
    if args.get("inventory"):
        return args["inventory"]
    sources = list(task_vars.get("ansible_inventory_sources") or [])
    if not sources:
        return ""
    path = str(sources[0])
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel


def status_options(args: dict) -> dict:
    """The worker's settings for a status: no traffic beyond the health probes."""
    return dict(tail_lines=args["tail_lines"], probe_from=args["probe_from"], probe_address=args.get("probe_address"),
                chat_probe=False, sync_timeout_s=args["sync_timeout_s"])


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    EXPECTED_ERRORS = (LaneTaskError,)

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        plan = args.get("plan") or {}
        members = lane_members(plan, task_vars, "lane_status", lane=args.get("lane"), engine=args.get("engine"))
        me = task_vars.get("inventory_hostname")
        if me not in members.hosts:
            result.update(skipped=True, msg=f"No rank of lane {members.lane} runs on {me}.")
            return result
        rdv = Rendezvous(Rendezvous.default_root(self._task._uuid))
        output = dict(format=args["status_format"], file=args.get("status_file"),
                      inventory=inventory_name(args, task_vars))
        worker = StatusWorker(self, task_vars, plan, members, rdv, output=output, **status_options(args))
        # The lane's key for the health probes (an API with a key refuses /v1 without it).
        worker.secret_args = secret_args(self._templar.template, task_vars, plan)
        return worker.status(result)


def ledger_link(reports_dir: str | None) -> str:
    """The line under the table naming the lane's ledger and its last deploy's timeline ('' without a ledger)."""
    if not reports_dir:
        return ""
    records, _skipped = ledger_store.read(reports_dir)
    deploys = [r for r in records if r.event == "deploy" and r.outcome != "serving"]
    png = ledger_charts.boot_png(reports_dir, deploys[-1].boot) if deploys else ""
    return status_line(records, ledger_store.ledger_path(reports_dir), png if png and os.path.exists(png) else "")


class StatusWorker(LaneWorker):
    """One worker's part of a status: report its ranks; the coordinator prints verdict and table."""

    def __init__(self, *args: Any, output: dict | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.output = output or {"format": "text", "file": None, "inventory": ""}

    def discover(self) -> dict[int, RankStatus]:
        """Without a plan: the lane's containers on this node, found by their label."""
        res, _unused = self.run_module(self.module_args())
        statuses: dict[int, RankStatus] = {}
        for entry in (res or {}).get("containers") or []:
            rank = entry.get("rank")
            if not entry.get("exists") or rank is None:
                continue
            spec = {"node_rank": rank, "host": self.me, "container_name": entry["name"],
                    "role": entry.get("role") or ("head" if rank == 0 else "worker")}
            log = RankLog(self.engine, spec["role"])
            log.feed_docker(entry.get("lines") or [])
            statuses[int(rank)] = rankstatus.build(spec, entry.get("inspect"), log,
                                                   float((res or {}).get("now") or time.time()))
        return statuses

    def status(self, result: dict) -> dict:
        mine = self.gather() if self.members.ranks else self.discover()
        self.report(0, mine)
        if not self.is_coordinator:
            result.update(changed=False, msg=f"Status of {self.me} reported to {self.coordinator}.",
                          ranks=[s.to_dict() for s in mine.values()])
            return result
        every, _unused = self.all_statuses(0)
        tracker = LaneTracker(self.lane, self.engine, BootConfig.from_plan(self.plan), self.rank_hosts)
        inferred = tracker.infer(every)
        table = render_table(inferred, self.lane)
        verdict = _verdict.decide(self.lane, self.engine, inferred, self.output.get("inventory") or "")
        doc = _verdict.document(verdict, inferred, table)
        ledger = ledger_link(self.plan.get("reports_dir"))
        if ledger:
            table = table + [ledger]
            doc["ledger"] = ledger
        if self.output.get("format") == "json":
            text = json.dumps(doc, indent=2, sort_keys=True)
            if self.output.get("file"):
                atomic_write(os.path.abspath(self.output["file"]), text + "\n")
                display.display(verdict.line)
            else:
                display.display(text)
        else:
            for line in verdict.lines() + table:
                display.display(line)
        running = sum(1 for s in every.values() if s.running)
        result.update(changed=False, table=table, ranks=[every[k].to_dict() for k in sorted(every)],
                      verdict=verdict.to_dict(), msg=f"Lane {self.lane}: {running}/{len(every)} rank containers running.")
        return result
