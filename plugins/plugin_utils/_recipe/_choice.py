# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Recipe choices: check a choice against a recipe and resolve its defaults, before anything composes.

One job: take what the user asked for (hardware, strategy, variant, preset, features, feature modes,
node count, P/D pools) and either return the resolved :class:`Choice` (defaults filled in, the
preset's selections applied) or raise the :class:`RecipeRefusal` of the first rule it breaks. The
rules and their order follow the conformance corpus (``rules`` of ``expected/cases.json``); presets
are lanekit's own (the recipe site does not read them).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from ansible_collections.lanekit.serving.plugins.module_utils._yaml import describe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _rules as R
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import RecipeSource, recipes_listing
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._rules import RecipeRefusal


@dataclass
class Choice:
    hardware: str | None = None
    strategy: str | None = None
    variant: str | None = None
    preset: str | None = None
    features: list[str] | None = None  # the complete enabled set; None = the recipe's defaults
    feature_modes: dict[str, str] = field(default_factory=dict)
    nodes: int | None = None
    pd: dict[str, Any] | None = None  # as given; resolve() replaces it with the sized pools
    # Filled by resolve():
    modes: dict[str, str] = field(default_factory=dict)
    pools: dict[str, Any] = field(default_factory=dict)
    preset_data: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        # What was not chosen is left out, never printed as None.
        parts = [f"{key}={value}" for key, value in (("hardware", self.hardware), ("strategy", self.strategy))
                 if value] + [f"variant={self.variant or 'default'}"]
        if self.preset:
            parts.append(f"preset={self.preset}")
        if self.nodes not in (None, 1):
            parts.append(f"nodes={self.nodes}")
        if self.pd:
            parts.append("pd=" + json.dumps(self.pd, separators=(",", ":"), sort_keys=True, default=str))
        return "the choice " + " ".join(parts)


class Pool(TypedDict):
    """One resolved P/D pool: its node count (0 = co-located on half a node) and parallelism mode."""

    nodes: int
    parallelism: str


@dataclass
class ResolvedChoice:
    """A choice :func:`resolve` accepted: the names, features and modes filled in, the P/D pools sized."""

    hardware: str
    strategy: str
    variant: str
    preset: str | None
    features: list[str]
    feature_modes: dict[str, str]
    nodes: int | None  # None for pd_cluster (sized by its pools)
    pd: dict[str, Pool] | None  # pd_cluster only
    modes: dict[str, str]
    preset_data: dict[str, Any]


class _Fail(Protocol):
    """``fail(rule, reason)``: the refusal to raise; ``fail(what)`` alone: ``what`` is not a whole number."""

    def __call__(self, rule: str, reason: str | None = None) -> RecipeRefusal: ...


def _int_or_none(value: Any, what: str, fail: _Fail) -> int | None:
    if value in (None, ""):
        return None
    if isinstance(value, bool):
        raise fail(what)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise fail(what) from None
    if str(number) != str(value).strip() and not isinstance(value, int):
        raise fail(what)
    return number


def _check_inputs(c: Choice, fail: _Fail) -> None:
    """The choice's own values have the kinds the rules compare (a list-valued mode would be unhashable)."""
    for key in ("hardware", "strategy", "variant", "preset"):
        value = getattr(c, key)
        if value is not None and not isinstance(value, str):
            raise fail("bad_input", f"{key} is {describe(value)}; pass a name (-e {key}=NAME)")
    if c.features is not None and (not isinstance(c.features, list) or
                                   not all(isinstance(f, str) for f in c.features)):
        raise fail("bad_input", f"features is {describe(c.features)}; pass a list of feature names (-e features=a,b)")
    modes = c.feature_modes or {}
    if not isinstance(modes, dict):
        raise fail("bad_input", f"feature_modes is {describe(modes)}; pass a mapping of feature to mode, "
                   "e.g. -e '{\"feature_modes\": {\"spec_decoding\": \"mtp\"}}'")
    for fkey, mode in modes.items():
        if not isinstance(fkey, str) or not isinstance(mode, str):
            raise fail("bad_input", f"feature_modes.{fkey} is {describe(mode)}; a feature takes one mode, "
                       "named as text (e.g. {\"spec_decoding\": \"mtp\"})")


def _apply_preset(src: RecipeSource, c: Choice, fail: _Fail) -> None:
    presets = src.recipe.get("presets") or {}
    if c.preset not in presets:
        raise fail("unknown_preset", f"preset {c.preset!r} is not one of the recipe's presets "
                   f"({', '.join(presets) or 'none'})")
    p = presets[c.preset] or {}
    c.preset_data = p
    for key in ("hardware", "strategy"):
        want = p.get(key)
        if want and getattr(c, key) and getattr(c, key) != want:
            raise fail("preset_mismatch", f"preset {c.preset} is for {key} {want}, not {getattr(c, key)}")
        if want and not getattr(c, key):
            setattr(c, key, want)
    allowed = p.get("variants")
    if isinstance(allowed, list) and allowed:
        if c.variant is None:
            c.variant = allowed[0]
        elif c.variant not in allowed:
            raise fail("preset_mismatch", f"preset {c.preset} is for variant(s) {', '.join(allowed)}, "
                       f"not {c.variant}")
    select = p.get("select") or {}
    if c.nodes is None and select.get("nodes") is not None:
        c.nodes = select["nodes"]
    roles = p.get("roles") or {}
    if roles and c.pd is None:
        c.pd = {r: {k: v for k, v in (roles.get(r) or {}).items() if k in ("nodes", "parallelism")}
                for r in ("prefill", "decode") if r in roles}


def _select_features(src: RecipeSource, c: Choice, variant: dict, hardware: str, strategy: str) -> list[str]:
    recipe = src.recipe
    features = R.default_features(recipe, variant, hardware, strategy)
    picks = ((c.preset_data.get("select") or {}).get("features")) or {}
    for fkey, value in picks.items():
        if value is False:
            features = [f for f in features if f != fkey]
        elif fkey not in features:
            features.append(fkey)
        if isinstance(value, str) and fkey not in c.feature_modes:
            c.feature_modes[fkey] = value
    order = list(recipe.get("features") or {})
    c.features = sorted(features, key=lambda f: order.index(f) if f in order else len(order))
    return c.features


def _runs_on(src: RecipeSource, variant: dict, hardware: str) -> bool:
    profile = src.profiles.get(hardware)
    supported = variant.get("supported_hardware")
    return isinstance(profile, dict) and R.precision_ok(profile, variant or {})[0] and \
        (not isinstance(supported, list) or not supported or hardware in supported)


def _default_variant(src: RecipeSource, c: Choice, hardware: str) -> str:
    """No variant asked for: ``meta.default_variant`` (a name or a hardware-keyed map), else ``default``;
    a preset without ``variants`` takes the first variant that runs on its hardware."""
    recipe = src.recipe
    variants = recipe.get("variants") or {}
    profile = src.profiles.get(hardware) or {}
    raw = (recipe.get("meta") or {}).get("default_variant")
    named = raw if isinstance(raw, str) else R.keyed(raw, profile, hardware)
    if isinstance(named, str) and named in variants:
        return named
    if c.preset and not _runs_on(src, variants.get("default") or {}, hardware):
        for key, variant in variants.items():
            if _runs_on(src, variant or {}, hardware):
                return key
    return "default"


def resolve(src: RecipeSource, c: Choice) -> ResolvedChoice:
    """Check ``c`` against the recipe; fill its defaults (in ``c`` too); raise the first rule it breaks."""
    recipe = src.recipe

    def fail(rule: str, reason: str | None = None) -> RecipeRefusal:
        if reason is None:  # an input-shape problem
            return R.refuse(src.name, c.describe(), "bad_input", f"{rule} is not a whole number")
        return R.refuse(src.name, c.describe(), rule, reason)

    c.nodes = _int_or_none(c.nodes, "nodes", fail)
    _check_inputs(c, fail)
    c.feature_modes = dict(c.feature_modes or {})
    if c.preset:
        _apply_preset(src, c, fail)
    if not c.hardware:
        raise fail("bad_input", "no hardware was given; pass -e recipe_hardware=ID (one of "
                   f"{', '.join(sorted(src.profiles))}) or -e recipe_preset=NAME")
    if not c.strategy:
        profile = src.profiles.get(c.hardware)
        offered = [s for s in R.offered_strategies(recipe) if s in src.strategies and isinstance(profile, dict)
                   and R.strategy_on_hardware(recipe, s, profile, c.hardware)]
        raise fail("bad_input", "no strategy was given; pass -e recipe_strategy=NAME, on "
                   f"{c.hardware} one of {', '.join(offered) or 'none the recipe offers'}")
    hardware, strategy_key = c.hardware, c.strategy
    meta = recipe.get("meta") or {}
    if c.variant is None:
        c.variant = _default_variant(src, c, hardware)
    variant_key = c.variant

    if "omni" in (meta.get("tasks") or []):
        raise fail("omni_recipe", "it is an omni recipe (meta.tasks has omni), which serves with "
                   "`vllm serve <model> --omni` and no serving strategy")
    profile = src.profiles.get(c.hardware)
    if not isinstance(profile, dict):
        raise fail("unknown_hardware", f"{c.hardware} is not a hardware profile of {src.root}/taxonomy.yaml "
                   f"(known: {', '.join(sorted(src.profiles))})")
    if c.strategy not in src.strategies:
        raise fail("unknown_strategy", f"there is no strategies/{c.strategy}.yaml (known: "
                   f"{', '.join(sorted(src.strategies))}; kv_store deployments are not serving strategies)")
    variants = recipe.get("variants") or {}
    if c.variant not in variants:
        raise fail("unknown_variant", f"variant {c.variant} is not one of {', '.join(variants)}")
    variant = variants[c.variant] or {}
    declared = meta.get("hardware") or {}
    if profile.get("restricted") and c.hardware not in declared:
        # As the site's picker: a restricted profile appears only on the recipes that list it; name them.
        others = recipes_listing(src.root, c.hardware)
        raise fail("restricted_hardware", f"{c.hardware} is a restricted profile the recipe does not list in meta.hardware"
                   + (f"; the recipes of {src.root} that list it: {', '.join(others)}" if others else
                      f", and no recipe of {src.root} lists it"))
    if declared.get(c.hardware) == "unsupported":
        raise fail("hardware_unsupported", f"meta.hardware.{c.hardware} is unsupported")
    ok, gate = R.precision_ok(profile, variant)
    if not ok:
        gate = gate or {}  # a failed gate is always the gate's mapping
        raise fail("precision_gate", f"precision {variant.get('precision')} needs "
                   f"{gate.get('brand', '')} {gate.get('generation', '')}".rstrip() +
                   f" hardware and {c.hardware} is {profile.get('brand')} {R.generation(profile)}")
    supported = variant.get("supported_hardware")
    if isinstance(supported, list) and supported and c.hardware not in supported:
        raise fail("variant_supported_hardware", f"variant {c.variant} runs only on {', '.join(supported)}")
    count = profile.get("gpu_count")
    gpus = count if isinstance(count, int) else 1
    scalable = profile.get("scalable") is not False
    vram_min = variant.get("vram_minimum_gb") or 0
    if not scalable and vram_min and profile.get("vram_gb") and vram_min > profile["vram_gb"]:
        raise fail("does_not_fit_workstation", f"variant {c.variant} needs {vram_min} GB and {c.hardware} "
                   f"cannot be clustered beyond its {profile['vram_gb']} GB")

    strategy = src.strategies[c.strategy]
    deploy = strategy.get("deploy_type") or "single_node"
    pools: dict[str, Pool] | None = None
    if c.strategy not in R.offered_strategies(recipe):
        raise fail("strategy_not_offered", f"{c.strategy} is neither in compatible_strategies nor granted "
                   "by strategy_hardware")
    if not R.strategy_on_hardware(recipe, c.strategy, profile, c.hardware):
        raise fail("strategy_unsupported_on_hardware", f"strategy_hardware does not allow {c.strategy} on {c.hardware}")
    floor = R.min_gpus(recipe, strategy_key, hardware)
    reach = (R.MAX_NODES if deploy in ("multi_node", "pd_cluster") else 1) * (gpus or 8)
    if reach < floor:
        raise fail("strategy_unreachable", f"strategy_min_gpus asks {floor:g} GPUs for {c.strategy} on {c.hardware}, "
                   f"more than its {reach} reachable GPUs")
    if deploy in ("multi_node", "pd_cluster") and (not scalable or R.generation(profile) == "xpu"):
        raise fail("not_clusterable", f"{c.hardware} cannot be clustered (scalable: false or an XPU profile), "
                   f"so {deploy} is not possible")
    if c.pd is not None and deploy != "pd_cluster":
        raise fail("pd_for_non_pd_strategy", f"pd pool sizes apply only to pd_cluster, not {c.strategy}")
    if deploy == "single_node":
        c.nodes = 1 if c.nodes is None else c.nodes
        if c.nodes != 1:
            raise fail("node_count", f"{c.strategy} runs on exactly 1 node, not {c.nodes}")
    elif deploy == "multi_node":
        if c.nodes is None:
            c.nodes = max(2, math.ceil(floor / (gpus or 8)))
        if not 2 <= c.nodes <= R.MAX_NODES:
            raise fail("node_count", f"{c.strategy} needs 2 to {R.MAX_NODES} nodes, not {c.nodes}")
        if c.nodes * gpus < floor:
            raise fail("below_min_gpus", f"{c.nodes} nodes of {gpus} GPUs are below the strategy_min_gpus "
                       f"floor of {floor:g}")
    else:
        if c.nodes is not None:
            raise fail("node_count", "pd_cluster is sized by its prefill and decode pools (-e recipe_pd=...), not by nodes")
        pools = _resolve_pools(src, c, profile, variant, hardware, fail)

    features = _resolve_features(src, c, variant, profile, (hardware, strategy_key, variant_key), fail)
    return ResolvedChoice(hardware=hardware, strategy=strategy_key, variant=variant_key, preset=c.preset,
                          features=features, feature_modes=c.feature_modes, nodes=c.nodes, pd=pools,
                          modes=c.modes, preset_data=c.preset_data)


def _resolve_pools(src: RecipeSource, c: Choice, profile: dict, variant: dict, hardware: str,
                   fail: _Fail) -> dict[str, Pool]:
    recipe = src.recipe
    count = profile.get("gpu_count")
    gpus = count if isinstance(count, int) else 1
    so = (recipe.get("strategy_overrides") or {}).get("pd_cluster") or {}
    strategy = src.strategies[c.strategy]
    offered = R.pool_modes(recipe)
    given = c.pd or {}
    if not isinstance(given, dict):
        raise fail("pd_pool_nodes", "pd must be a mapping {prefill: {nodes, parallelism}, decode: {...}}")
    pools: dict[str, Pool] = {}
    for role in ("prefill", "decode"):
        raw = given.get(role)
        raw = {"nodes": raw} if isinstance(raw, int) and not isinstance(raw, bool) else (raw or {})
        if not isinstance(raw, dict):
            raise fail("pd_pool_nodes", f"pd.{role} must be a mapping {{nodes, parallelism}} or a node count")
        so_role = so.get(role) or {}
        mode = raw.get("parallelism") or so_role.get("parallelism") or (strategy.get(role) or {}).get("parallelism") or "tp"
        if mode not in offered:
            if raw.get("parallelism"):
                raise fail("pd_pool_mode", f"{role} parallelism {mode} is not one of the recipe's pool modes "
                           f"({', '.join(offered)})")
            mode = offered[0]
        if R.MAX_NODES * gpus < R.min_gpus(recipe, mode, hardware):
            raise fail("pd_pool_mode_unreachable", f"a {mode} pool needs {R.min_gpus(recipe, mode, hardware):g} "
                       f"GPUs, more than {R.MAX_NODES} nodes hold")
        nodes = raw.get("nodes")
        if nodes is None:
            # The recipe site's sizing: the role's override, else enough nodes for the weights, then the floor.
            so_nodes = so_role.get("nodes")
            if isinstance(so_nodes, dict):
                so_nodes = R.keyed(so_nodes, profile, hardware)
            nodes = so_nodes or max(1, math.ceil((variant.get("vram_minimum_gb") or 0)
                                                 / (profile.get("vram_gb") or 1)))
            nodes = max(nodes, R.floor_nodes(recipe, mode, gpus, hardware) if R.min_gpus(recipe, mode, hardware) else 1)
        if isinstance(nodes, bool) or not isinstance(nodes, int) or not 0 <= nodes <= R.MAX_NODES:
            raise fail("pd_pool_nodes", f"{role} nodes must be a whole number from 0 to {R.MAX_NODES}, not {nodes!r}")
        pools[role] = {"nodes": nodes, "parallelism": mode}
    zeros = [r for r in pools if pools[r]["nodes"] == 0]
    if zeros and (len(zeros) != 2 or gpus < 2):
        raise fail("pd_pool_nodes", "co-location (nodes 0) applies to both pools or neither and needs at least 2 GPUs")
    for role, pool in pools.items():
        pool_gpus = gpus // 2 if pool["nodes"] == 0 else pool["nodes"] * gpus
        need = R.min_gpus(recipe, pool["parallelism"], hardware)
        if pool_gpus < need:
            raise fail("pd_pool_below_min_gpus", f"the {role} pool has {pool_gpus} GPUs, below the "
                       f"strategy_min_gpus floor of {need:g} for {pool['parallelism']}")
    c.pd = pools
    return pools


def _resolve_features(src: RecipeSource, c: Choice, variant: dict, profile: dict, names: tuple[str, str, str],
                      fail: _Fail) -> list[str]:
    """The enabled features (also set in ``c``, with ``c.modes``); ``names``: the hardware, strategy and variant."""
    hardware, strategy_key, variant_key = names
    recipe = src.recipe
    declared = recipe.get("features") or {}
    if c.features is None:
        features = _select_features(src, c, variant, hardware, strategy_key)
    else:
        features = c.features
        seen = set()
        for fkey in features:
            if fkey not in declared:
                raise fail("unknown_feature", f"feature {fkey} is not one of {', '.join(declared) or 'none'}")
            if fkey in seen:
                raise fail("duplicate_feature", f"feature {fkey} is listed twice")
            seen.add(fkey)
    for fkey in features:
        if fkey not in declared:
            raise fail("unknown_feature", f"feature {fkey} is not one of {', '.join(declared) or 'none'}")
        if not R.feature_on_strategy(declared[fkey] or {}, strategy_key):
            raise fail("feature_strategy_excluded", f"feature {fkey} lists strategies "
                       f"{', '.join(declared[fkey]['strategies'])} and not {c.strategy}")
    for fkey, mode in c.feature_modes.items():
        feat = declared.get(fkey)
        if feat is None:
            raise fail("unknown_feature", f"feature {fkey} (given a mode) is not one of {', '.join(declared) or 'none'}")
        modes = feat.get("modes")
        if not isinstance(modes, dict):
            raise fail("mode_for_non_modal_feature", f"feature {fkey} has no modes, so mode {mode} cannot apply")
        if fkey not in features:
            raise fail("mode_feature_not_enabled", f"mode {mode} is given for feature {fkey}, which is not enabled")
        if mode not in modes:
            raise fail("unknown_mode", f"feature {fkey} has modes {', '.join(modes)}, not {mode}")
        if not R.mode_on_variant(modes[mode], variant_key):
            raise fail("mode_variant_excluded", f"{fkey} mode {mode} is only for variant(s) "
                       f"{', '.join(modes[mode]['variants'])}, not {c.variant}")
        if not R.mode_on_hardware(modes[mode], profile, hardware):
            raise fail("mode_hardware_unsupported", f"{fkey} mode {mode} is marked unsupported on {c.hardware}")
    c.modes = {}
    for fkey in features:
        feat = declared[fkey] or {}
        if isinstance(feat.get("modes"), dict):
            resolved = R.resolve_mode(feat, fkey, variant, variant_key, profile, hardware, c.feature_modes.get(fkey))
            if resolved is None:
                raise fail("no_mode_available", f"feature {fkey} has no mode allowed for variant {c.variant} "
                           f"on {c.hardware}")
            c.modes[fkey] = resolved
    return features
