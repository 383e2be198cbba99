# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Recipe lanes for a real cluster: size a recipe choice to an inventory's nodes, then write the lane and its image spec.

One job: ``lanekit.serving.plan_lane``/``deploy_lane`` with ``-e recipe=PATH -e recipe_strategy=NAME`` instead of
``-e lane=NAME``. The inventory says what the nodes are (``lanekit_hardware``, a ``_hardware``
profile id; ``lanekit_gpus_per_node``, default the profile's) and how many there are (the
``lane_nodes`` hosts). The choice is checked against them before the recipe compiles (hardware
that does not match the nodes, a single-node strategy on several hosts, too few nodes or GPUs for
the strategy's floor), compiled with the node count and GPUs per node of the inventory, and written
as ``<reports>/<lane>/<lane>.yml`` plus ``<reports>/<lane>/images/<image>/image.yml``: the recipe's
docker image for that hardware as an image spec that the image-pin lint refuses for deploy until a
full digest is set. The plan then reads both like a hand-written lane.
"""
from __future__ import annotations

import copy
import dataclasses
import os
import re
from collections.abc import Callable
from typing import Any

try:
    import yaml
except ImportError:  # module_utils must import anywhere; recipe lanes are written on the controller
    yaml = None

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import describe, load_file, whole_number
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _lane as _recipe_lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _rules as R
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import Choice, _runs_on
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._compose import compile_recipe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import RecipeSource

DIGEST_IN_REF_RE = re.compile(r"(?P<repo>[^@]+)@(?P<digest>sha256:[0-9a-f]{64})")  # fullmatch: no trailing newline


@dataclasses.dataclass
class Cluster:
    """What the inventory says about the lane's nodes."""

    hosts: list
    hardware: str | None = None  # lanekit_hardware
    gpus_per_node: int | None = None  # lanekit_gpus_per_node
    arch: str = "amd64"  # lanekit_node_arch
    where: str = "the inventory"


def _hardware(src: RecipeSource, choice: Choice, cluster: Cluster) -> str:
    preset = ((src.recipe.get("presets") or {}).get(choice.preset) or {}) if choice.preset else {}
    asked = choice.hardware or (preset.get("hardware") if isinstance(preset.get("hardware"), str) else None)
    if cluster.hardware is not None and not isinstance(cluster.hardware, str):
        raise LanekitError(
            f"{cluster.where} sets lanekit_hardware to {describe(cluster.hardware)}; a node has one hardware profile: "
            f"set it to one of {', '.join(sorted(PROFILES))}.")
    if cluster.hardware and cluster.hardware not in PROFILES:
        raise LanekitError(
            f"{cluster.where} sets lanekit_hardware to {cluster.hardware!r}, which is not a lanekit hardware profile; "
            f"use one of {', '.join(sorted(PROFILES))}.")
    if asked and cluster.hardware and asked != cluster.hardware:
        raise LanekitError(
            f"recipe {src.name}: the choice is for {asked} hardware but the nodes of {cluster.where} are "
            f"{cluster.hardware} (lanekit_hardware), so it cannot run there; plan it with an inventory of {asked} "
            f"nodes, or choose -e recipe_hardware={cluster.hardware}.")
    hardware = asked or cluster.hardware
    if not hardware:
        raise LanekitError(
            f"recipe {src.name}: no hardware given; set lanekit_hardware in {cluster.where} (one of "
            f"{', '.join(sorted(PROFILES))}) or pass -e recipe_hardware=ID.")
    if hardware not in PROFILES:
        raise LanekitError(
            f"recipe {src.name}: hardware {hardware} has no lanekit hardware profile, so no lane can be planned for "
            f"it (known: {', '.join(sorted(PROFILES))}); write its commands with ansible-playbook "
            f"lanekit.serving.recipe_lane -e commands_file=PATH.")
    return hardware


def sized_source(src: RecipeSource, hardware: str, gpus_per_node: int) -> RecipeSource:
    """``src`` with the hardware's taxonomy profile sized to the inventory's GPUs per node."""
    profiles = copy.deepcopy(src.profiles)
    profile = profiles.get(hardware)
    if not isinstance(profile, dict):
        raise LanekitError(
            f"recipe {src.name}: hardware {hardware} is not a profile of {src.root}/taxonomy.yaml, so the recipe "
            f"cannot be composed for it; add it there or use -e recipe_root=DIR with a tree that has it.")
    taxonomy_gpus = profile.get("gpu_count") if isinstance(profile.get("gpu_count"), int) else 1
    if gpus_per_node != taxonomy_gpus:
        if isinstance(profile.get("vram_gb"), (int, float)):
            profile["vram_gb"] = profile["vram_gb"] * gpus_per_node / (taxonomy_gpus or 1)
        profile["gpu_count"] = gpus_per_node
    return dataclasses.replace(src, profiles=profiles)


def strategies_on(src: RecipeSource, hardware: str) -> list[str]:
    """The strategies the recipe offers on ``hardware``, in the recipe's order."""
    profile = src.profiles.get(hardware)
    if not isinstance(profile, dict):
        return []
    return [s for s in R.offered_strategies(src.recipe)
            if s in src.strategies and R.strategy_on_hardware(src.recipe, s, profile, hardware)]


def recommended_strategy(src: RecipeSource, hardware: str, nodes: int, gpus: int, where: str) -> str:
    """The strategy taken when none is asked for: the recipe's ``recommended_command`` when it is for this
    hardware and fits ``nodes`` nodes of ``gpus`` GPUs, else its ``default_strategy`` when that fits, else the
    first offered strategy that fits.

    Prefill/decode is never taken on its own: its pools are a choice of their own.
    """
    def fits(strategy: str) -> bool:
        deploy = (src.strategies.get(strategy) or {}).get("deploy_type") or "single_node"
        floor = R.min_gpus(src.recipe, strategy, hardware)
        if deploy == "single_node":
            return nodes == 1 and gpus >= floor
        return deploy == "multi_node" and nodes >= 2 and nodes * gpus >= floor

    offered = strategies_on(src, hardware)
    recommended = src.recipe.get("recommended_command") or {}
    if recommended.get("hardware") == hardware and recommended.get("strategy") in offered \
            and fits(recommended["strategy"]):
        return recommended["strategy"]
    # The source form's default_strategy (the rendered form drops it): the strategy the site's picker starts on.
    default = src.recipe.get("default_strategy")
    if isinstance(default, str) and default in offered and fits(default):
        return default
    for strategy in offered:
        if fits(strategy):
            return strategy
    raise LanekitError(
        f"recipe {src.name}: no -e recipe_strategy was given, and none of the recipe's strategies on {hardware} "
        f"({', '.join(offered) or 'none'}) fits the {nodes} host{'s' if nodes != 1 else ''} of {gpus} GPUs in "
        f"lane_nodes of {where}; pass -e recipe_strategy=NAME, or change lane_nodes.")


def cluster_choice(src: RecipeSource, choice: Choice, cluster: Cluster) -> tuple[RecipeSource, Choice]:
    """The choice sized to the cluster (hardware, node count, variant), or a one-sentence refusal."""
    hardware = _hardware(src, choice, cluster)
    profile = PROFILES[hardware]
    # Only an unset value takes the profile's count: 0 is a value (and refused), not "unset".
    gpus = profile["gpus_per_node"] if cluster.gpus_per_node in (None, "") else cluster.gpus_per_node
    gpus = whole_number(gpus) if isinstance(gpus, str) else gpus
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise LanekitError(f"{cluster.where} sets lanekit_gpus_per_node to {describe(cluster.gpus_per_node)}; "
                           f"expected a whole number of at least 1 (or leave it unset for the "
                           f"{profile['display_name']}'s {profile['gpus_per_node']}).")
    if gpus > profile["gpus_per_node"]:
        raise LanekitError(
            f"{cluster.where} sets lanekit_gpus_per_node to {gpus}, but a {profile['display_name']} node has "
            f"{profile['gpus_per_node']} GPUs; lower it or fix lanekit_hardware.")
    sized = sized_source(src, hardware, gpus)
    preset = ((src.recipe.get("presets") or {}).get(choice.preset) or {}) if choice.preset else {}
    strategy = choice.strategy or preset.get("strategy")
    nodes = len(cluster.hosts)
    if not strategy:
        # As the recipe site does: no strategy asked for is the recipe's recommended one for these nodes.
        strategy = recommended_strategy(sized, hardware, nodes, gpus, cluster.where)
    out = dataclasses.replace(choice, hardware=hardware, strategy=strategy or None,
                              feature_modes=dict(choice.feature_modes or {}))
    spec = src.strategies.get(strategy) if isinstance(strategy, str) else None
    if spec is not None:
        deploy = spec.get("deploy_type") or "single_node"
        asked_nodes = choice.nodes if choice.nodes not in (None, "") else None
        if asked_nodes is not None and str(asked_nodes) != str(nodes):
            raise LanekitError(
                f"recipe {src.name}: -e recipe_nodes={asked_nodes} disagrees with {cluster.where}, whose group lane_nodes "
                f"has {nodes} host{'s' if nodes != 1 else ''}; the lane runs on the inventory's nodes, so drop "
                f"-e recipe_nodes or change lane_nodes.")
        floor = R.min_gpus(src.recipe, strategy, hardware)
        if deploy == "single_node" and nodes != 1:
            raise LanekitError(
                f"recipe {src.name}: strategy {strategy} runs on 1 node but the group lane_nodes of {cluster.where} "
                f"has {nodes} hosts; list one host there, or choose a multi_node strategy.")
        if deploy == "multi_node" and (nodes < 2 or nodes * gpus < floor):
            need = max(2, -(-int(floor) // gpus))
            raise LanekitError(
                f"recipe {src.name}: strategy {strategy} on {hardware} needs at least {need} nodes"
                + (f" ({int(floor)} GPUs)" if floor else "")
                + f" but {cluster.where} has {nodes} host{'s' if nodes != 1 else ''} in lane_nodes with {gpus} GPUs "
                f"each ({nodes * gpus} GPUs); add nodes or choose a single_node strategy.")
        if deploy == "multi_node":
            out.nodes = nodes
        elif deploy == "single_node":
            out.nodes = 1
        elif deploy == "pd_cluster":
            out.pd = _pd_for_cluster(src, strategy, choice.pd, nodes, cluster)
        if deploy == "single_node" and floor and gpus < floor:
            raise LanekitError(
                f"recipe {src.name}: strategy {strategy} on {hardware} needs at least {int(floor)} GPUs but a node of "
                f"{cluster.where} has {gpus} (lanekit_gpus_per_node); choose a multi_node strategy.")
    if out.variant is None and not out.preset:
        # No variant asked for: the recipe's default for this hardware, else the first variant that
        # runs on it (the rule presets already follow), so `-e recipe_strategy=` alone plans on any hardware.
        variants = src.recipe.get("variants") or {}
        raw = (src.recipe.get("meta") or {}).get("default_variant")
        named = raw if isinstance(raw, str) else R.keyed(raw, sized.profiles.get(hardware) or {}, hardware)
        if not (isinstance(named, str) and named in variants) and not _runs_on(sized, variants.get("default") or {}, hardware):
            out.variant = next((key for key, v in variants.items() if _runs_on(sized, v or {}, hardware)), None)
    return sized, out


def _pd_for_cluster(src: RecipeSource, strategy: str, pd: Any, nodes: int, cluster: Cluster) -> dict:
    """The P/D pools sized to the inventory: each pool on nodes of its own, together every lane_nodes host."""
    pd = copy.deepcopy(pd) if isinstance(pd, dict) else {}
    sized = any(isinstance(pd.get(r), dict) and "nodes" in pd[r] for r in ("prefill", "decode"))
    for role, share in (("prefill", (nodes + 1) // 2), ("decode", nodes // 2)):
        pool = pd.setdefault(role, {})
        if not isinstance(pool, dict):
            return pd  # the compiler refuses the shape with its own sentence
        pool.setdefault("nodes", None if sized else share)
    asked = [pd[r].get("nodes") for r in ("prefill", "decode")]
    if any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in asked) or sum(asked) != nodes:
        raise LanekitError(
            f"recipe {src.name}: strategy {strategy} puts the prefill and decode pools on nodes of their own, and "
            f"{cluster.where} has {nodes} host{'s' if nodes != 1 else ''} in lane_nodes, but -e recipe_pd asks for "
            f"{asked[0]} prefill + {asked[1]} decode node(s); give pools of at least 1 node each that add up to "
            f"{nodes}, e.g. -e recipe_pd='{{\"prefill\": {{\"nodes\": {(nodes + 1) // 2}}}, \"decode\": "
            f"{{\"nodes\": {nodes // 2}}}}}'.")
    return pd


def compile_for_cluster(src: RecipeSource, choice: Choice, cluster: Cluster) -> tuple[RecipeSource, dict]:
    """(sized source, compiled result) for the cluster; refusals are one sentence."""
    sized, resolved = cluster_choice(src, choice, cluster)
    result = compile_recipe(sized, resolved)
    if result["choice"]["hardware"] != resolved.hardware:  # pragma: no cover - presets are refused on mismatch
        raise LanekitError(f"recipe {src.name}: the compiled choice is for {result['choice']['hardware']}, "
                           f"not the inventory's {resolved.hardware}.")
    return sized, result


def image_spec(src: RecipeSource, result: dict, lane: dict, arch: str, previous: dict | None = None) -> dict:
    """The image spec for the recipe's docker image on this hardware (unpinned unless the ref carries a digest).

    Digests already set in ``previous`` (the spec written before, edited by a user) for the same
    upstream repository and tag are kept.
    """
    ref = _recipe_lane.docker_image(src, result["choice"]["hardware"], result["choice"]["variant"])
    digests: dict = {}
    match = DIGEST_IN_REF_RE.fullmatch(ref)
    if match:
        repository, tag, digests = match["repo"], "pinned", {arch: match["digest"]}
        if ":" in repository.rsplit("/", 1)[-1]:
            repository, tag = repository.rsplit(":", 1)
    elif ":" in ref.rsplit("/", 1)[-1]:
        repository, tag = ref.rsplit(":", 1)
    else:
        repository, tag = ref, "latest"
    old = (previous or {}).get("upstream") or {}
    if old.get("repository") == repository and old.get("tag") == tag and isinstance(old.get("digests"), dict):
        digests = dict(old["digests"], **digests)
    return {
        "name": lane["image"],
        "description": f"The vLLM recipe's image for {result['choice']['hardware']} ({ref}), "
                       f"written by lanekit for lane {lane['lane']}.",
        "upstream": {"repository": repository, "tag": tag, "digests": digests},
        "entrypoint": list(lane["serve"]["entrypoint"]),
        "patches": [],
        "lanes": [lane["lane"]],
    }


# Grace-based trays, the DGX Spark and the DGX Station are arm64, and so is the Kunpeng host of an Ascend 950PR
# (the recipes' "CPU binding ... on the Kunpeng host"); a profile may name its own (the CPU, TPU and XPU ones do).
ARM64_HARDWARE = ("dgx_spark_gb10", "gb200", "gb300", "dgx_station_gb300", "ascend_950pr")


def node_arch(hardware: str) -> str:
    """The nodes' CPU architecture (docker's spelling) a hardware profile implies, when no inventory says."""
    return str((PROFILES.get(hardware) or {}).get("arch") or ("arm64" if hardware in ARM64_HARDWARE else "amd64"))


def image_spec_text(spec: dict, arch: str) -> str:
    """The image spec file's text: how to pin it, then the spec."""
    lane = (spec.get("lanes") or ["<lane>"])[0]
    return ("---\n# Written by lanekit from the vLLM recipe's docker image for this hardware. Pin it with\n"
            f"#   ansible-playbook lanekit.serving.pin -e lane={lane} --check --diff   (then without --check)\n"
            f"# or set lanekit_image_digests['{spec['name']}']['{arch}'] in the inventory to the full digest\n"
            f"# (docker buildx imagetools inspect {spec['upstream']['repository']}:{spec['upstream']['tag']}).\n"
            + yaml.safe_dump(spec, sort_keys=False, default_flow_style=False))


def write_cluster_lane(src: RecipeSource, result: dict, reports_root: str, header: list[str],
                       write: Callable[[str, str], bool],
                       arch: str = "amd64") -> dict:
    """Write ``<reports_root>/<lane>/<lane>.yml`` and its image spec; return lane, lanes_dir, images_dir, changed.

    ``write(path, text) -> bool`` writes atomically when the text changed (the action's helper).
    """
    name = _recipe_lane.lane_name_for(src, result)
    lane, comments = _recipe_lane.build_lane(src, result, name)
    lane_dir = os.path.join(reports_root, name)
    images_dir = os.path.join(lane_dir, "images")
    image_path = os.path.join(images_dir, lane["image"], "image.yml")
    previous = None
    if os.path.isfile(image_path):
        try:
            previous = load_file(image_path)
        except LanekitError:
            previous = None  # unreadable: rewritten from the recipe (its digests cannot be kept)
    spec = image_spec(src, result, lane, arch, previous if isinstance(previous, dict) else None)
    comments[("image",)] = (f"the recipe's image {spec['upstream']['repository']}:{spec['upstream']['tag']}, "
                            f"spec in images/{lane['image']}/image.yml beside this file")
    text = _recipe_lane.render(lane, comments, header)
    changed = write(os.path.join(lane_dir, f"{name}.yml"), text)
    changed = write(image_path, image_spec_text(spec, arch)) or changed
    return {"lane": name, "lanes_dir": lane_dir, "images_dir": images_dir, "lane_file": os.path.join(lane_dir, f"{name}.yml"),
            "image_spec": image_path, "changed": changed, "lane_data": lane}
