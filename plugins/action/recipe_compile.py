# Copyright: lanekit developers
# Apache-2.0
"""Controller-side recipe compilation: recipe + choice -> lane file and/or commands JSON.

No host is contacted. The documentation lives in plugins/modules/recipe_compile.py.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import yaml
from ansible import context

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import write_output
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import whole_number
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import LANE_NAME_RE
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import reports_root
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _cluster as _recipe_cluster
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _lane as _recipe_lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _offer as _recipe_offer
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import Choice
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._compose import (
    command_lines,
    compile_recipe,
    public,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import (
    RecipeSource,
    load_recipe,
    resolve_recipe,
)

ARGUMENT_SPEC = {
    "recipe": {"type": "str", "required": True},
    "recipe_root": {"type": "str"},
    # Where -e recipe=NAME is looked up first (lanekit_recipes_dir; default ./recipes), before the collection's recipes/.
    "recipes_dir": {"type": "str"},
    "hardware": {"type": "str"},
    "strategy": {"type": "str"},
    "variant": {"type": "str"},
    "preset": {"type": "str"},
    "features": {"type": "raw"},
    "feature_modes": {"type": "raw"},
    "nodes": {"type": "raw"},
    "pd": {"type": "raw"},
    "lane_file": {"type": "str"},
    "lanes_dir": {"type": "str"},
    # The user's image specs (lanekit_images_dir; default ./images): the lane's spec is written there when missing.
    "images_dir": {"type": "str"},
    # The nodes' CPU architecture for the image spec (lanekit_node_arch); default the hardware's.
    "arch": {"type": "str"},
    "commands_file": {"type": "str"},
    # Cluster mode (lanekit.serving.plan_lane/deploy_lane -e recipe=...): size the choice to this inventory group.
    "nodes_group": {"type": "str"},
    # List what the recipe offers (-e recipe_list=true) instead of compiling a choice.
    "list_choices": {"type": "bool", "default": False},
}


def _mapping(value: Any, name: str) -> dict | None:
    """A mapping given as data or, from ``-e key=value``, as JSON/YAML text."""
    if value in (None, ""):
        return None
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            raise LanekitError(f"{name} is not valid JSON or YAML; pass a mapping such as "
                               + ("'{\"spec_decoding\": \"mtp\"}'." if name == "recipe_feature_modes" else
                                  "'{\"prefill\": {\"nodes\": 1, \"parallelism\": \"dep\"}, \"decode\": {\"nodes\": 1}}'.")) from None
    if not isinstance(value, dict):
        raise LanekitError(f"{name} must be a mapping, found {type(value).__name__}.")
    return value


def _features(value: Any) -> list | None:
    """``a,b`` or a list: the complete enabled set; unset: the recipe's defaults; empty: none."""
    if value is None:
        return None
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise LanekitError("recipe_features must be a comma-separated list of feature names (or a YAML list of names).")


def choice_from_args(args: dict) -> Choice:
    """The user's choice from the task arguments (strings from -e become lists and mappings here)."""
    return Choice(hardware=args.get("hardware") or None, strategy=args.get("strategy") or None,
                  variant=args.get("variant") or None, preset=args.get("preset") or None,
                  features=_features(args.get("features")),
                  feature_modes=_mapping(args.get("feature_modes"), "recipe_feature_modes") or {},
                  nodes=args.get("nodes") if args.get("nodes") not in ("",) else None,
                  pd=_mapping(args.get("pd"), "recipe_pd"))


def recipe_source(args: dict, cwd: str) -> RecipeSource:
    """The recipe ``-e recipe=`` names (a path, or a name in the user's recipes/ then the collection's), loaded."""
    return load_recipe(resolve_recipe(args["recipe"], cwd, args.get("recipes_dir")), args.get("recipe_root"))


def write_if_changed(path: str, text: str, where: str = "", example: str = "") -> bool:
    """Write ``text`` when it differs; a path that is a directory, under a file or unwritable is one sentence."""
    return write_output(path, text, where or f"{path}", example=example)


def compile_and_write(args: dict, cwd: str, check_mode: bool = False) -> dict:
    """Compile the choice; write what was asked for; return the task result (LanekitError on refusal)."""
    src = recipe_source(args, cwd)
    result = compile_recipe(src, choice_from_args(args))
    out = {"changed": False, "recipe": src.path, "recipe_root": src.root, "choice": result["choice"],
           "commands": public(result), "command_lines": command_lines(public(result)),
           "docker_image": _recipe_lane.docker_image(
               src, result["choice"]["hardware"], result["choice"]["variant"]),
           "notes": _recipe_lane.recipe_notes(src, result["choice"]), "lane_file": None, "commands_file": None}
    commands_file = args.get("commands_file")
    lane_file = args.get("lane_file")
    if commands_file:
        commands_file = os.path.join(cwd, commands_file)
        out["commands_file"] = commands_file
        if not check_mode:
            text = json.dumps(public(result), indent=2) + "\n"
            out["changed"] = write_if_changed(commands_file, text, f"commands_file {commands_file}",
                                              "commands.json") or out["changed"]
    if lane_file or not commands_file:
        if lane_file:
            lane_file = os.path.join(cwd, lane_file)
            name = os.path.basename(lane_file)
            name = name[:-4] if name.endswith(".yml") else name
            if not lane_file.endswith(".yml") or not LANE_NAME_RE.match(name):
                raise LanekitError(f"lane_file {lane_file} must be <name>.yml with a lane name of lower-case letters, "
                                   "digits, '-' and '.'.")
        else:
            name = _recipe_lane.lane_name_for(src, result)
            lane_file = os.path.join(os.path.join(cwd, args.get("lanes_dir") or "lanes"), f"{name}.yml")
        lane, comments = _recipe_lane.build_lane(src, result, name)
        choice = result["choice"]
        spec_out = _image_spec_for(args, cwd, src, result, lane, comments, check_mode)
        out["changed"] = spec_out.pop("_changed") or out["changed"]
        out.update(spec_out)
        inside = os.path.commonpath([src.path, src.root]) == src.root
        header = [f"Compiled by lanekit from the vLLM recipe "
                  f"{os.path.relpath(src.path, src.root) if inside else src.path}"
                  + (f" (recipe tree {os.path.basename(src.root)})." if inside else "."),
                  "Choice: " + ", ".join(f"{k}={v}" for k, v in choice.items() if v not in (None, [], {})) + ".",
                  "Each value's trailing comment names the recipe layer it came from. Edit freely; recompiling",
                  "overwrites this file."]
        text = _recipe_lane.render(lane, comments, header)
        out["lane_file"], out["lane"] = lane_file, name
        if not check_mode:
            out["changed"] = write_if_changed(lane_file, text, f"lane_file {lane_file}", f"{name}.yml") \
                or out["changed"]
    return out


def _image_spec_for(args: dict, cwd: str, src: Any, result: dict, lane: dict, comments: dict, check_mode: bool) -> dict:
    """Write the lane's image spec into the user's images directory when it has none, so the next plan finds it.

    A spec already there (the user's, with their digest pin and image.lock.yml) is never touched."""
    images_dir = os.path.join(cwd, args.get("images_dir") or "images")
    image_path = os.path.join(images_dir, lane["image"], "image.yml")
    arch = args.get("arch") or _recipe_cluster.node_arch(result["choice"]["hardware"])
    spec = _recipe_cluster.image_spec(src, result, lane, arch)
    ref = f"{spec['upstream']['repository']}:{spec['upstream']['tag']}"
    out = {"image_spec": image_path, "image_spec_written": False, "images_dir_created": False, "_changed": False}
    # One text whether the spec is written now or kept: a second run must not change the lane.
    comments[("image",)] = (f"recipe docker image {ref}: spec images/{lane['image']}/image.yml (recipe_lane writes it "
                            "when missing, never over yours); pin its digest")
    if os.path.exists(image_path):
        return out
    out["image_spec_written"] = True
    # A new images/ directory shadows the collection's for every lane the plan reads (docs/install.md): say so.
    out["images_dir_created"] = not os.path.isdir(images_dir)
    if not check_mode:
        out["_changed"] = write_if_changed(image_path, _recipe_cluster.image_spec_text(spec, arch),
                                           f"the lane's image spec {image_path} (images_dir)", "image.yml")
    return out


def _header(src: Any, choice: dict, cluster: _recipe_cluster.Cluster) -> list[str]:
    return [f"Compiled by lanekit from the vLLM recipe {src.path} for the nodes of {cluster.where}.",
            "Choice: " + ", ".join(f"{k}={v}" for k, v in choice.items() if v not in (None, [], {})) + ".",
            "Each value's trailing comment names the recipe layer it came from. Re-planning with -e recipe",
            "rewrites this file: copy it to lanes/ to keep your edits and plan it with -e lane=NAME."]


def compile_for_cluster(args: dict, cwd: str, cluster: _recipe_cluster.Cluster, reports: str,
                        check_mode: bool = False) -> dict:
    """Cluster mode: compile the choice for the inventory's nodes; write the lane and its image spec under ``reports``."""
    src = recipe_source(args, cwd)
    sized, result = _recipe_cluster.compile_for_cluster(src, choice_from_args(args), cluster)
    choice = result["choice"]
    written = _recipe_cluster.write_cluster_lane(
        sized, result, reports, _header(src, choice, cluster),
        (lambda path, text: False) if check_mode else _write_creating_dirs, cluster.arch)
    # No strategy asked for: the recipe's recommended one was taken; the play says so and names the others.
    recommended = not args.get("strategy") and not args.get("preset")
    return {"changed": written["changed"], "recipe": src.path, "recipe_root": src.root, "choice": choice,
            "strategy_recommended": recommended,
            "strategies": _recipe_cluster.strategies_on(sized, choice["hardware"]),
            "docker_image": _recipe_lane.docker_image(sized, choice["hardware"], choice["variant"]),
            "notes": _recipe_lane.recipe_notes(sized, choice), "lane": written["lane"],
            "lane_file": written["lane_file"], "lanes_dir": written["lanes_dir"],
            "images_dir": written["images_dir"], "image_spec": written["image_spec"]}


def list_choices(args: dict, cwd: str) -> dict:
    """What the recipe offers, per hardware; nothing is compiled or written."""
    src = recipe_source(args, cwd)
    found = _recipe_offer.offer(src)
    return {"changed": False, "recipe": src.path, "recipe_root": src.root, "offer": found,
            "offer_lines": _recipe_offer.lines(found)}


def _write_creating_dirs(path: str, text: str) -> bool:
    # The reports directory (lanekit_reports_dir) is where recipe lanes are written: name it when it cannot hold them.
    return write_if_changed(path, text, f"the recipe lane's file {path} (under lanekit_reports_dir)")


def cluster_from_vars(task_vars: dict, group: str, template: Callable[[Any], Any]) -> _recipe_cluster.Cluster:
    """The inventory's view of the lane's nodes: the group's hosts and the first host's lanekit_* variables."""
    hosts = list((task_vars.get("groups") or {}).get(group) or [])
    if not hosts:
        raise LanekitError(f"the inventory has no hosts in group '{group}': list the GPU nodes of the lane there, "
                           "in rank order (see inventories/gb300/hosts.yml).")
    head = (task_vars.get("hostvars") or {}).get(hosts[0]) or {}

    def var(name: str) -> Any:
        value = head.get(name)
        return template(value) if value not in (None, "") else None

    # Text is read as a number only when it is ASCII digits ("8²" passes str.isdigit); the cluster says why not.
    gpus = var("lanekit_gpus_per_node")
    if isinstance(gpus, str) and whole_number(gpus) is not None:
        gpus = whole_number(gpus)
    inventory = task_vars.get("inventory_dir") or "the inventory"
    return _recipe_cluster.Cluster(hosts=hosts, hardware=var("lanekit_hardware"), gpus_per_node=gpus,
                                   arch=str(var("lanekit_node_arch") or "amd64"), where=f"inventory {inventory}")


def whole_cli_values(args: dict, cli_texts: list[str]) -> dict:
    """``args`` with ``pd``/``feature_modes`` read back whole from ``-e recipe_pd=JSON`` text.

    Ansible splits ``-e key=value`` at every space, so ``-e recipe_pd='{"prefill": {...}}'`` arrives
    cut after its first word; when an argument is such a cut prefix of the raw text, use the raw text.
    """
    out = dict(args)
    for key in ("pd", "feature_modes"):
        value = out.get(key)
        name = f"recipe_{key}="  # the extra-var that feeds this option (the recipe_lane playbook, the preflight role)
        for text in cli_texts:
            if isinstance(value, str) and text.startswith(name) and text[len(name):].startswith(value):
                out[key] = text[len(name):]
    return out


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _requires_connection = False

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        cli_texts = [str(item) for item in context.CLIARGS.get("extra_vars") or ()]
        args = whole_cli_values(args, cli_texts)
        if args.get("list_choices"):
            result.update(list_choices(args, os.getcwd()))
        elif args.get("nodes_group"):
            cluster = cluster_from_vars(task_vars, args["nodes_group"], self._templar.template)
            configured = task_vars.get("lanekit_reports_dir")
            reports = reports_root(self._templar.template(configured) if configured else None,
                                   task_vars.get("playbook_dir"), os.getcwd())
            # Planning must see the lane even in --check: the lane and image spec are written then too.
            result.update(compile_for_cluster(args, os.getcwd(), cluster, reports, False))
        else:
            result.update(compile_and_write(args, os.getcwd(), bool(self._task.check_mode)))
        return result
