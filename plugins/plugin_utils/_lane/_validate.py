# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""A merged lane checked against the schema table, with defaults filled in.

One job: validation. Every problem is raised as one LanekitError sentence that names where the
value came from (the file or the layer, ``_layers.Layers``), the key path, what was found and
what is expected. The checks that need the engine record live in ``_values``.
"""
from __future__ import annotations

import copy
import math
from typing import Any, cast

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import describe
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _settings as _bench_settings
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._layers import Layers
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._model import Lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._table import (
    ENV_RE,
    FLAG_RE,
    IMAGE_NAME_RE,
    REVISION_RE,
    SCHEMA,
    SERVED_NAME_RE,
    SIZE_RE,
    TYPE_WORDS,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._values import (
    check_api,
    check_engine_settings,
    check_model_dir,
    json_problem,
)

_describe = describe


def _fail(layers: Layers, path: tuple, found: object, expected: str, fix: str = "") -> LanekitError:
    key = ".".join(str(p) for p in layers.written(path))
    source = layers.source_of(path)
    msg = f"{source}: key '{key}' is {found}; expected {expected}."
    if fix:
        msg += " " + fix
    return LanekitError(msg)


def _check_value(layers: Layers, path: tuple, field: dict, value: Any) -> None:
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
    elif kind == "size":
        ok = isinstance(value, str) and SIZE_RE.fullmatch(value) is not None
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
            raise _fail(layers, path, _describe(value), TYPE_WORDS["revision"],
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
        raise _fail(layers, path, _describe(value), TYPE_WORDS[kind])


def _check_map(layers: Layers, path: tuple, schema: dict, data: dict) -> None:
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
                    f"setting; expected {TYPE_WORDS.get(field['kind'], field['kind'])}. Give a value or drop the key "
                    f"from that layer."
                )
            if field["required"]:
                raise LanekitError(
                    f"{layers.layers[0][0]}: key '{'.'.join(map(str, path + (key,)))}' is missing; "
                    f"expected {TYPE_WORDS.get(field['kind'], field['kind'])}"
                    + (" (one of " + ", ".join(field["extra"]) + ")" if field["kind"] == "enum" else "") + "."
                )
            if field["default"] is not None:
                # A null from any layer resets an optional setting to its default.
                data[key] = copy.deepcopy(field["default"])
            continue
        _check_value(layers, path + (key,), field, data[key])


def _check_args(layers: Layers, path: tuple, args: Any) -> None:
    if args is None:
        return
    if not isinstance(args, dict):
        raise _fail(layers, path, _describe(args), TYPE_WORDS["args"],
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


def _check_env(layers: Layers, path: tuple, env: Any) -> None:
    if env is None:
        return
    if not isinstance(env, dict):
        raise _fail(layers, path, _describe(env), TYPE_WORDS["env"])
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_RE.match(key):
            raise _fail(layers, path + (key,), "not an environment variable name", "letters, digits and '_'")
        if not (value is None or isinstance(value, (str, int, float, bool))):
            raise _fail(layers, path + (key,), _describe(value), "a plain value (or null to remove it)")


def validate(layers: Layers, lane_name: str) -> Lane:
    """Validate the merged lane; return it with defaults filled in and its engine record on ``_engine``."""
    lane: Any = copy.deepcopy(layers.merged)
    if not isinstance(lane, dict):
        raise LanekitError(f"{layers.layers[0][0]} must be a mapping of lane settings, found {_describe(lane)}.")
    _check_map(layers, (), SCHEMA, lane)
    if lane["lane"] != lane_name:
        raise _fail(layers, ("lane",), _describe(lane["lane"]), f"'{lane_name}' (the file name without .yml)")
    # The schema checked the name against the engine table: the one lookup by name; every later
    # reader (values, flags, layout, plan, secrets) takes the record from the lane.
    lane["_engine"] = _engines.ENGINES[lane["engine"]]
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
    return cast(Lane, lane)


def _check_layout(layers: Layers, lane: Any) -> None:
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
