# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""A lane's engine flags and environment as its ranks get them.

One job: flag rendering. In ``serve.args`` a value of ``null`` or ``false`` removes the flag,
``true`` renders it bare and a mapping renders as compact JSON, so any layer can override or drop
one flag; the boot budget fills the engine timeouts the lane leaves unset (the lane's engine
record, ``lane["_engine"]``, says which).
"""
from __future__ import annotations

import json
from typing import Any

from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._model import Lane


def render_flag_value(value: Any) -> list[str]:
    """argv tokens for one flag value: bare flag, dropped flag, JSON, list or plain value."""
    if value is True:
        return []
    if isinstance(value, dict):
        return [json.dumps(value, separators=(",", ":"), sort_keys=False)]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def render_args(args: dict[str, Any]) -> list[str]:
    """Render ``serve.args`` in order; ``null``/``false`` drop the flag, ``true`` renders it bare."""
    argv: list[str] = []
    for flag, value in args.items():
        if value is None or value is False:
            continue
        argv.append(flag)
        argv.extend(render_flag_value(value))
    return argv


def budget_env(lane: Lane) -> dict[str, Any]:
    """Engine timeouts (carried in the environment) the boot budget fills when the lane leaves them unset."""
    return lane["_engine"].budget_defaults(lane["boot"]["budget_s"])[0]


def budget_args(lane: Lane) -> dict[str, Any]:
    """Engine timeouts (carried as flags) the boot budget fills when the lane leaves them unset."""
    return lane["_engine"].budget_defaults(lane["boot"]["budget_s"])[1]


def effective_env(lane: Lane) -> dict[str, Any]:
    """The lane's environment as ranks get it: budget defaults, then the lane's values (null = unset)."""
    env = budget_env(lane)
    env.update({k: v for k, v in lane["serve"]["env"].items() if v is not None})
    return env


def effective_args(lane: Lane) -> dict[str, Any]:
    """The lane's ``serve.args`` as ranks get them: the lane's flags in order, budget flags appended when absent."""
    args = dict(lane["serve"]["args"])
    for flag, value in budget_args(lane).items():
        args.setdefault(flag, value)
    return args


def timeout_value(lane: Lane, name: str) -> float | None:
    """The value a rank gets for the engine timeout ``name``: the lane's, else the budget, else the stock.

    None when the engine has no such timeout, or when the lane's value is not a number.
    """
    timeout = lane["_engine"].timeout(name)
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
