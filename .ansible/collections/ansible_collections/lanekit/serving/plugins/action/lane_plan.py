# Copyright: lanekit developers
# Apache-2.0
"""Controller-side planning: lane + override layers + inventory -> lint -> per-rank plan.

No host is contacted. The documentation lives in plugins/modules/lane_plan.py.
"""
from __future__ import annotations

import json
import os
import tempfile

from ansible import context
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils import _lint
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import parse_overrides
from ansible_collections.lanekit.serving.plugins.module_utils._plan import plan_lane, table

display = Display()

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

ARGUMENT_SPEC = {
    "lane": {"type": "str", "required": True},
    "lanes_dir": {"type": "path"},
    "images_dir": {"type": "path"},
    "purpose": {"type": "str", "default": "plan", "choices": ["plan", "deploy"]},
    "lint_skip": {"type": "list", "elements": "str", "default": []},
    "nodes_group": {"type": "str", "default": "lane_nodes"},
    "plan_file": {"type": "path"},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        task_vars = task_vars or {}
        try:
            plan, findings = self._plan(args, task_vars)
        except LanekitError as err:
            raise AnsibleActionFail(str(err)) from None

        for skipped in findings["skipped"]:
            display.display(f"lanekit lint: rule {skipped} skipped (lint_skip)", color="yellow")
        for unknown in findings["unknown_skips"]:
            display.warning(f"lint_skip names {unknown!r}, which is not a lint rule; known rules: "
                            + ", ".join(r.rule_id for r in _lint.RULES))
        for warning in findings["warnings"]:
            display.warning(f"[{warning['id']}] {warning['message']}")
        if findings["errors"]:
            lines = [f"[{e['id']}] {e['message']}" for e in findings["errors"]]
            result["failed"] = True
            result["msg"] = (
                f"lane {args['lane']} refused before anything boots ({len(lines)} problem"
                f"{'s' if len(lines) > 1 else ''}; skip a rule on purpose with -e lint_skip=ID):\n" + "\n".join(lines)
            )
            return result
        result["plan"] = plan
        result["table"] = table(plan)
        result["lint"] = findings
        result["changed"] = False
        if args.get("plan_file") and not self._task.check_mode:
            result["changed"] = _write_if_changed(args["plan_file"], plan)
        result["plan_file"] = args.get("plan_file")
        return result

    # -- helpers ------------------------------------------------------------------------

    def _plan(self, args, task_vars):
        group = args["nodes_group"]
        host_names = list(task_vars.get("groups", {}).get(group) or [])
        if not host_names:
            raise LanekitError(
                f"the inventory has no hosts in group '{group}': list the GPU nodes of the lane there, in rank order "
                f"(see inventories/spark8/hosts.yml)."
            )
        hostvars = task_vars.get("hostvars", {})
        extra_layer = self._extra_overrides()
        hosts = []
        for name in host_names:
            layers = [(f"lane_overrides in the inventory (host {name})", self._inventory_overrides(name, hostvars[name]))]
            if extra_layer is not None:
                layers.append(("lane_overrides given with -e", extra_layer))
            hosts.append({"name": name, "vars": hostvars[name], "layers": layers})
        skip = [part for item in (args.get("lint_skip") or []) for part in str(item).split(",")]
        return plan_lane(
            lanes_dir=args.get("lanes_dir") or os.path.join(COLLECTION_ROOT, "lanes"),
            images_dir=args.get("images_dir") or os.path.join(COLLECTION_ROOT, "images"),
            lane_name=args["lane"],
            hosts=hosts,
            lint_skip=skip,
            purpose=args["purpose"],
        )

    def _extra_overrides(self):
        """``lane_overrides`` from ``-e`` (None when not given).

        ``-e lane_overrides='{"serve": ...}'`` is key=value syntax, which Ansible splits at every
        space, so the raw command-line text is read back first; JSON/YAML/@file forms of ``-e``
        arrive whole through the variable manager.
        """
        raw = None
        for item in context.CLIARGS.get("extra_vars") or ():
            text = str(item)
            if text.startswith("lane_overrides="):
                raw = text[len("lane_overrides="):]
        if raw is not None:
            return parse_overrides(raw, "lane_overrides given with -e")
        manager = self._task.get_variable_manager()
        extra = getattr(manager, "extra_vars", None) or {}
        if "lane_overrides" not in extra:
            return None
        return parse_overrides(self._templar.template(extra["lane_overrides"]), "lane_overrides given with -e")

    def _inventory_overrides(self, host, host_vars):
        """``lane_overrides`` from group_vars/host_vars alone, without the ``-e`` layer.

        Ansible's precedence lets ``-e`` replace the inventory value; lanes deep-merge the two
        instead, so the inventory value is recomputed here with extra vars left out.
        """
        manager = self._task.get_variable_manager()
        extra = getattr(manager, "_extra_vars", None)
        if not extra or "lane_overrides" not in extra:
            value = host_vars.get("lane_overrides")
        else:
            inventory = getattr(manager, "_inventory", None)
            host_obj = inventory.get_host(host) if inventory is not None else None
            saved = manager._extra_vars
            try:
                manager._extra_vars = {k: v for k, v in saved.items() if k != "lane_overrides"}
                value = manager.get_vars(host=host_obj, include_hostvars=False).get("lane_overrides") if host_obj else None
            finally:
                manager._extra_vars = saved
        if value is None:
            return {}
        return parse_overrides(self._templar.template(value), f"lane_overrides in the inventory (host {host})")


def _write_if_changed(path, plan):
    """Write the plan JSON atomically; return True only when the content changed."""
    content = json.dumps(plan, indent=2, sort_keys=True) + "\n"
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            if handle.read() == content:
                return False
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".plan-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True
