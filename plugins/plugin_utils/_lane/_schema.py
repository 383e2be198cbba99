# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Lanes as data: load ``lanes/<lane>.yml``, apply the override layers, validate the result.

Layers, in order (later wins per key; mappings deep-merge, lists are replaced):
  1. the lane file,
  2. ``lane_group_overrides`` from the inventory's group_vars (the same on every host of the lane),
  3. ``lane_host_overrides`` from one host's host_vars (``serve.args`` / ``serve.env`` of its rank),
  4. ``lane_cli_overrides`` given on the command line (``-e lane_cli_overrides=...``).
Each layer has its own variable name: Ansible replaces a same-named variable instead of merging
it, so one name for group and host would let a host's value silently drop the group's.
In ``serve.args`` a value of ``null`` or ``false`` removes the flag, ``true`` renders it bare and
a mapping renders as compact JSON, so any layer can override or drop one flag.

Every problem is raised as one LanekitError sentence that names where the value came from
(the file or the layer), the key path, what was found and what is expected.
"""
from __future__ import annotations

import copy
import json
import math
import os
import re

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import describe, load_file, load_text, plain
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _settings as _bench_settings
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._values import (
    check_api,
    check_engine_settings,
    check_model_dir,
    json_problem,
)

LANE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
FLAG_RE = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
REVISION_RE = re.compile(r"^[0-9a-f]{40}$")
# A served model name travels in HTTP requests and argv: no whitespace or control characters.
SERVED_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$")
IMAGE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")  # a directory under images/
ENGINES = tuple(_engines.ENGINES)


# --- schema -------------------------------------------------------------------------------
# A tiny declarative schema: ("type", required, extra). Types: str, int, num, bool, list,
# map, enum, args, env, revision, strlist. Nested mappings are dicts of the same.

def _f(kind, required=False, extra=None, default=None, minimum=None):
    return {"kind": kind, "required": required, "extra": extra, "default": default, "min": minimum}


# One pool of a P/D lane: its nodes, how they split the model, its port and its own flags/env.
_POOL = {
    "nodes": _f("int", True, minimum=1),
    "parallelism": _f("enum", False, ("tp", "tep", "dep"), "tp"),
    "tensor_parallel": _f("int", True, minimum=1),
    "data_parallel": _f("int", False, None, 1, minimum=1),
    "data_parallel_local": _f("int", False, minimum=1),
    "port": _f("port", True),
    "rendezvous_port": _f("port", True),
    "args": _f("args"),
    "env": _f("env"),
}

SCHEMA = {
    "lane": _f("str", True),
    "description": _f("str"),
    "engine": _f("enum", True, ENGINES),
    "image": _f("image", True),
    "hardware": _f("enum", True, tuple(PROFILES)),
    "model": _f("map", True, {
        "id": _f("str", True),
        "revision": _f("revision"),
        "served_name": _f("name", True),
        "dir": _f("str"),
        "layout": _f("enum", False, ("mistral_consolidated", "hf"), "hf"),
        "size_gib": _f("num"),
        "arch": _f("str"),
        "attention": _f("enum", False, ("dsa_mla", "mla", "mha", "gqa")),
        # The attention head size (config.json head_dim): checked where the engine's kernels support only
        # some sizes (vLLM's CPU attention, the cpu-head-dim lint rule).
        "head_dim": _f("int", False, minimum=1),
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
        "nodes": _f("int", True, minimum=1),
        "gpus_per_node": _f("int", True, minimum=1),
        "tensor_parallel": _f("int", True, minimum=1),
        "pipeline_parallel": _f("int", False, None, 1, minimum=1),
        "data_parallel": _f("int", False, None, 1, minimum=1),
        # How the ranks form (unset: "tp", one group over the nodes): "dp", one engine per node
        # joined by data parallelism (multi_node_dep, multi_node_tp_dp); "pd", the pools of ``pd``.
        "layout": _f("enum", False, ("tp", "dp", "pd")),
        "data_parallel_local": _f("int", False, minimum=1),  # --data-parallel-size-local (default gpus_per_node)
        "data_parallel_rank_step": _f("int", False, minimum=1),  # start rank = node rank x step (default local)
    }),
    "serve": _f("map", True, {
        "entrypoint": _f("strlist"),
        "port": _f("port", True),
        "rendezvous_port": _f("port", True),
        "args": _f("args"),
        "env": _f("env"),
        "docker_args": _f("strlist"),
    }),
    "memory": _f("map", False, {
        "weights_per_rank_gib": _f("num", True),
        "graph_reserve_gib": _f("num", True),
        "kv_bytes_per_token": _f("int", True, minimum=1),
        "kv_block_tokens": _f("int", False, None, 64, minimum=1),
        "headroom_gib": _f("num", False, None, 2.0),
    }),
    "boot": _f("map", True, {
        "budget_s": _f("int", True, minimum=1),
        "expected_load_s": _f("int", True),
        "expected_warmup_s": _f("int", True),
        "stall_s": _f("int", False, None, 900, minimum=1),
        "poll_s": _f("int", False, None, 15, minimum=1),
        "stability_s": _f("int", False, None, 30),
    }),
    "cache": _f("map", False, {
        "warm": _f("bool", False, None, True),
        "headroom_gib": _f("num", False, None, 4.0),
    }),
    # Prefill/decode disaggregation (topology.layout pd): two pools of nodes and the router in front.
    "pd": _f("map", False, {
        "prefill": _f("map", True, _POOL),
        "decode": _f("map", True, _POOL),
        "router": _f("map", False, {
            "policy": _f("str", False, None, "round_robin"),
            "intra_node_data_parallel_size": _f("int", False, None, 1, minimum=1),
            "entrypoint": _f("strlist"),
            "args": _f("args"),
        }),
    }),
    # Operator notes the plan can print (a compiled recipe lane carries the recipe's notes here).
    "notes": _f("strlist"),
    # The served API: the address it binds (default 0.0.0.0, reachable by clients) and whether the
    # lane refuses to deploy without lanekit_api_key. Absent from lanes that leave it unset.
    "api": _f("map", False, {
        "bind": _f("str"),
        "key_required": _f("bool"),
    }),
    # Bench settings of this lane (roles/bench); checked by _bench_settings, where the keys live.
    "bench": _f("bench"),
}

_TYPE_WORDS = {
    "str": "a string", "int": "a whole number", "num": "a number", "bool": "true or false",
    "list": "a list", "strlist": "a list of strings", "map": "a mapping", "args": "a mapping of flag to value",
    "env": "a mapping of variable name to value", "revision": "a 40-character hex commit id",
    "port": "a port number from 1 to 65535",
    "image": "the name of a directory under images/ (lower-case letters, digits, '.', '_', '-')",
    "name": ("a one-line name without spaces or control characters, starting with a letter or digit (letters, "
             "digits and . _ : / @ + -); it travels in argv, HTTP requests and logs"),
}


_describe = describe


# --- layering -----------------------------------------------------------------------------

def deep_merge(base, override):
    """Mappings merge key by key (recursively); anything else, lists included, is replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = {k: copy.deepcopy(v) for k, v in base.items()}
        for key, value in override.items():
            merged[key] = deep_merge(merged[key], value) if key in merged else copy.deepcopy(value)
        return merged
    return copy.deepcopy(override)


GROUP_LAYER = "lane_group_overrides"
HOST_LAYER = "lane_host_overrides"
CLI_LAYER = "lane_cli_overrides"
# The one name group_vars and host_vars shared before: refused, never read (see the module doc).
OLD_LAYER = "lane_overrides"
GROUP_SOURCE = f"{GROUP_LAYER} in the inventory's group_vars"
CLI_SOURCE = f"{CLI_LAYER} given with -e"


def host_source(host: str) -> str:
    return f"{HOST_LAYER} in the inventory's host_vars (host {host})"


def old_layer_refusal(where: str, fix: str = "") -> LanekitError:
    return LanekitError(
        f"{OLD_LAYER} is set {where}, and lanekit no longer reads it (group_vars and host_vars set the same "
        f"Ansible variable, so a host's value replaced the group's instead of merging); "
        + (fix or f"rename it to {GROUP_LAYER} in group_vars and to {HOST_LAYER} in host_vars") + ".")


def inventory_layers(host: str, group_value, host_value, old_value=None) -> list[tuple[str, dict]]:
    """One host's inventory layers [(source, mapping)]: the group's, then the host's own.

    ``old_value`` is the host's ``lane_overrides``, refused when set.
    """
    if old_value is not None:
        raise old_layer_refusal(f"in the inventory for host {host}")
    return [(GROUP_SOURCE, parse_overrides(group_value, GROUP_SOURCE, GROUP_LAYER)),
            (host_source(host), parse_overrides(host_value, host_source(host), HOST_LAYER))]


def parse_overrides(value, source: str, variable: str = GROUP_LAYER) -> dict:
    """An override layer (``variable``) may arrive as a mapping or, from ``-e key=value``, as a JSON/YAML string."""
    # Ansible hands over its own tagged subclasses of dict/str/list; validate plain data only.
    value = plain(value)
    if value in (None, "", {}):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value, object_pairs_hook=_json_pairs(source, variable))
        except ValueError:
            try:
                value = load_text(value, f"{source}: {variable}")
            except LanekitError as err:
                raise LanekitError(
                    f"{err.message.rstrip('.').replace(' is not valid YAML', ' is not valid JSON or YAML')}; "
                    "pass a mapping such as "
                    "'{\"serve\": {\"args\": {\"--gpu-memory-utilization\": 0.89}}}'."
                ) from None
    if not isinstance(value, dict):
        raise LanekitError(f"{source}: {variable} is {_describe(value)}; expected a mapping of lane keys to override.")
    return value


class _DuplicateKey(LanekitError):
    pass


def _json_pairs(source: str, variable: str):
    def hook(pairs):
        seen = set()
        for key, _value in pairs:
            if key in seen:
                # Not a ValueError subclass, so the YAML fallback is not tried on a duplicate.
                raise _DuplicateKey(f"{source}: {variable} sets the key {key!r} twice in one mapping; remove one.")
            seen.add(key)
        return dict(pairs)
    return hook


class Layers:
    """The lane file plus its override layers, remembering which layer set each key."""

    def __init__(self, lane_file: str, data: dict, overrides: list[tuple[str, dict]] | None = None):
        self.layers = [(lane_file, data)] + [(name, layer) for name, layer in (overrides or []) if layer]
        merged: dict = {}
        for _name, layer in self.layers:
            merged = deep_merge(merged, layer)
        self.merged = merged

    def set_to_null_by(self, path: tuple) -> str | None:
        """The last layer that sets ``path`` to null explicitly, if the merged value is null."""
        for name, layer in reversed(self.layers):
            node = layer
            for part in path[:-1]:
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, dict) and path[-1] in node:
                return name if node[path[-1]] is None else None
        return None

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
    elif kind == "name":
        # fullmatch: '$' alone would let a trailing newline through (a second line in argv and logs).
        ok = isinstance(value, str) and SERVED_NAME_RE.fullmatch(value) is not None
    elif kind == "image":
        ok = isinstance(value, str) and IMAGE_NAME_RE.match(value) is not None
    elif kind == "port":
        ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= (field.get("min") or 0)
        if not ok and isinstance(value, int) and not isinstance(value, bool):
            raise _fail(layers, path, _describe(value), f"a whole number of at least {field.get('min') or 0}")
    elif kind == "num":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
        if not ok and isinstance(value, float) and not isinstance(value, bool):
            raise _fail(layers, path, _describe(value), "a finite number of at least 0")
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
    elif kind == "bench":
        # A mapping in the lane and its layers (JSON text is for -e bench_settings only); each key is
        # blamed on the layer that set it, so a -e lane_cli_overrides mistake is not the lane file's.
        if not isinstance(value, dict):
            raise _fail(layers, path, _describe(value), "a mapping of bench settings (e.g. bench: {depths: [0, 4096]})")
        for key, item in value.items():
            source = layers.source_of(path + (key,))
            _bench_settings.check_layer({key: item}, f"{source}: key '{'.'.join(map(str, path))}'")
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
            nulled = layers.set_to_null_by(path + (key,)) if key in data else None
            if field["required"] and nulled:
                raise LanekitError(
                    f"{nulled}: key '{'.'.join(map(str, path + (key,)))}' is set to null, which removes a required "
                    f"setting; expected {_TYPE_WORDS.get(field['kind'], field['kind'])}. Give a value or drop the key "
                    f"from that layer."
                )
            if field["required"]:
                raise LanekitError(
                    f"{layers.layers[0][0]}: key '{'.'.join(map(str, path + (key,)))}' is missing; "
                    f"expected {_TYPE_WORDS.get(field['kind'], field['kind'])}"
                    + (" (one of " + ", ".join(field["extra"]) + ")" if field["kind"] == "enum" else "") + "."
                )
            if field["default"] is not None:
                # A null from any layer resets an optional setting to its default.
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
        problem = json_problem(value) if isinstance(value, (dict, list)) else None
        if problem:
            raise _fail(layers, path + (flag,), problem, "plain values only (text, finite numbers, true/false, lists "
                        "and mappings with text keys)", "The value is rendered as one argument (JSON for a mapping).")


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
    check_model_dir(layers, lane["model"], _fail)
    if not lane["model"].get("source"):
        lane["model"]["source"] = {"kind": "hf"}
    if lane["model"]["source"]["kind"] == "local" and not lane["model"]["source"].get("path"):
        raise _fail(layers, ("model", "source", "path"), "missing", "the directory holding the checkpoint when source.kind is local")
    lane["serve"].setdefault("args", {})
    lane["serve"].setdefault("env", {})
    lane["serve"].setdefault("docker_args", [])
    lane["serve"]["args"] = lane["serve"]["args"] or {}
    lane["serve"]["env"] = lane["serve"]["env"] or {}
    if not lane.get("cache"):
        lane["cache"] = {"warm": True, "headroom_gib": 4.0}
    check_engine_settings(layers, lane, _fail)
    check_api(layers, lane, _fail)
    topo = lane["topology"]
    for key in ("nodes", "gpus_per_node", "tensor_parallel"):
        if topo[key] < 1:
            raise _fail(layers, ("topology", key), _describe(topo[key]), "a whole number of at least 1")
    _check_layout(layers, lane)
    return lane


def _check_layout(layers: Layers, lane: dict) -> None:
    """The keys of one layout agree: ``pd`` goes with layout pd, and its pools fill topology.nodes."""
    topo, pd = lane["topology"], lane.get("pd")
    layout = topo.get("layout") or "tp"
    if layout == "pd" and not pd:
        raise _fail(layers, ("pd",), "missing", "the prefill and decode pools when topology.layout is pd",
                    "Add a pd section, or remove topology.layout.")
    if pd and layout != "pd":
        raise _fail(layers, ("topology", "layout"), _describe(topo.get("layout")), "pd when the lane has a pd section",
                    "Set topology.layout: pd, or remove the pd section.")
    if pd:
        total = pd["prefill"]["nodes"] + pd["decode"]["nodes"]
        if total != topo["nodes"]:
            raise _fail(layers, ("topology", "nodes"), _describe(topo["nodes"]),
                        f"{total}, the prefill and decode pools' nodes together (pd.prefill.nodes + pd.decode.nodes)")
        ports = [pd["prefill"]["port"], pd["decode"]["port"], lane["serve"]["port"]]
        if len(set(ports)) != 3:
            raise _fail(layers, ("pd", "decode", "port"), _describe(pd["decode"]["port"]),
                        "a port of its own: the router (serve.port), the prefill pool and the decode pool each listen "
                        "on one, and the router shares the prefill head's host")
        for role in ("prefill", "decode"):
            pd[role]["args"] = pd[role].get("args") or {}
            pd[role]["env"] = pd[role].get("env") or {}
        router = pd.get("router") or {}
        router.setdefault("policy", "round_robin")
        router.setdefault("intra_node_data_parallel_size", 1)
        router["args"] = router.get("args") or {}
        pd["router"] = router


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
    data = load_file(path)
    if data is None:
        raise LanekitError(f"{path} is empty; a lane file is a mapping of lane settings (lane, engine, image, ...).")
    if not isinstance(data, dict):
        raise LanekitError(f"{path} must be a mapping of lane settings, found {_describe(data)}.")
    return path, data


def load_lane(lanes_dir: str, lane_name: str, overrides: list[tuple[str, object]] | None = None,
              lane_file: tuple[str, dict] | None = None) -> dict:
    """Load, layer and validate one lane. ``overrides`` is [(source name, mapping or string)];
    ``lane_file`` is read_lane_file's (path, data) when the caller already read it (one read per plan)."""
    path, data = lane_file or read_lane_file(lanes_dir, lane_name)
    parsed = [(name, parse_overrides(value, name, _layer_variable(name))) for name, value in (overrides or [])]
    layers = Layers(path, data, parsed)
    lane = validate(layers, lane_name)
    lane["_source"] = path
    lane["_layers"] = [name for name, _layer in layers.layers]
    return lane


def _layer_variable(source: str) -> str:
    """The variable a layer's source names (its first word), for messages."""
    name = source.split(" ", 1)[0]
    return name if name in (GROUP_LAYER, HOST_LAYER, CLI_LAYER) else GROUP_LAYER


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
