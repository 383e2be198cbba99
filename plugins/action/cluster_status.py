# Copyright: lanekit developers
# Apache-2.0
"""Print what runs where: every lane on the nodes, its state and nodes, and other GPU holders.

One job: on the controller, turn every node's registered ``lanekit.serving.node_workloads``
result into the overview of ``_workloads`` and print it. No host is contacted. The
documentation lives in plugins/modules/cluster_status.py.
"""
from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _workloads as workloads

display = Display()

ARGUMENT_SPEC = dict(found=dict(type="dict", default={}))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars or {})
        del tmp
        _unused, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
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
