# Copyright: lanekit developers
# Apache-2.0
"""Refuse, up front, the hosts that cannot be reached or cannot become root, one sentence each.

One job: on the controller, read each play host's registered result of the first task that
reached it (a ping through the play's connection and become settings) and fail with a sentence
per host that names what happened and the fix (``_reach``). No host is contacted. The
documentation lives in plugins/modules/node_reach.py.
"""
from __future__ import annotations

from typing import Any

from ansible_collections.lanekit.serving.plugins.plugin_utils import _reach as reach
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction

ARGUMENT_SPEC = dict(
    results=dict(type="dict", required=True),
)


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        hostvars = task_vars.get("hostvars") or {}
        found = []
        for host in sorted(args["results"]):
            res = args["results"][host] or {}
            if not (res.get("unreachable") or res.get("failed")):
                continue
            # hostvars entries are templated when read.
            found.append(reach.explain_for(
                host, " ".join(str(res.get(k) or "") for k in ("msg", "module_stderr", "module_stdout")).strip(),
                hostvars.get(host) or {}, default_timeout_s=getattr(self._play_context, "timeout", None),
                unreachable=bool(res.get("unreachable"))))
        result.update(changed=False, hosts=[r.to_dict() for r in found])
        if found:
            result.update(failed=True, msg=(
                f"{len(found)} of {len(args['results'])} host(s) cannot be used, so nothing was changed on any "
                "node:\n" + "\n".join(r.sentence for r in found)))
        else:
            result["msg"] = f"all {len(args['results'])} host(s) answered and became root"
        return result
