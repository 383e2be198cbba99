# Copyright: lanekit developers
# Apache-2.0
"""Print what runs where: every lane on the nodes, its state and nodes, and other GPU holders.

One job: on the controller, turn every node's registered ``lanekit.serving.node_workloads``
result into the overview of ``_workloads`` and print it. No host is contacted. The
documentation lives in plugins/modules/cluster_status.py.
"""
from __future__ import annotations

from typing import Any

from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _workloads as workloads
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction

display = Display()

ARGUMENT_SPEC = dict(found=dict(type="dict", default={}))


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        view = workloads.overview(args["found"])
        table = workloads.render(view)
        for line in table:
            display.display(line)
        lanes = view.lanes()
        result.update(changed=False, table=table, **view.to_dict(),
                      msg=f"{len(lanes)} lane(s) and {sum(1 for w in view.workloads if w.kind != 'rank')} other "
                          f"workload(s) on {len(args['found']) - len(view.unreachable)} node(s)"
                          + (f"; unreachable: {', '.join(sorted(view.unreachable))}" if view.unreachable else ""))
        return result
