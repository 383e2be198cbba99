# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The typed reader of vLLM recipes, taxonomies and serving strategies.

One job: check that every section the compiler reads has the kind vLLM's recipe schema gives it
(a mapping, a list of text, a number, ...) before anything composes, so a wrong kind is one
sentence naming the file, the key path and the expected kind instead of a Python error deep in
the compiler ("'str' object has no attribute 'get'", "unhashable type"), or, worse, a silent
wrong result (``extra_args: "--foo"`` iterated as characters, ``opt_in_features: spec_decoding``
as a set of letters).

Only the keys the compiler reads are checked; the recipe site's other keys (descriptions, guides,
``recommended_command``, ...) pass untouched. Null is accepted wherever a key is optional (the
compiler reads it as absent). Numbers inside argument lists and environment values are turned into
text (``- 8`` is the token ``"8"``, as the site's JavaScript builder reads it); everything else is
returned as read.
"""
from __future__ import annotations

import math
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import describe

Path = tuple[Any, ...]  # the key path to a value: key names (as read) and list positions ("[0]")


class _Kind:
    words = ""

    def check(self, value: Any, path: Path, source: str) -> Any:  # pragma: no cover - interface
        raise NotImplementedError


def _fail(source: str, path: Path, value: Any, words: str, hint: str = "") -> LanekitError:
    key = ".".join(str(p) for p in path) or "(the whole file)"
    return LanekitError(f"{source}: key '{key}' is {describe(value)}; expected {words}{hint}.")


def _number_hint(value: Any) -> str:
    if isinstance(value, str):
        return " (write the number without quotes)"
    return ""


class Text(_Kind):
    words = "text"

    def check(self, value: Any, path: Path, source: str) -> Any:
        if not isinstance(value, str):
            raise _fail(source, path, value, self.words, " (quote it)" if isinstance(value, (bool, int, float)) else "")
        return value


class Enum(_Kind):
    def __init__(self, *choices: str) -> None:
        self.choices = choices
        self.words = "one of " + ", ".join(choices)

    def check(self, value: Any, path: Path, source: str) -> Any:
        if value not in self.choices or not isinstance(value, str):
            raise _fail(source, path, value, self.words)
        return value


class Whole(_Kind):
    def __init__(self, minimum: int = 0) -> None:
        self.minimum = minimum
        self.words = f"a whole number of at least {minimum}"

    def check(self, value: Any, path: Path, source: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or value < self.minimum:
            raise _fail(source, path, value, self.words, _number_hint(value))
        return value


class Number(_Kind):
    words = "a finite number of at least 0"

    def check(self, value: Any, path: Path, source: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise _fail(source, path, value, self.words, _number_hint(value))
        return value


class Flag(_Kind):
    words = "true or false"

    def check(self, value: Any, path: Path, source: str) -> Any:
        if not isinstance(value, bool):
            raise _fail(source, path, value, self.words)
        return value


class Anything(_Kind):
    words = "any value"

    def check(self, value: Any, path: Path, source: str) -> Any:
        return value


class ListOf(_Kind):
    def __init__(self, item: _Kind, words: str) -> None:
        self.item, self.words = item, words

    def check(self, value: Any, path: Path, source: str) -> Any:
        if not isinstance(value, list):
            hint = " (a YAML list: one '- item' per line, or [a, b])" if isinstance(value, str) else ""
            raise _fail(source, path, value, self.words, hint)
        return [None if v is None else self.item.check(v, path + (f"[{i}]",), source) for i, v in enumerate(value)]


class Token(_Kind):
    """One argv token: text; a number becomes its text, as the site's builder joins it."""
    words = "text (a flag or its value)"

    def check(self, value: Any, path: Path, source: str) -> Any:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return str(value)
        raise _fail(source, path, value, self.words, " (quote it)" if isinstance(value, bool) else "")


class EnvValue(Token):
    words = "text (an environment value)"


def _keyname(key: Any, path: Path, source: str) -> None:
    if not isinstance(key, str):
        raise LanekitError(f"{source}: key '{'.'.join(map(str, path + (key,)))}' is named {describe(key)}; "
                           f"key names must be text (quote it).")


class MapOf(_Kind):
    """A mapping with names of the author's choice (variants, features, hardware ids) -> ``item``."""

    def __init__(self, item: _Kind, words: str, nulls: bool = True) -> None:
        self.item, self.words, self.nulls = item, words, nulls

    def check(self, value: Any, path: Path, source: str) -> Any:
        if not isinstance(value, dict):
            raise _fail(source, path, value, self.words)
        out: dict[str, Any] = {}
        for key, sub in value.items():
            _keyname(key, path, source)
            if sub is None and self.nulls:
                out[key] = None
                continue
            out[key] = self.item.check(sub, path + (key,), source)
        return out


class Fields(_Kind):
    """A mapping with known keys; keys the compiler does not read pass unchecked."""

    def __init__(self, words: str, required: tuple[str, ...] = (), **fields: _Kind) -> None:
        self.words, self.fields, self.required = words, fields, required

    def check(self, value: Any, path: Path, source: str) -> Any:
        if not isinstance(value, dict):
            raise _fail(source, path, value, self.words)
        out = dict(value)
        for key in self.required:
            if value.get(key) is None:
                raise LanekitError(f"{source}: key '{'.'.join(map(str, path + (key,)))}' is missing; expected "
                                   f"{self.fields[key].words}.")
        for key, kind in self.fields.items():
            if value.get(key) is not None:
                out[key] = kind.check(value[key], path + (key,), source)
        return out


class Either(_Kind):
    """The first kind the value is of (by its Python kind), else a sentence naming all."""

    def __init__(self, *kinds: _Kind) -> None:
        self.kinds = kinds
        self.words = " or ".join(k.words for k in kinds)

    def check(self, value: Any, path: Path, source: str) -> Any:
        for kind in self.kinds:
            if _shape_of(kind) == _shape(value):
                return kind.check(value, path, source)
        raise _fail(source, path, value, self.words, _number_hint(value) if any(
            isinstance(k, (Whole, Number)) for k in self.kinds) else "")


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "text" if isinstance(value, str) else "other"


def _shape_of(kind: _Kind) -> str:
    if isinstance(kind, (MapOf, Fields)):
        return "map"
    if isinstance(kind, ListOf):
        return "list"
    if isinstance(kind, (Whole, Number)):
        return "number"
    if isinstance(kind, Flag):
        return "bool"
    return "text"


TEXT = Text()
ARGS = ListOf(Token(), "a list of text tokens (flags and their values)")
ENV = MapOf(EnvValue(), "a mapping of environment variable names to text values", nulls=False)
NAMES = ListOf(TEXT, "a list of names (text)")
TP = Either(Whole(1), MapOf(Whole(1), "a mapping of hardware ids to whole numbers"))
IMAGE = Either(TEXT, MapOf(Either(TEXT, MapOf(TEXT, "a mapping of CUDA builds to image references")),
                           "a mapping of brands (nvidia, amd) to image references"))
HW_ARGS = Fields("a mapping (extra_args, extra_env)", extra_args=ARGS, extra_env=ENV, env=ENV, docker_image=TEXT)
HW_OVERRIDES = MapOf(HW_ARGS, "a mapping of hardware ids or generations to overrides")
FEATURE_HW = MapOf(Fields("a mapping (args, env)", args=ARGS, env=ENV),
                   "a mapping of hardware ids or generations to args/env overrides")
MODE = Fields("a mapping (a feature mode: args, env, variants, hardware, hardware_overrides)",
              args=ARGS, env=ENV, variants=NAMES, hardware=MapOf(TEXT, "a mapping of hardware ids to text"),
              hardware_overrides=FEATURE_HW)
FEATURE = Fields("a mapping (a feature: args, env, modes, strategies, ...)",
                 args=ARGS, env=ENV, strategies=NAMES, hardware_overrides=FEATURE_HW, default_mode=TEXT,
                 modes=MapOf(MODE, "a mapping of mode names to modes"))
VARIANT = Fields("a mapping (a variant: model_id, precision, vram_minimum_gb, extra_args, ...)",
                 model_id=TEXT, precision=TEXT,
                 precision_hardware=Fields("a mapping (brand, generation)", brand=TEXT, generation=TEXT),
                 supported_hardware=NAMES, vram_minimum_gb=Number(), tp=TP, extra_args=ARGS, extra_env=ENV,
                 default_modes=MapOf(TEXT, "a mapping of feature names to mode names"), docker_image=IMAGE,
                 hardware_overrides=HW_OVERRIDES)
# A pool's default size may differ by hardware ({default: 2, gb300: 1}): a hardware-keyed map, read as the
# site reads its other keyed maps (exact id, generation, brand, default: _rules.keyed).
POOL_NODES = Either(Whole(0), MapOf(Whole(0), "a mapping of hardware ids, generations, brands or default to node counts"))
POOL_OVERRIDE = Fields("a mapping (a P/D pool override: nodes, parallelism, vllm_args, env, ...)",
                       vllm_args=ARGS, extra_args=ARGS, env=ENV, extra_env=ENV, hardware_overrides=HW_OVERRIDES,
                       nodes=POOL_NODES, parallelism=TEXT, tp=Whole(1), parallel_flag=TEXT)
STRATEGY_OVERRIDE = Fields("a mapping (a strategy override: extra_args, vllm_args, env, hardware_overrides, ...)",
                           tp=TP, extra_args=ARGS, vllm_args=ARGS, env=ENV, extra_env=ENV,
                           hardware_overrides=HW_OVERRIDES, prefill=POOL_OVERRIDE, decode=POOL_OVERRIDE,
                           router=Fields("a mapping (intra_node_data_parallel_size)",
                                         intra_node_data_parallel_size=Whole(1)),
                           pool_modes=NAMES, parallel_flag=TEXT)
FLOOR = Either(Number(), MapOf(Either(Number(), MapOf(Number(), "a mapping of strategy ids to GPU counts")),
                               "a mapping of strategy ids or hardware ids to GPU counts"))
PRESET_ROLE = Fields("a mapping (a preset's P/D role: nodes, parallelism, args, remove_args, json_args)",
                     nodes=Whole(0), parallelism=TEXT, args=ARGS, remove_args=NAMES,
                     json_args=MapOf(Anything(), "a mapping of flags to JSON merge patches"))
PRESET = Fields("a mapping (a preset: hardware, strategy, variants, select, args, env, tp, roles)",
                hardware=TEXT, strategy=TEXT, variants=NAMES, args=ARGS, env=ENV, tp=Whole(1),
                select=Fields("a mapping (nodes, features)", nodes=Whole(1),
                              features=MapOf(Either(Flag(), TEXT), "a mapping of feature names to true, false or a mode")),
                roles=Fields("a mapping (prefill, decode)", prefill=PRESET_ROLE, decode=PRESET_ROLE))
NOTE = Fields("a mapping (a note: title, body, when)", title=TEXT, body=TEXT,
              when=Fields("a mapping (hardware, strategies, variants, features)", hardware=NAMES,
                          strategies=NAMES, variants=NAMES, features=NAMES))
NOTES = ListOf(NOTE, "a list of notes (each a mapping with title and body)")

RECIPE = Fields(
    "a mapping (a vLLM recipe)", required=("model", "variants"),
    hf_id=TEXT,
    model=Fields("a mapping (model_id, base_args, base_env, ...)", model_id=TEXT, base_args=ARGS, base_env=ENV,
                 docker_image=IMAGE, nightly_required=Flag(), architecture=TEXT),
    meta=Fields("a mapping (tasks, hardware, default_variant, ...)", tasks=NAMES, slug=TEXT, title=TEXT,
                hardware=MapOf(TEXT, "a mapping of hardware ids to verified, unsupported, ..."),
                default_variant=Either(TEXT, MapOf(TEXT, "a mapping of hardware keys to variant names"))),
    variants=MapOf(VARIANT, "a mapping of variant names to variants"),
    features=MapOf(FEATURE, "a mapping of feature names to features"),
    opt_in_features=NAMES,
    hardware_opt_in_features=MapOf(NAMES, "a mapping of hardware ids to lists of feature names"),
    compatible_strategies=NAMES,
    default_strategy=TEXT,
    strategy_overrides=MapOf(STRATEGY_OVERRIDE, "a mapping of strategy ids to overrides"),
    strategy_hardware=MapOf(MapOf(TEXT, "a mapping of hardware keys to supported or unsupported"),
                            "a mapping of strategy ids to hardware gates"),
    strategy_min_gpus=FLOOR,
    hardware_overrides=HW_OVERRIDES,
    presets=MapOf(PRESET, "a mapping of preset names to presets"),
    notes=NOTES, troubleshooting=NOTES,
)

GENERATION = Either(TEXT, NAMES)
PROFILE = Fields("a mapping (a hardware profile: gpu_count, vram_gb, generation, brand, ...)",
                 gpu_count=Whole(1), vram_gb=Number(), generation=GENERATION, gpu_generation=GENERATION,
                 brand=TEXT, restricted=Flag(), scalable=Flag())
TAXONOMY = Fields("a mapping (hardware_profiles, ...)", required=("hardware_profiles",),
                  hardware_profiles=MapOf(PROFILE, "a mapping of hardware ids to hardware profiles"))
POOL = Fields("a mapping (a P/D role: vllm_args, env, parallelism, tp)", vllm_args=ARGS, env=ENV, parallelism=TEXT,
              tp=Whole(1), parallel_flag=TEXT)
STRATEGY = Fields("a mapping (a serving strategy: deploy_type, vllm_args, parallel_flag, env, ...)",
                  name=TEXT, deploy_type=Enum("single_node", "multi_node", "pd_cluster"), vllm_args=ARGS,
                  parallel_flag=TEXT, parallelism=TEXT, env=ENV, prefill=POOL, decode=POOL,
                  router=Fields("a mapping (policy)", policy=TEXT))


def check_recipe(data: Any, source: str) -> dict:
    """The recipe mapping, every section the compiler reads of its documented kind; else one sentence."""
    if not isinstance(data, dict):
        raise LanekitError(f"{source} is not a vLLM recipe: the file holds {describe(data)}, and a recipe is a "
                           "mapping with 'model' and 'variants'.")
    if data.get("model") is None or data.get("variants") is None:
        missing = " and ".join(k for k in ("model", "variants") if data.get(k) is None)
        raise LanekitError(f"{source} is not a vLLM recipe: it has no {missing} (a recipe needs 'model' and "
                           "'variants' mappings).")
    return RECIPE.check(data, (), source)


def check_taxonomy(data: Any, source: str) -> dict:
    """The taxonomy mapping with typed hardware profiles; else one sentence."""
    if not isinstance(data, dict) or not isinstance(data.get("hardware_profiles"), dict):
        raise LanekitError(f"{source} has no 'hardware_profiles' mapping; point recipe_root at a recipe tree "
                           "(taxonomy.yaml and strategies/).")
    return TAXONOMY.check(data, (), source)


def check_strategy(data: Any, source: str) -> dict:
    """One serving strategy mapping, typed; else one sentence."""
    if not isinstance(data, dict):
        raise LanekitError(f"{source} must be a mapping (a serving strategy), found {describe(data)}.")
    return STRATEGY.check(data, (), source)
