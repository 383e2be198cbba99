# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What a recipe offers, for ``-e recipe_list=true``: the choices a user can pass, per hardware.

One job: read a loaded recipe (``_recipe_load.RecipeSource``) into the lists the recipe site shows
before a choice is made (variants and strategies per hardware, features, presets, the recommended
command), with the same rules the compiler applies (``_recipe_choice``, ``_recipe_rules``), so a
listed choice is one the compiler accepts on that hardware. Nothing is compiled or written.
"""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _rules as R
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import _runs_on
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._cluster import strategies_on
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import RecipeSource


def offer(src: RecipeSource) -> dict:
    """{recipe, hardware: {id: {variants, strategies}}, features, opt_in_features, presets, recommended}."""
    recipe = src.recipe
    declared = (recipe.get("meta") or {}).get("hardware") or {}
    variants = recipe.get("variants") or {}
    hardware = {}
    for hw in sorted(src.profiles):
        profile = src.profiles[hw]
        if not isinstance(profile, dict) or declared.get(hw) == "unsupported":
            continue
        if profile.get("restricted") and hw not in declared:
            continue
        runs = [key for key, variant in variants.items() if _runs_on(src, variant or {}, hw)]
        strategies = strategies_on(src, hw)
        if runs and strategies:
            hardware[hw] = {"variants": runs, "strategies": strategies}
    presets = {}
    for name, preset in (recipe.get("presets") or {}).items():
        if isinstance(preset, dict):
            presets[name] = {k: preset[k] for k in ("hardware", "strategy", "description") if preset.get(k)}
    recommended = recipe.get("recommended_command") or {}
    return {
        "recipe": src.name,
        "hardware": hardware,
        "features": list(recipe.get("features") or {}),
        "opt_in_features": list(recipe.get("opt_in_features") or []),
        "presets": presets,
        "recommended": {k: recommended[k] for k in ("hardware", "strategy", "variant", "node_count")
                        if recommended.get(k) is not None},
        "strategy_floors": {hw: {s: R.min_gpus(recipe, s, hw) for s in entry["strategies"]
                                 if R.min_gpus(recipe, s, hw)} for hw, entry in hardware.items()},
    }


def lines(found: dict) -> list[str]:
    """The offer as the play prints it, one line per fact, with the extra-var that chooses it."""
    out = [f"recipe {found['recipe']} offers (choose with -e recipe_hardware= -e recipe_strategy= "
           f"-e recipe_variant= -e recipe_features= -e recipe_preset=):"]
    rec = found["recommended"]
    if rec:
        out.append("recommended: " + " ".join(f"{k}={v}" for k, v in rec.items()))
    for hw, entry in found["hardware"].items():
        floors = found["strategy_floors"].get(hw) or {}
        strategies = [f"{s} (at least {floors[s]:g} GPUs)" if s in floors else s for s in entry["strategies"]]
        out.append(f"{hw}: strategies {', '.join(strategies)}; variants {', '.join(entry['variants'])}")
    if found["features"]:
        opt_in = set(found["opt_in_features"])
        out.append("features: " + ", ".join(f"{f} (opt-in)" if f in opt_in else f for f in found["features"]))
    for name, preset in found["presets"].items():
        where = " ".join(f"{k}={preset[k]}" for k in ("hardware", "strategy") if k in preset)
        out.append(f"preset {name}: {where}" + (f" - {preset['description']}" if preset.get("description") else ""))
    return out
