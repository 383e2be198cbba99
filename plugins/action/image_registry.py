# Copyright: lanekit developers
# Apache-2.0
"""Decide what to do with the builder's registry container: create, keep or recreate it, or refuse.

One job: on the controller, compare the registered ``docker_container_info`` of the registry
container with the inventory's registry settings (``_image_registry``) and return the decision
and the env, volumes and published port that ``community.docker.docker_container`` then applies.
No host is contacted. The documentation lives in plugins/modules/image_registry.py.
"""
from __future__ import annotations

from typing import Any

from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._image import _registry as reg

ARGUMENT_SPEC = dict(
    container=dict(type="dict"),
    name=dict(type="str", required=True),
    host=dict(type="str", required=True),
    bind=dict(type="str", required=True),
    port=dict(type="int", required=True),
    tls_cert=dict(type="str", default=""),
    tls_key=dict(type="str", default=""),
    htpasswd=dict(type="str", default=""),
    volume=dict(type="str", default="lanekit-registry"),
)


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        wanted = reg.Wanted(bind=args["bind"], port=args["port"], tls_cert=args["tls_cert"] or "",
                            tls_key=args["tls_key"] or "", htpasswd=args["htpasswd"] or "", volume=args["volume"])
        try:
            decision = reg.decide(args.get("container"), wanted, name=args["name"], host=args["host"])
        except ValueError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        result.update(changed=False, **decision.to_dict())
        if decision.action == "recreate":
            result["msg"] = (f"the registry container {args['name']} on {args['host']} is recreated with the "
                             f"inventory's settings because " + "; ".join(decision.reasons) + " (its images stay)")
        else:
            result["msg"] = f"the registry container {args['name']} on {args['host']}: {decision.action}"
        return result
