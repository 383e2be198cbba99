# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The watch's probe, run on the lane's head: the controller's half.

One job: have the head's ``rank_status`` run the watch's streamed completion
(``module_utils/_boot/_probes.stream_probe``) against the head's own API address, and bring its
result back. The lane's key then travels to the head inside the Ansible connection (SSH) and from
there to a port the head's rank container is checked to hold (``_boot/_portowner``), never in
clear across the network from the controller (issue 38). The timings are the head's, so the
connection's own latency is not in the first token.

The action (``lane_watch``) runs on the controller as every action does; the playbook delegates its
probing steps to the head (``delegate_to: "{{ lanekit_plan.api.host }}"``), so the action's
connection, and the module it executes, are the head's.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.lanekit.serving.plugins.module_utils._boot._probes import api_url
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

MODULE = "lanekit.serving.rank_status"


def head_of(plan: Mapping[str, Any], delegate_to: str | None, host: str | None) -> str:
    """The lane's head host, checked to be where the task runs (its connection is the one the probe uses)."""
    head = (plan.get("api") or {}).get("host")
    if not head:
        raise LanekitError("The lane's plan names no head host (plan.api.host), so the watch cannot probe from the "
                           "head: re-plan the lane with this collection's preflight role.")
    runs_on = delegate_to or host
    if runs_on != head:
        raise LanekitError(
            f"lane_watch probes the lane's API from the lane's head {head}, so that the lane's key never crosses "
            f"the network from the controller, but this task runs on {runs_on}: delegate it to the head "
            '(delegate_to: "{{ lanekit_plan.api.host }}"), as the lanekit.serving.watch_lane playbook does.')
    return str(head)


def probe_args(plan: Mapping[str, Any], api_address: str | None, deadline_s: float, max_tokens: int,
               api_key: str | None) -> dict[str, Any]:
    """``rank_status``'s arguments for one watch probe on the head (the key as its own no_log argument)."""
    api = plan.get("api") or {}
    # The rank that answers the API on the head: it must hold the port the key goes to. Without the
    # plan's word the head's rank_status takes its container labelled head or router.
    container = next((r.get("container_name") for r in plan.get("ranks") or []
                      if r.get("serves_api") and r.get("host") == api.get("host")), None)
    margs: dict[str, Any] = {"containers": [], "watch_probe": {
        "url": api_url(plan, api_address), "model": api.get("served_model_name") or "", "deadline_s": deadline_s,
        "max_tokens": max_tokens, "container": container}}
    if api_key:
        margs["api_key"] = api_key
    return margs


def on_head(action: Any, task_vars: Mapping[str, Any], head: str, margs: Mapping[str, Any]) -> dict[str, Any]:
    """The head's probe result; a head that cannot run it fails the watch (a restart would not reach it either)."""
    why = ""
    try:
        res = action._execute_module(module_name=MODULE, module_args=dict(margs), task_vars=task_vars)
    except AnsibleError as exc:
        res, why = {}, to_text(exc)
    if not why and (res.get("failed") or res.get("unreachable")):
        why = to_text(res.get("msg") or "rank_status failed without a message")
    if not why and not isinstance(res.get("watch_probe"), dict):
        why = "rank_status returned no watch_probe (an older copy of the collection on the controller?)"
    if why:
        lines = [line.strip() for line in why.splitlines() if line.strip()]
        raise LanekitError(f"The watch's probe could not run on the lane's head {head}: "
                           f"{lines[-1] if lines else 'no answer'}. Check that the head is reachable "
                           "(ansible -m ping) and retry; the lane was not judged.")
    return dict(res["watch_probe"])
