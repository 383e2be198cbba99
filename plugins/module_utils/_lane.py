# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Lanes as data: load ``lanes/<lane>.yml``, apply the override layers, validate the result.

Layers, in order (later wins per key; mappings deep-merge, lists are replaced):
  1. the lane file,
  2. ``lane_overrides`` from the inventory (group_vars / host_vars),
  3. ``lane_cli_overrides`` given on the command line (``-e lane_cli_overrides=...``).
In ``serve.args`` a value of ``null`` or ``false`` removes the flag, ``true`` renders it bare and
a mapping renders as compact JSON, so any layer can override or drop one flag.

Every problem is raised as one LanekitError sentence that names where the value came from
(the file or the layer), the key path, what was found and what is expected.
"""
from __future__ import annotations

import copy
import json
import os
import re

from ansible_collections.lanekit.serving.plugins.module_utils import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._hardware import PROFILES

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

LANE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
FLAG_RE = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
REVISION_RE = re.compile(r"^[0-9a-f]{40}$")
ENGINES = tuple(_engines.ENGINES)


# --- schema -------------------------------------------------------------------------------
# A tiny declarative schema: ("type", required, extra). Types: str, int, num, bool, list,
# map, enum, args, env, revision, strlist. Nested mappings are dicts of the same.

def _f(kind, required=False, extra=None, default=None):
    return {"kind": kind, "required": required, "extra": extra, "default": default}


SCHEMA = {
    "lane": _f("str", True),
    "description": _f("str"),
    "engine": _f("enum", True, ENGINES),
    "image": _f("str", True),
    "hardware": _f("enum", True, tuple(PROFILES)),
    "model": _f("map", True, {
        "id": _f("str", True),
        "revision": _f("revision"),
        "served_name": _f("str", True),
        "dir": _f("str"),
        "layout": _f("enum", False, ("mistral_consolidated", "hf"), "hf"),
        "size_gib": _f("num"),
        "arch": _f("str"),
        "attention": _f("enum", False, ("dsa_mla", "mla", "mha", "gqa")),
        "moe": _f("bool", False, None, False),
        "quantization": _f("str"),
        "source": _f("map", False, {
            "kind": _f("enum", True, ("hf", "local")),
            "path": _f("str"),
            "endpoint": _f("str"),
            "allow_patterns": _f("strlist"),
            "ignore_patterns": _f("strlist"),
        }),
    }),
    "topology": _f("map", True, {
        "nodes": _f("int", True),
        "gpus_per_node": _f("int", True),
        "tensor_parallel": _f("int", True),
        "pipeline_parallel": _f("int", False, None, 1),
        "data_parallel": _f("int", False, None, 1),
    }),
    "serve": _f("map", True, {
        "entrypoint": _f("strlist"),
        "port": _f("int", True),
        "rendezvous_port": _f("int", True),
        "args": _f("args"),
        "env": _f("env"),
        "docker_args": _f("strlist"),
    }),
    "memory": _f("map", False, {
        "weights_per_rank_gib": _f("num", True),
        "graph_reserve_gib": _f("num", True),
        "kv_bytes_per_token": _f("int", True),
        "kv_block_tokens": _f("int", False, None, 64),
        "headroom_gib": _f("num", False, None, 2.0),
    }),
    "boot": _f("map", True, {
        "budget_s": _f("int", True),
        "expected_load_s": _f("int", True),
        "expected_warmup_s": _f("int", True),
        "stall_s": _f("int", False, None, 900),
        "poll_s": _f("int", False, None, 15),
        "stability_s": _f("int", False, None, 30),
    }),
    "cache": _f("map", False, {
        "warm": _f("bool", False, None, True),
        "headroom_gib": _f("num", False, None, 4.0),
    }),
    # Operator notes the plan can print (a compiled recipe lane carries the recipe's notes here).
    "notes": _f("strlist"),
}

_TYPE_WORDS = {
    "str": "a string", "int": "a whole number", "num": "a number", "bool": "true or false",
    "list": "a list", "strlist": "a list of strings", "map": "a mapping", "args": "a mapping of flag to value",
    "env": "a mapping of variable name to value", "revision": "a 40-character hex commit id",
}


def _describe(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, (int, float)):
        return f"{value!r} (a number)"
    if isinstance(value, str):
        return f"{value!r} (a string)"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


# --- layering -----------------------------------------------------------------------------

def deep_merge(base, override):
    """Mappings merge key by key (recursively); anything else, lists included, is replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = {k: copy.deepcopy(v) for k, v in base.items()}
        for key, value in override.items():
            merged[key] = deep_merge(merged[key], value) if key in merged else copy.deepcopy(value)
        return merged
    return copy.deepcopy(override)


def parse_overrides(value, source: str, variable: str = "lane_overrides") -> dict:
    """An override layer (``variable``) may arrive as a mapping or, from ``-e key=value``, as a JSON/YAML string."""
    if value in (None, "", {}):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            try:
                value = yaml.safe_load(value)
            except yaml.YAMLError as exc:
                raise LanekitError(
                    f"{source}: {variable} is not valid JSON or YAML ({exc}); pass a mapping such as "
                    "'{\"serve\": {\"args\": {\"--gpu-memory-utilization\": 0.89}}}'."
                ) from None
    if not isinstance(value, dict):
        raise LanekitError(f"{source}: {variable} is {_describe(value)}; expected a mapping of lane keys to override.")
    return value


class Layers:
    """The lane file plus its override layers, remembering which layer set each key."""

    def __init__(self, lane_file: str, data: dict, overrides: list[tuple[str, dict]] | None = None):
        self.layers = [(lane_file, data)] + [(name, layer) for name, layer in (overrides or []) if layer]
        merged: dict = {}
        for _name, layer in self.layers:
            merged = deep_merge(merged, layer)
        self.merged = merged

    def source_of(self, path: tuple) -> str:
        for name, layer in reversed(self.layers):
            node = layer
            found = True
            for part in path:
                if isinstance(node, dict) and part in node:
                    node = node[part]
                else:
                    found = False
                    break
            if found:
                return name
        return self.layers[0][0]


# --- validation ---------------------------------------------------------------------------

def _fail(layers: Layers, path: tuple, found, expected: str, fix: str = "") -> LanekitError:
    key = ".".join(str(p) for p in path)
    source = layers.source_of(path)
    msg = f"{source}: key '{key}' is {found}; expected {expected}."
    if fix:
        msg += " " + fix
    return LanekitError(msg)


def _check_value(layers: Layers, path: tuple, field: dict, value):
    kind = field["kind"]
    if kind == "str":
        ok = isinstance(value, str) and value != ""
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    elif kind == "num":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "strlist":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    elif kind == "enum":
        if value not in field["extra"]:
            raise _fail(layers, path, _describe(value), "one of " + ", ".join(field["extra"]))
        return
    elif kind == "revision":
        if value is None:
            return
        if not (isinstance(value, str) and REVISION_RE.match(value)):
            raise _fail(layers, path, _describe(value), _TYPE_WORDS["revision"],
                        "A branch, tag or short id is not a pin: use the full commit id of the model repository.")
        return
    elif kind == "map":
        if not isinstance(value, dict):
            raise _fail(layers, path, _describe(value), "a mapping")
        _check_map(layers, path, field["extra"], value)
        return
    elif kind == "args":
        _check_args(layers, path, value)
        return
    elif kind == "env":
        _check_env(layers, path, value)
        return
    else:  # pragma: no cover - schema typo
        raise LanekitError(f"internal: unknown schema kind {kind}")
    if not ok:
        raise _fail(layers, path, _describe(value), _TYPE_WORDS[kind])


def _check_map(layers: Layers, path: tuple, schema: dict, data: dict):
    for key in data:
        if key not in schema:
            raise _fail(layers, path + (key,), "not a known setting",
                        "one of " + ", ".join(sorted(schema)),
                        "Check the spelling, or move engine flags under serve.args.")
    for key, field in schema.items():
        if key not in data or data[key] is None:
            if field["required"]:
                raise LanekitError(
                    f"{layers.layers[0][0]}: key '{'.'.join(map(str, path + (key,)))}' is missing; "
                    f"expected {_TYPE_WORDS.get(field['kind'], field['kind'])}"
                    + (" (one of " + ", ".join(field["extra"]) + ")" if field["kind"] == "enum" else "") + "."
                )
            if field["default"] is not None and key not in data:
                data[key] = copy.deepcopy(field["default"])
            continue
        _check_value(layers, path + (key,), field, data[key])


def _check_args(layers: Layers, path: tuple, args):
    if args is None:
        return
    if not isinstance(args, dict):
        raise _fail(layers, path, _describe(args), _TYPE_WORDS["args"],
                    "Write engine flags as '--flag: value' entries (true for a bare flag, null to remove).")
    for flag, value in args.items():
        if not isinstance(flag, str) or not FLAG_RE.match(flag):
            raise _fail(layers, path + (flag,), "not a flag", "a key such as '--max-model-len' (with the leading dashes)")
        if isinstance(value, (list, tuple)):
            if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
                raise _fail(layers, path + (flag,), _describe(value), "a list of plain values")
        elif not (value is None or isinstance(value, (bool, int, float, str, dict))):
            raise _fail(layers, path + (flag,), _describe(value), "true, false, null, a value or a mapping")


def _check_env(layers: Layers, path: tuple, env):
    if env is None:
        return
    if not isinstance(env, dict):
        raise _fail(layers, path, _describe(env), _TYPE_WORDS["env"])
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_RE.match(key):
            raise _fail(layers, path + (key,), "not an environment variable name", "letters, digits and '_'")
        if not (value is None or isinstance(value, (str, int, float, bool))):
            raise _fail(layers, path + (key,), _describe(value), "a plain value (or null to remove it)")


def validate(layers: Layers, lane_name: str) -> dict:
    """Validate the merged lane; return it with defaults filled in."""
    lane = copy.deepcopy(layers.merged)
    if not isinstance(lane, dict):
        raise LanekitError(f"{layers.layers[0][0]} must be a mapping of lane settings, found {_describe(lane)}.")
    _check_map(layers, (), SCHEMA, lane)
    if lane["lane"] != lane_name:
        raise _fail(layers, ("lane",), _describe(lane["lane"]), f"'{lane_name}' (the file name without .yml)")
    lane["model"].setdefault("dir", lane["model"]["id"])
    lane["model"].setdefault("source", {"kind": "hf"})
    if lane["model"]["source"]["kind"] == "local" and not lane["model"]["source"].get("path"):
        raise _fail(layers, ("model", "source", "path"), "missing", "the directory holding the checkpoint when source.kind is local")
    lane["serve"].setdefault("args", {})
    lane["serve"].setdefault("env", {})
    lane["serve"].setdefault("docker_args", [])
    lane["serve"]["args"] = lane["serve"]["args"] or {}
    lane["serve"]["env"] = lane["serve"]["env"] or {}
    lane.setdefault("cache", {"warm": True, "headroom_gib": 4.0})
    topo = lane["topology"]
    for key in ("nodes", "gpus_per_node", "tensor_parallel"):
        if topo[key] < 1:
            raise _fail(layers, ("topology", key), _describe(topo[key]), "a whole number of at least 1")
    return lane


# --- loading ------------------------------------------------------------------------------

def lane_path(lanes_dir: str, lane_name: str) -> str:
    return os.path.join(lanes_dir, f"{lane_name}.yml")


def read_lane_file(lanes_dir: str, lane_name) -> tuple[str, dict]:
    if not isinstance(lane_name, str) or not LANE_NAME_RE.match(lane_name or ""):
        raise LanekitError(
            f"lane {lane_name!r} is not a lane name: pass -e lane=<name> with a file lanes/<name>.yml "
            f"(lower-case letters, digits, '-' and '.')."
        )
    path = lane_path(lanes_dir, lane_name)
    if not os.path.isfile(path):
        known = sorted(f[:-4] for f in os.listdir(lanes_dir) if f.endswith(".yml")) if os.path.isdir(lanes_dir) else []
        raise LanekitError(f"{path} does not exist; known lanes: {', '.join(known) or 'none'}.")
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise LanekitError(f"{path} is not valid YAML{where}: {getattr(exc, 'problem', exc)}.") from None
    if not isinstance(data, dict):
        raise LanekitError(f"{path} must be a mapping of lane settings, found {_describe(data)}.")
    return path, data


def load_lane(lanes_dir: str, lane_name: str, overrides: list[tuple[str, object]] | None = None) -> dict:
    """Load, layer and validate one lane. ``overrides`` is [(source name, mapping or string)]."""
    path, data = read_lane_file(lanes_dir, lane_name)
    parsed = [(name, parse_overrides(value, name)) for name, value in (overrides or [])]
    layers = Layers(path, data, parsed)
    lane = validate(layers, lane_name)
    lane["_source"] = path
    lane["_layers"] = [name for name, _layer in layers.layers]
    return lane


def render_flag_value(value) -> list[str]:
    """argv tokens for one flag value: bare flag, dropped flag, JSON, list or plain value."""
    if value is True:
        return []
    if isinstance(value, dict):
        return [json.dumps(value, separators=(",", ":"), sort_keys=False)]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def render_args(args: dict) -> list[str]:
    """Render ``serve.args`` in order; ``null``/``false`` drop the flag, ``true`` renders it bare."""
    argv: list[str] = []
    for flag, value in args.items():
        if value is None or value is False:
            continue
        argv.append(flag)
        argv.extend(render_flag_value(value))
    return argv


def budget_env(lane: dict) -> dict:
    """Engine timeouts (carried in the environment) the boot budget fills when the lane leaves them unset."""
    return _engines.get(lane["engine"]).budget_defaults(lane["boot"]["budget_s"])[0]


def budget_args(lane: dict) -> dict:
    """Engine timeouts (carried as flags) the boot budget fills when the lane leaves them unset."""
    return _engines.get(lane["engine"]).budget_defaults(lane["boot"]["budget_s"])[1]


def effective_env(lane: dict) -> dict:
    """The lane's environment as ranks get it: budget defaults, then the lane's values (null = unset)."""
    env = budget_env(lane)
    env.update({k: v for k, v in lane["serve"]["env"].items() if v is not None})
    return env


def effective_args(lane: dict) -> dict:
    """The lane's ``serve.args`` as ranks get them: the lane's flags in order, budget flags appended when absent."""
    args = dict(lane["serve"]["args"])
    for flag, value in budget_args(lane).items():
        args.setdefault(flag, value)
    return args


def timeout_value(lane: dict, name: str):
    """The value a rank gets for the engine timeout ``name``: the lane's, else the budget, else the stock.

    None when the engine has no such timeout, or when the lane's value is not a number.
    """
    timeout = _engines.get(lane["engine"]).timeout(name)
    if timeout is None:
        return None
    if timeout.carrier == "env":
        value = effective_env(lane).get(timeout.key, timeout.stock_s)
    else:
        args = {k: v for k, v in effective_args(lane).items() if v is not None and v is not False}
        value = args.get(timeout.key, timeout.stock_s)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
