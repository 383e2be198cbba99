# Copyright: lanekit developers
# Apache-2.0
"""Controller-side planning: lane + override layers + inventory -> lint -> per-rank plan.

No host is contacted. The documentation lives in plugins/modules/lane_plan.py.

Override layers: ``lane_group_overrides`` from the inventory's group_vars, ``lane_host_overrides``
from one host's host_vars, then ``lane_cli_overrides`` from the command line. They have different
names so that Ansible's variable precedence never lets one replace another: lanes deep-merge them.
The old shared name ``lane_overrides`` is refused wherever it is set.
"""
from __future__ import annotations

import os
from typing import Any

import yaml
from ansible import context
from ansible.errors import AnsibleError
from ansible.parsing.splitter import parse_kv
from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._layers import (
    CLI_LAYER,
    CLI_SOURCE,
    GROUP_LAYER,
    HOST_LAYER,
    OLD_LAYER,
    inventory_layers,
    old_layer_refusal,
    parse_overrides,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _lint
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._model import Plan
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._paths import (
    find_spec_dir,
    pick_spec_dir,
    reports_root,
    user_root,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._plandiff import plan_changes
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._planfile import read_previous_plan, write_plan_file
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._table import table

display = Display()

# Inventory layers: -e would replace them for every host instead of layering over them.
INVENTORY_LAYERS = (GROUP_LAYER, HOST_LAYER, OLD_LAYER)

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

ARGUMENT_SPEC = {
    "lane": {"type": "str", "required": True},
    "lanes_dir": {"type": "path"},
    "images_dir": {"type": "path"},
    "purpose": {"type": "str", "default": "plan", "choices": ["plan", "deploy"]},
    "lint_skip": {"type": "list", "elements": "str", "default": []},
    "nodes_group": {"type": "str", "default": "lane_nodes"},
    "plan_file": {"type": "path"},
    "write_plan": {"type": "bool", "default": False},
}


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _requires_connection = False

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        plan, findings = self._plan(args, task_vars)

        for skipped in findings["skipped"]:
            display.display(f"lanekit lint: rule {skipped} skipped (lint_skip)", color="yellow")
        for unknown in findings["unknown_skips"]:
            display.warning(f"lint_skip names {unknown!r}, which is not a lint rule; known rules: "
                            + ", ".join(r.rule_id for r in _lint.RULES))
        for fixed in findings.get("unskippable", []):
            display.warning(f"lint_skip names {fixed!r}, which cannot be skipped: deploy would refuse what it finds.")
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
        if plan is None:  # plan_lane returns None only with errors, answered above
            raise LanekitError(f"lane {args['lane']}: no plan was made and no lint rule said why.")
        result["plan"] = plan
        result["table"] = table(plan)
        result["sources"] = getattr(self, "_sources", {})
        result["lint"] = findings
        result["changed"] = False
        plan_file = args.get("plan_file")
        if not plan_file and args["write_plan"] and plan["reports_dir"]:
            plan_file = os.path.join(plan["reports_dir"], "plan.json")
        # --diff: what changed since the plan last written (read before this run writes its own).
        previous = plan_file or (os.path.join(plan["reports_dir"], "plan.json") if plan["reports_dir"] else None)
        if self._task.diff and previous:
            changes = plan_changes(read_previous_plan(previous), dict(plan), previous)
            result["plan_changes"] = changes
            result["diff"] = {"prepared": "\n".join(changes) + "\n"}
        # The preflight role runs this task with check_mode: false (a --check run still needs the plan),
        # so the command line's --check is asked too: a check run writes no plan file.
        if plan_file and not self._task.check_mode and not context.CLIARGS.get("check"):
            result["changed"] = write_plan_file(plan_file, plan)
        result["plan_file"] = plan_file
        return result

    # -- helpers ------------------------------------------------------------------------

    def _plan(self, args: dict[str, Any], task_vars: dict[str, Any]) -> tuple[Plan | None, dict[str, Any]]:
        group = args["nodes_group"]
        host_names = list(task_vars.get("groups", {}).get(group) or [])
        if not host_names:
            raise LanekitError(
                f"the inventory has no hosts in group '{group}': list the GPU nodes of the lane there, in rank order "
                f"(see inventories/spark8/hosts.yml)."
            )
        cli_texts = [str(item) for item in context.CLIARGS.get("extra_vars") or ()]
        refuse_cli_inventory_layer(cli_texts)
        hostvars = task_vars.get("hostvars", {})
        cli_layer = self._cli_overrides(cli_texts, task_vars)
        hosts: list[dict[str, Any]] = []
        for name in host_names:
            layers = self._inventory_layers(name, hostvars[name])
            if cli_layer is not None:
                layers.append((CLI_SOURCE, cli_layer))
            hosts.append({"name": name, "vars": hostvars[name], "layers": layers})
        skip = [part for item in (args.get("lint_skip") or []) for part in str(item).split(",")]
        cwd = os.getcwd()
        # Paths resolve from the user's repository found from the working directory or the inventory, never from
        # the shell's working directory alone (a run from <repo>/inventories/ reads <repo>/lanes).
        inventory_dirs = sorted({str(hostvars[name].get("inventory_dir") or "") for name in host_names} - {""})
        root = user_root(cwd, inventory_dirs)
        folders = {}
        for name in ("lanes", "images"):
            mine = find_spec_dir(name, args.get(f"{name}_dir"), self._var(task_vars, f"lanekit_{name}_dir"), cwd,
                                 COLLECTION_ROOT, root)
            ours = os.path.join(COLLECTION_ROOT, name)
            folders[name] = [mine] if os.path.abspath(mine) == os.path.abspath(ours) else [mine, ours]
        plan, findings = plan_lane(
            lanes_dir=folders["lanes"],
            images_dir=folders["images"],
            lane_name=args["lane"],
            hosts=hosts,
            lint_skip=skip,
            purpose=args["purpose"],
            reports_root=reports_root(self._var(task_vars, "lanekit_reports_dir"), task_vars.get("playbook_dir"), cwd,
                                      root),
        )
        # Where the lane came from, said out loud (the plan header prints it).
        lane_file = os.path.join(pick_spec_dir(folders["lanes"], f"{args['lane']}.yml"), f"{args['lane']}.yml")
        self._sources = {
            "lane_file": lane_file,
            "image_spec": plan["image"]["spec_dir"] if plan else None,
            "inventory": ", ".join(str(s) for s in task_vars.get("ansible_inventory_sources") or []) or None,
        }
        return plan, findings

    def _var(self, task_vars: dict[str, Any], name: str) -> Any:
        value = task_vars.get(name)
        return self._templar.template(value) if value not in (None, "") else None

    def _cli_overrides(self, cli_texts: list[str], task_vars: dict[str, Any]) -> dict[str, Any] | None:
        """The command-line layer ``lane_cli_overrides`` (None when not given).

        ``-e lane_cli_overrides='{"serve": ...}'`` is key=value syntax, which Ansible splits at every
        space, so the raw command-line text is read back first; JSON/YAML/@file forms of ``-e``
        arrive whole as the variable.
        """
        raw = cli_layer_text(cli_texts)
        if raw is not None:
            return parse_overrides(raw, CLI_SOURCE, CLI_LAYER)
        if task_vars.get(CLI_LAYER) is None:
            return None
        return parse_overrides(self._templar.template(task_vars[CLI_LAYER]), CLI_SOURCE, CLI_LAYER)

    def _inventory_layers(self, host: str, host_vars: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """The group and host layers of one host (the command line cannot set them, see above)."""
        def value(name: str) -> Any:
            raw = host_vars.get(name)
            return None if raw is None else self._templar.template(raw)
        return inventory_layers(host, value(GROUP_LAYER), value(HOST_LAYER), value(OLD_LAYER))


def cli_layer_text(cli_texts: list[str]) -> str | None:
    """The raw value of the last ``-e lane_cli_overrides=...`` given in key=value form, if any."""
    raw = None
    for text in cli_texts:
        if text.startswith(f"{CLI_LAYER}="):
            raw = text[len(CLI_LAYER) + 1:]
    return raw


def _extra_var_names(text: str) -> set[str]:
    """The variable names one ``-e`` argument sets, read as Ansible reads it (@file, YAML/JSON, key=value)."""
    try:
        if text.startswith("@"):
            with open(os.path.expanduser(text[1:]), encoding="utf-8") as handle:
                data = yaml.safe_load(handle)
        elif text[:1] in ("[", "{"):
            data = yaml.safe_load(text)
        else:
            data = parse_kv(text)
    except (OSError, yaml.YAMLError, AnsibleError):
        return set()
    return set(data) if isinstance(data, dict) else set()


def refuse_cli_inventory_layer(cli_texts: list[str]) -> None:
    """``-e lane_group_overrides=...`` would replace the inventory's layer instead of layering over it."""
    for text in cli_texts:
        if text.startswith(f"{CLI_LAYER}="):
            continue
        names = _extra_var_names(text)
        if OLD_LAYER in names:
            fix = (f"pass the command-line layer as -e {CLI_LAYER}='{{...}}', and set the inventory's as "
                   f"{GROUP_LAYER} (group_vars) or {HOST_LAYER} (host_vars)")
            raise old_layer_refusal("with -e", fix)
        for name in INVENTORY_LAYERS:
            if name in names:
                raise LanekitError(
                    f"{name} was given with -e, where it would replace the inventory's {name} instead of layering "
                    f"over it; pass the command-line layer as -e {CLI_LAYER}='{{...}}' instead."
                )
