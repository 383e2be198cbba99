"""How many recipe choices give a lane: a stratified sample of (recipe x hardware id x strategy) of a recipe tree.

One job: measure, for issue 27, what share of the choices vLLM's recipe site offers lanekit can deploy.
Each hardware id of the tree's taxonomy is a stratum; from each, ``--per-id`` (recipe, strategy) pairs are
drawn without replacement with a fixed seed (every run draws the same ones), and each choice is taken
as far as it goes:

1. ``recipe refuses``: the recipe compiler refuses it with the site's own rule (a restricted profile the
   recipe does not list, a strategy it does not offer...): the site shows no command either;
Without ``--cross-product`` the population is what the site's pickers show (a restricted id only for the
recipes that list it, strategies the recipe offers on that id): the choices a user can make there.

2. ``no lane: <reason>``: it compiles, but lanekit writes no lane (no hardware profile, a co-located
   P/D pool...), as ``lanekit.serving.plan_lane -e recipe=...`` would refuse it;
3. ``lane, lint refuses: <rule ids>``: the lane is written but the plan's lint refuses it for deploy
   (the image pin aside: a recipe image is never pinned until a person pins it);
4. ``lane plans``: the lane is written and plans on an inventory of the profile's nodes.

The inventory is made up per choice: as many hosts as the choice's nodes, the profile's GPUs per
node, the architecture its nodes have. Run from the checkout:
``python tests/tools/hardware_sweep.py [--root ../shared/recipes/upstream] [--per-id 12] [--seed 27] [--all]
[--cross-product]``.
"""
from __future__ import annotations

import argparse
import atexit
import collections
import os
import random
import shutil
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _import_collection() -> None:
    """Import the checkout as ansible_collections.lanekit.serving (a link in a temporary directory)."""
    root = tempfile.mkdtemp(prefix="lanekit-sweep-")
    atexit.register(shutil.rmtree, root, True)
    link = os.path.join(root, "ansible_collections", "lanekit", "serving")
    os.makedirs(os.path.dirname(link))
    os.symlink(REPO, link)
    sys.path.insert(0, root)


def _recipes(root: str) -> list[str]:
    out = []
    for folder, dirs, names in os.walk(os.path.join(root, "models")):
        dirs.sort()
        out += [os.path.join(folder, n) for n in sorted(names) if n.endswith((".yaml", ".yml"))]
    return out


def population(root: str, picker: bool) -> tuple[dict, dict, list, int]:
    """(recipe sources by path, profiles, [(path, hardware, strategy)], size of the whole cross product).

    ``picker``: only the choices the recipe site's pickers show: a hardware id the recipe may use (not
    restricted, or listed in its meta.hardware, and not marked unsupported there) and a strategy the
    recipe offers on it. Without it, the whole cross product (mostly restricted ids the site hides).
    """
    from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _rules as R
    from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import load_recipe, load_tree
    tree = load_tree(root)
    sources = {path: load_recipe(path, root) for path in _recipes(root)}
    profiles, strategies = tree
    everything = [(path, hw, s) for path in sources for hw in profiles for s in sorted(strategies)]

    def shown(path: str, hw: str, strategy: str) -> bool:
        recipe = sources[path].recipe
        listed = (recipe.get("meta") or {}).get("hardware") or {}
        return ((not profiles[hw].get("restricted") or hw in listed) and listed.get(hw) != "unsupported"
                and strategy in R.offered_strategies(recipe)
                and R.strategy_on_hardware(recipe, strategy, profiles[hw], hw))

    return sources, profiles, [c for c in everything if not picker or shown(*c)], len(everything)


def stratified(choices: list, per_id: int, seed: int) -> list:
    """``per_id`` choices of each hardware id, drawn without replacement with a fixed seed."""
    by_id: dict = collections.defaultdict(list)
    for choice in choices:
        by_id[choice[1]].append(choice)
    rng = random.Random(seed)
    out = []
    for hardware in sorted(by_id):
        pool = by_id[hardware]
        out += rng.sample(pool, min(per_id, len(pool)))
    return out


def _hosts(count: int, hardware: str) -> list[dict]:
    from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES
    from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._cluster import node_arch
    group = {"lanekit_weights_root": "/mnt/nfs/models", "lanekit_node_arch": node_arch(hardware),
             "lanekit_hardware": hardware, "lanekit_gpus_per_node": PROFILES[hardware]["gpus_per_node"]}
    return [{"name": f"node-{i + 1:02d}", "vars": dict(group, fabric_ip=f"10.99.0.{i + 1}"), "layers": []}
            for i in range(count)]


def outcome(src, hardware: str, strategy: str, reports: str) -> str:
    """Where one choice stops (see the module docstring)."""
    from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
    from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES
    from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane
    from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import Choice
    from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._cluster import (
        Cluster,
        compile_for_cluster,
        node_arch,
        write_cluster_lane,
    )
    from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._compose import compile_recipe
    from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._rules import RecipeRefusal
    try:
        result = compile_recipe(src, Choice(hardware=hardware, strategy=strategy))
    except RecipeRefusal as err:
        return f"recipe refuses ({err.rule})"
    if hardware not in PROFILES:
        return "no lane: no hardware profile"
    pd = result["choice"].get("pd") or {}
    nodes = sum(p["nodes"] for p in pd.values()) if pd else (result["choice"]["nodes"] or 1)
    if pd and any(p["nodes"] < 1 for p in pd.values()):
        return "no lane: co-located P/D pools"
    hosts = _hosts(nodes, hardware)
    cluster = Cluster(hosts=[h["name"] for h in hosts], hardware=hardware, arch=node_arch(hardware),
                      where="the sweep's inventory")
    try:
        sized, compiled = compile_for_cluster(src, Choice(hardware=hardware, strategy=strategy, pd=pd or None),
                                              cluster)
        written = write_cluster_lane(sized, compiled, reports, ["sweep"], _write, node_arch(hardware))
    except LanekitError as err:
        return "no lane: " + str(err).split(" but ", 1)[-1][:80]
    try:
        _plan, findings = plan_lane(written["lanes_dir"], written["images_dir"], written["lane"], hosts, [], "deploy")
    except LanekitError as err:
        return "lane, plan refuses: " + str(err)[:80]
    rules = sorted({e["id"] for e in findings["errors"]} - {"image-pin"})
    return f"lane, lint refuses: {', '.join(rules)}" if rules else "lane plans"


def _write(path: str, text: str) -> bool:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(REPO), "shared", "recipes", "upstream"))
    parser.add_argument("--per-id", type=int, default=12)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--all", action="store_true", help="every choice of the population, not a sample")
    parser.add_argument("--cross-product", action="store_true",
                        help="sample the whole recipe x hardware x strategy product, not only what the site's pickers show")
    args = parser.parse_args(argv)
    _import_collection()
    sources, profiles, choices, product = population(args.root, not args.cross_product)
    sample = choices if args.all else stratified(choices, args.per_id, args.seed)
    counts: collections.Counter = collections.Counter()
    by_id: dict = collections.defaultdict(collections.Counter)
    with tempfile.TemporaryDirectory(prefix="lanekit-sweep-reports-") as reports:
        for path, hardware, strategy in sample:
            result = outcome(sources[path], hardware, strategy, reports)
            kind = result.split(":", 1)[0].split(" (", 1)[0]
            counts[result] += 1
            by_id[hardware][kind] += 1
    print(f"{len(sample)} choices ({'all' if args.all else f'{args.per_id} per hardware id, seed {args.seed}'}) of "
          f"{len(choices)} {'in the cross product' if args.cross_product else 'the recipe pickers show'} "
          f"({len(sources)} recipes x {len(profiles)} hardware ids x 9 strategies = {product})")
    for result, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        print(f"{count:5d}  {result}")
    compiled = sum(c for r, c in counts.items() if not r.startswith("recipe refuses"))
    lanes = sum(c for r, c in counts.items() if r.startswith("lane"))
    plans = counts.get("lane plans", 0)
    print(f"compiled {compiled}; gives a lane {lanes} ({lanes / max(1, compiled):.0%} of compiled); "
          f"plans for deploy {plans}")
    for hardware in sorted(by_id):
        print(f"  {hardware:18s} " + ", ".join(f"{k} {v}" for k, v in sorted(by_id[hardware].items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
