# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Lane values checked against the engine record: the checks beyond the schema's types.

One job: the checks that need the engine record (``lane["_engine"]``) or know the plan's own settings.

Plan-owned flags in any spelling or position, the numbers the collection computes with (memory
fraction, maximum length, batch limits, timeouts), variables the plan sets itself, ports that must
not collide and a weights directory that stays under the weights root. ``_lane.validate`` calls
these with its ``Layers`` (which names the layer a key came from) and its ``_fail`` sentence maker.
"""
from __future__ import annotations

import ipaddress
import math
import posixpath
import re
from collections.abc import Callable
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import describe
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._layers import Layers

# ``_validate._fail``: (layers, key path, what was found, what is expected[, fix]) -> the sentence.
Fail = Callable[..., LanekitError]

CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# Environment variables the plan sets on every rank itself (from the engine record and the
# inventory's fabric settings, see _plan._fabric_env); a lane value would be overwritten silently.
PLAN_ENV = {
    "NCCL_SOCKET_IFNAME": "the inventory's fabric_ifname",
    "GLOO_SOCKET_IFNAME": "the inventory's fabric_ifname",
    "NCCL_IB_HCA": "the inventory's ib_hca",
    "UCX_NET_DEVICES": "the inventory's ucx_net_devices",
    "HF_HUB_OFFLINE": "the plan (ranks read the staged weights only)",
}
# Engine flags the collection reasons about (KV budget, batch limits) beyond the engine record's
# memory-fraction and max-length flags: their values must be whole numbers of at least 1.
COUNT_FLAGS = ("--max-num-seqs", "--max-num-batched-tokens", "--max-running-requests", "--max-total-tokens")


def json_problem(value: Any, depth: int = 0) -> str | None:
    """Why ``value`` cannot be rendered as an argument (JSON for mappings), or None."""
    if depth > 32:
        return "nested too deeply"
    if value is None or isinstance(value, (bool, int, str)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"a value holding {value!r} (not a finite number)"
    if isinstance(value, (list, tuple)):
        return next((p for p in (json_problem(v, depth + 1) for v in value) if p), None)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"a mapping with the key {key!r} (not text)"
            problem = json_problem(item, depth + 1)
            if problem:
                return problem
        return None
    return f"{describe(value)} inside the value"


def _norm_flag(flag: str) -> str:
    """A flag as the engines' parsers see it: '--tensor_parallel_size=8' is '--tensor-parallel-size'."""
    return flag.strip().split("=", 1)[0].replace("_", "-")


def plan_owned_flag(engine: _engines.Engine, flag: object) -> str | None:
    """The plan-owned flag that ``flag`` spells (underscores or dashes, with or without '=value'), or None."""
    if not isinstance(flag, str) or not flag.strip().startswith("-"):
        return None
    owned = {_norm_flag(f): f for f in engine.plan_owned}
    name = _norm_flag(flag)
    if name in owned:
        return owned[name]
    # argparse (both engines' parsers) accepts any unambiguous prefix of a long flag: '--tensor-parallel 4'
    # is --tensor-parallel-size.
    if name.startswith("--") and len(name) >= 6:
        prefixed = [f for n, f in owned.items() if n.startswith("--") and n.startswith(name)]
        if prefixed:
            return prefixed[0]
    return None


def _number(value: Any, integer: bool) -> int | float | None:
    """``value`` as a finite number, or None: booleans, NaN, infinity and text such as 'high' or '0,89' are not."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if integer:
            return int(text) if re.fullmatch(r"[0-9]+", text) else None
        if not re.fullmatch(r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?", text):
            return None
        value = float(text)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and not integer:
        return value
    return None


def flag_number(value: Any, integer: bool = False) -> int | float | None:
    """The number an engine flag or variable the collection reasons about holds (None when unset or not a number)."""
    return _number(value, integer)


def _numeric_rules(engine: _engines.Engine) -> dict[str, tuple[bool, Any, Any, str]]:
    """{flag or variable: (integer, minimum, maximum, what)} for the values the collection computes with."""
    rules = {
        engine.memory_fraction_flag: (False, 0.0, 1.0, "a number above 0 and at most 1 (a fraction of device memory)"),
        engine.max_len_flag: (True, 1, None, "a whole number of tokens of at least 1 (e.g. 524288)"),
    }
    for flag in COUNT_FLAGS:
        rules[flag] = (True, 1, None, "a whole number of at least 1")
    for timeout in engine.timeouts:
        rules[timeout.key] = (False, 0.0, None, "a number of seconds above 0")
    return rules


def _check_number(layers: Layers, fail: Fail, path: tuple, value: Any, rule: tuple[bool, Any, Any, str]) -> None:
    integer, low, high, what = rule
    number = _number(value, integer)
    bad = number is None or (number <= low if isinstance(low, float) else number < low)
    bad = bad or (high is not None and number > high)
    if bad:
        hint = " (a decimal point, not a comma)" if isinstance(value, str) and "," in value else ""
        raise fail(layers, path, describe(value), what + hint,
                   "The collection checks this value before boot (KV budget, batch limits, timeouts); "
                   "write it as a plain number.")


def _check_text(layers: Layers, fail: Fail, path: tuple, value: Any) -> None:
    if isinstance(value, str) and CONTROL_RE.search(value):
        raise fail(layers, path, f"{value!r}, which holds a control character (a newline or tab)",
                   "a single-line value")


def check_engine_settings(layers: Layers, lane: dict[str, Any], fail: Fail) -> None:
    """Checks that need the engine record: plan-owned flags in any spelling or position, numbers the
    collection reasons about, variables the plan sets, ports that must not collide."""
    engine: _engines.Engine = lane["_engine"]
    serve = lane["serve"]
    numeric = _numeric_rules(engine)
    ports = {"serve.port": serve["port"], "serve.rendezvous_port": serve["rendezvous_port"]}
    for canonical, value in serve["args"].items():
        path = ("serve", "args", canonical)
        flag = layers.written(path)[-1]  # as the layer spelled it (the merge made it canonical)
        owned = plan_owned_flag(engine, flag)
        if owned and value not in (None, False):
            spelled = "" if owned == flag else f" (spelled {flag})"
            raise LanekitError(
                f"{layers.source_of(path)}: key 'serve.args.{flag}' is set, but the plan renders {owned}{spelled} "
                f"from {engine.plan_owned[owned]}; remove it from serve.args (or set it to null in an override layer)."
            )
        foreign = _engines.foreign_flag(engine, _norm_flag(flag))
        if foreign and value not in (None, False):
            other, own = foreign
            fix = f"use {own} for that setting" if own else f"remove it (lanekit knows no {engine.display} flag for it)"
            raise LanekitError(
                f"{layers.source_of(path)}: key 'serve.args.{flag}' is a {other.display} flag that {engine.display} "
                f"does not have (lane engine {engine.name}; it would stop at start with 'unrecognized arguments'); "
                f"{fix}.")
        items = value if isinstance(value, list) else [value]
        for item in items:
            _check_text(layers, fail, path, item)
            smuggled = plan_owned_flag(engine, item)
            if smuggled:
                raise fail(
                    layers, path, f"{describe(value)} holding {item!r}", "values only",
                    f"It would render a second {smuggled} that the engine obeys while the plan and the health checks "
                    f"use the first ({engine.plan_owned[smuggled]}); remove it.")
        if value is None or value is False:
            continue
        rule = numeric.get(_norm_flag(flag))
        if rule:
            _check_number(layers, fail, path, value, rule)
        if isinstance(value, float) and not math.isfinite(value):
            raise fail(layers, path, describe(value), "a finite number")
        if _norm_flag(flag).endswith("-port"):
            _check_number(layers, fail, path, value, (True, 1, 65535, "a port number from 1 to 65535"))
            ports[f"serve.args.{canonical}"] = int(_number(value, True) or 0)  # checked just above
    for index, word in enumerate(serve.get("entrypoint") or []):
        if not word.strip() or CONTROL_RE.search(word):
            raise fail(layers, ("serve", "entrypoint"), f"a list whose item {index} is {word!r}",
                       "non-empty single-line words (the program and its subcommand, e.g. [vllm, serve])")
    seen: dict = {}
    for key, port in ports.items():
        if port in seen:
            raise fail(layers, tuple(key.split(".", 2)), f"{port}, the same port as {seen[port]}", "a different port",
                       "Every port a rank opens on its host must be distinct, or the second listener fails to bind.")
        seen[port] = key
    plan_env = dict(PLAN_ENV, **{engine.host_ip_env: "the inventory's fabric_ip"})
    for key, value in serve["env"].items():
        path = ("serve", "env", key)
        if value is None:
            continue
        if key in plan_env:
            raise fail(layers, path, "set", "no value here",
                       f"The plan sets {key} on every rank from {plan_env[key]} and would overwrite this value "
                       f"silently; remove it (set it in the inventory instead).")
        _check_text(layers, fail, path, value)
        if key in numeric:
            _check_number(layers, fail, path, value, numeric[key])


def check_model_dir(layers: Layers, model: dict[str, Any], fail: Fail) -> None:
    """The weights path stays under the weights root: a relative, normalised path without '..'."""
    key = "dir" if model.get("dir") else "id"
    raw = model.get("dir") or model["id"]
    norm = posixpath.normpath(raw)
    if raw.startswith("/") or norm in (".", "..") or norm.startswith("../") or CONTROL_RE.search(raw):
        raise fail(layers, ("model", key), describe(raw),
                   "a relative path under lanekit_weights_root without '..' (e.g. mistralai/Model-Name)",
                   "The weights path must stay under the NFS export every node mounts.")
    model["dir"] = norm


def check_api(layers: Layers, lane: dict[str, Any], fail: Fail) -> None:
    """``api.bind`` is an IP address the API server can bind (0.0.0.0 and :: included)."""
    bind = (lane.get("api") or {}).get("bind")
    if bind is None:
        return
    try:
        ipaddress.ip_address(bind)
    except ValueError:
        raise fail(layers, ("api", "bind"), describe(bind),
                   "an IP address of the head node to bind the API to (e.g. 10.100.0.11), or 0.0.0.0 for every "
                   "interface") from None
