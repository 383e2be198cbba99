"""Shared helpers: read an example inventory (hosts.yml + group_vars) and plan a recipe on it, as preflight does."""
from __future__ import annotations

import glob
import os

import yaml

from ansible_collections.lanekit.serving.plugins.action.recipe_compile import compile_for_cluster
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._cluster import Cluster
from tests.unit.helpers.recipes import REPO, SEED

INVENTORIES = os.path.join(REPO, "inventories")
# What sim-up writes into the sim inventories (gitignored) while `make test` runs the unit tests: a
# test reads the inventory as committed, whether or not the cluster is up yet.
SIM_GENERATED = ("sim_pins.yml", "sim_ssh.yml")
# The seed recipe's recommended choice per example inventory (docs/recipes.md).
RECOMMENDED = {
    "gb300": {"strategy": "single_node_tp"},
    "h200": {"strategy": "multi_node_tp"},
    "b200": {"strategy": "single_node_tp"},
    "mi355x": {"strategy": "single_node_tp", "features": "tool_calling,reasoning"},
}


def inventory_hosts(name: str, extra_vars: dict | None = None, hosts: int | None = None) -> list[dict]:
    """The lane_nodes hosts of inventories/<name> with their merged variables, in rank order."""
    inv = os.path.join(INVENTORIES, name)
    with open(os.path.join(inv, "hosts.yml"), encoding="utf-8") as handle:
        listed = yaml.safe_load(handle)["all"]["children"]["lane_nodes"]["hosts"]
    group_vars: dict = {}
    for path in sorted(glob.glob(os.path.join(inv, "group_vars", "all", "*.yml"))):
        if os.path.basename(path) in SIM_GENERATED:
            continue
        with open(path, encoding="utf-8") as handle:
            group_vars.update(yaml.safe_load(handle) or {})
    group_vars.update(extra_vars or {})
    names = list(listed)
    while hosts is not None and len(names) < hosts:  # more nodes of the same kind
        names.append(f"{names[0]}-extra{len(names)}")
    names = names[:hosts] if hosts is not None else names
    return [{"name": h, "vars": dict(group_vars, **(listed.get(h) or {"fabric_ip": f"10.99.0.{i}"})), "layers": []}
            for i, h in enumerate(names)]


def cluster_of(name: str, hosts: list[dict]) -> Cluster:
    head = hosts[0]["vars"]
    return Cluster(hosts=[h["name"] for h in hosts], hardware=head.get("lanekit_hardware"),
                   gpus_per_node=head.get("lanekit_gpus_per_node"), arch=head.get("lanekit_node_arch", "amd64"),
                   where=f"inventory inventories/{name}")


def compile_on(name: str, reports: str, choice: dict | None = None, extra_vars: dict | None = None,
               hosts: int | None = None, recipe: str = SEED, recipe_root: str | None = None) -> dict:
    """Compile ``recipe`` (default the seed; ``choice``, default the inventory's recommended one) for inventories/<name>."""
    nodes = inventory_hosts(name, extra_vars, hosts)
    args = dict(choice if choice is not None else RECOMMENDED[name], recipe=recipe)
    if recipe_root:
        args["recipe_root"] = recipe_root
    return compile_for_cluster(args, REPO, cluster_of(name, nodes), reports)


def plan_on(name: str, reports: str, choice: dict | None = None, extra_vars: dict | None = None,
            purpose: str = "plan", hosts: int | None = None, recipe: str = SEED, recipe_root: str | None = None):
    """(compile result, plan, findings) of ``recipe``'s choice (default the seed's) on inventories/<name>."""
    compiled = compile_on(name, reports, choice, extra_vars, hosts, recipe, recipe_root)
    plan, findings = plan_lane(compiled["lanes_dir"], compiled["images_dir"], compiled["lane"],
                               inventory_hosts(name, extra_vars, hosts), [], purpose, reports)
    return compiled, plan, findings
