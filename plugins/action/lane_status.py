# Copyright: lanekit developers
# Apache-2.0
"""Print a lane's per-rank table once: state, phase read from the log, uptime, restarts, image.

One job: one gathering of every rank's status and the table. Like ``lane_wait`` the task runs on
every node of the lane at once; each node's worker reads its own ranks (one
``lanekit.serving.rank_status`` run, health probes only, no chat completion) and shares them
through the controller-side rendezvous; the coordinator (the head's host) prints the table.
Without a plan, ``lane`` names the lane and its containers are found by their label.
"""
from __future__ import annotations

import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils import _rankstatus as rankstatus
from ansible_collections.lanekit.serving.plugins.module_utils._boot import BootConfig, LaneTracker
from ansible_collections.lanekit.serving.plugins.module_utils._boot_report import render_table
from ansible_collections.lanekit.serving.plugins.module_utils._ranklog import RankLog
from ansible_collections.lanekit.serving.plugins.module_utils._rankstatus import RankStatus
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane_poll import (
    LaneTaskError,
    LaneWorker,
    lane_members,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._rendezvous import Rendezvous

display = Display()

ARGUMENT_SPEC = dict(
    plan=dict(type="dict"),
    lane=dict(type="str"),
    engine=dict(type="str"),
    probe_from=dict(type="str", default="head", choices=["head", "controller"]),
    probe_address=dict(type="str"),
    tail_lines=dict(type="int", default=2000),
    sync_timeout_s=dict(type="float", default=60.0),
)


def status_options(args: dict) -> dict:
    """The worker's settings for a status: no traffic beyond the health probes."""
    return dict(tail_lines=args["tail_lines"], probe_from=args["probe_from"], probe_address=args.get("probe_address"),
                chat_probe=False, sync_timeout_s=args["sync_timeout_s"])


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _unused, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            plan = args.get("plan") or {}
            members = lane_members(plan, task_vars, "lane_status", lane=args.get("lane"), engine=args.get("engine"))
        except LaneTaskError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        me = task_vars.get("inventory_hostname")
        if me not in members.hosts:
            result.update(skipped=True, msg=f"No rank of lane {members.lane} runs on {me}.")
            return result
        rdv = Rendezvous(Rendezvous.default_root(self._task._uuid))
        return StatusWorker(self, task_vars, plan, members, rdv, **status_options(args)).status(result)


class StatusWorker(LaneWorker):
    """One worker's part of a status: report its ranks; the coordinator prints the table."""

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
                                                   float(res.get("now") or time.time()))
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
        table = render_table(tracker.infer(every), self.lane)
        for line in table:
            display.display(line)
        running = sum(1 for s in every.values() if s.running)
        result.update(changed=False, table=table, ranks=[every[k].to_dict() for k in sorted(every)],
                      msg=f"Lane {self.lane}: {running}/{len(every)} rank containers running.")
        return result
