# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Recipe rules: the lookups and gates of the recipe site, and the refusal they raise.

One job: answer "is this choice allowed, and which keyed value applies" the way vLLM's recipe
site does (hardware-keyed maps, offered strategies, GPU floors, precision gates, feature modes),
so the composer (``_recipe_compose``) only composes. Every refusal is a :class:`RecipeRefusal`:
one sentence naming the recipe, the choice and the rule, plus the rule id in ``.rule``.
"""
from __future__ import annotations

import math
import re
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

MAX_NODES = 16
PRECISION_GATES: dict[str | None, dict[str, str]] = {
    "nvfp4": {"brand": "NVIDIA", "generation": "blackwell"},
    "fp4": {"brand": "NVIDIA", "generation": "blackwell"},
}
POOL_MODES = ("tp", "tep", "dep")


class RecipeRefusal(LanekitError):
    """A choice the recipe cannot run; ``rule`` is the rule id (the corpus's vocabulary)."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


def refuse(recipe_name: str, choice_text: str, rule: str, reason: str) -> RecipeRefusal:
    reason = reason.rstrip(".")
    return RecipeRefusal(rule, f"recipe {recipe_name} refuses {choice_text} (rule {rule}): {reason}.")


def js_or(*values: Any) -> Any:
    """JavaScript ``a || b``: the first truthy value (an empty mapping counts as truthy)."""
    for value in values:
        if isinstance(value, (dict, list)) or value:
            return value
    return values[-1] if values else None


def generation(profile: dict) -> Any:
    gen = profile.get("generation") or profile.get("gpu_generation")
    return gen[0] if isinstance(gen, list) and gen else gen


def keyed(mapping: Any, profile: dict, hw_id: str | None) -> Any:
    """A hardware-keyed map: exact GPU id, then generation, then lower-case brand, then ``default``."""
    if not isinstance(mapping, dict):
        return None
    gen = generation(profile)
    brand_name = profile.get("brand")
    brand = brand_name.lower() if isinstance(brand_name, str) else None
    for key in (hw_id, gen, brand, "default"):
        if key is not None and mapping.get(key) is not None:
            return mapping[key]
    return None


def gen_override(mapping: Any, profile: dict) -> Any:
    """A generation override: the ``<generation>`` entry, else ``nvidia`` on NVIDIA hardware."""
    if not isinstance(mapping, dict):
        return None
    nvidia = mapping.get("nvidia") if profile.get("brand") == "NVIDIA" else None
    return js_or(mapping.get(generation(profile)), nvidia)


def offered_strategies(recipe: dict) -> list[str]:
    """``compatible_strategies`` plus every strategy granted ``supported`` somewhere in ``strategy_hardware``."""
    listed = list(recipe.get("compatible_strategies") or [])
    grants = [s for s, gate in (recipe.get("strategy_hardware") or {}).items()
              if s not in listed and isinstance(gate, dict) and "supported" in gate.values()]
    return listed + grants


def strategy_on_hardware(recipe: dict, strategy: str, profile: dict, hw_id: str) -> bool:
    gate = keyed((recipe.get("strategy_hardware") or {}).get(strategy), profile, hw_id)
    if gate is not None:
        return gate != "unsupported"
    return strategy in (recipe.get("compatible_strategies") or [])


def _floor_of(block: Any, key: str) -> float:
    if block is None:
        return 0
    if isinstance(block, (int, float)) and not isinstance(block, bool):
        return block
    if not isinstance(block, dict):
        return 0
    for k in (key, f"multi_node_{key}", f"single_node_{key}"):
        if block.get(k) is not None:
            return block[k] if isinstance(block[k], (int, float)) else 0
    return 0


def min_gpus(recipe: dict, key: str, hw_id: str) -> float:
    """The ``strategy_min_gpus`` floor for a strategy id or a P/D pool mode on this GPU (0 when unset)."""
    cfg = recipe.get("strategy_min_gpus")
    if cfg is None:
        return 0
    if isinstance(cfg, (int, float)) and not isinstance(cfg, bool):
        return cfg
    return max(_floor_of(cfg, key), _floor_of(cfg.get(hw_id), key) if isinstance(cfg, dict) else 0)


def floor_nodes(recipe: dict, key: str, gpus: int, hw_id: str) -> int:
    return math.ceil(min_gpus(recipe, key, hw_id) / (gpus or 8)) or 1


def pool_modes(recipe: dict) -> list[str]:
    """P/D pool parallelism modes: the suffixes of the offered strategies, narrowed by ``pool_modes``."""
    modes = set()
    for s in offered_strategies(recipe):
        if s == "pd_cluster":
            continue
        if re.search(r"(?:^|_)dep$", s):
            modes.add("dep")
        elif re.search(r"(?:^|_)tep$", s):
            modes.add("tep")
        elif re.search(r"(?:^|_)tp(?:_pp|_dp)?$", s):
            modes.add("tp")
    ordered = [m for m in POOL_MODES if m in (modes or {"tp"})]
    restrict = ((recipe.get("strategy_overrides") or {}).get("pd_cluster") or {}).get("pool_modes")
    if isinstance(restrict, list) and restrict:
        narrowed = [m for m in ordered if m in restrict]
        ordered = narrowed or ordered
    return ordered


def precision_ok(profile: dict, variant: dict) -> tuple[bool, dict | None]:
    gate = variant.get("precision_hardware") or PRECISION_GATES.get(variant.get("precision"))
    if not gate:
        return True, None
    if gate.get("brand") and profile.get("brand") != gate["brand"]:
        return False, gate
    if gate.get("generation"):
        gens = profile.get("generation") or profile.get("gpu_generation")
        gens = gens if isinstance(gens, list) else [gens]
        if gate["generation"] not in gens:
            return False, gate
    return True, gate


def mode_on_variant(mode: dict, variant_key: str) -> bool:
    allow = mode.get("variants") if isinstance(mode, dict) else None
    return not isinstance(allow, list) or not allow or variant_key in allow


def mode_on_hardware(mode: dict, profile: dict, hw_id: str) -> bool:
    hw = mode.get("hardware") if isinstance(mode, dict) else None
    if not isinstance(hw, dict):
        return True
    gen = generation(profile)
    return not ((gen and hw.get(gen) == "unsupported") or hw.get(hw_id) == "unsupported")


def feature_on_strategy(feature: dict, strategy: str) -> bool:
    allow = feature.get("strategies") if isinstance(feature, dict) else None
    return not isinstance(allow, list) or not allow or strategy in allow


def resolve_mode(feature: dict, fkey: str, variant: dict, variant_key: str, profile: dict, hw_id: str,
                 picked: str | None) -> str | None:
    """The mode a modal feature emits: the pick, the variant's default, the feature's, else the first allowed."""
    modes = feature.get("modes")
    if not isinstance(modes, dict):
        return None
    allowed = [k for k, m in modes.items() if mode_on_variant(m, variant_key) and mode_on_hardware(m, profile, hw_id)]
    if not allowed:
        return None
    for candidate in (picked, (variant.get("default_modes") or {}).get(fkey), feature.get("default_mode")):
        if candidate and candidate in allowed:
            return candidate
    return allowed[0]


def default_features(recipe: dict, variant: dict, hw_id: str, strategy: str) -> list[str]:
    """Features on by default: all but the opt-ins (recipe-wide and for this GPU), plus the variant's default modes."""
    features = recipe.get("features") or {}
    opt_in = set(recipe.get("opt_in_features") or [])
    opt_in |= set(((recipe.get("hardware_opt_in_features") or {}).get(hw_id)) or [])
    forced = set((variant.get("default_modes") or {}).keys())
    return [f for f, feat in features.items()
            if (f not in opt_in or f in forced) and feature_on_strategy(feat or {}, strategy)]
