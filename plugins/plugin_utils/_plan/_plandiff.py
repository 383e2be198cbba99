# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What changed since the previous plan.json, as a person checks it (``plan_lane --diff``).

One job: compare two plans rank by rank and say what a rank would run differently: the engine
flags whose value changed, came or went, the positional arguments, the environment, the host
and the image; then the lane-level facts (image, API, weights). Not a JSON diff: a flag that moved
in the argv without changing its value is no change, and a value is shown once, old -> new; the
value of a key-like name (``HF_TOKEN``, ``--hf-token``) or a token-shaped value never is: only that
it changed, came or went (``module_utils/_redact``'s one rule, as the evidence and the ledger use).
"""
from __future__ import annotations

from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._redact import shown_value

# Lane-level facts a person checks, as (label, path in the plan).
LANE_FACTS = (("image", ("image", "ref")), ("api", ("api", "url")), ("weights", ("weights", "path")),
              ("weights revision", ("weights", "revision")), ("plan version", ("plan_version",)))


def _get(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def split_argv(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """(positional arguments, flag -> its value text) of an engine argv; a flag without a value maps to ''.

    A flag takes the tokens up to the next flag (``--x a b``); ``--x=v`` is ``--x`` with ``v``; a
    repeated flag keeps every value, in order. A token starting with '-' followed by a digit is a value."""
    positional: list[str] = []
    values: dict[str, list[list[str]]] = {}
    current: list[str] | None = None
    for token in argv:
        if token.startswith("-") and len(token) > 1 and not token[1].isdigit() and token[1] != ".":
            name, sep, value = token.partition("=")
            current = [value] if sep else []
            values.setdefault(name, []).append(current)
            if sep:
                current = None
        elif current is not None:
            current.append(token)
        else:
            positional.append(token)
    return positional, {name: " | ".join(" ".join(v) for v in uses) for name, uses in values.items()}


def _show(value: str | None) -> str:
    if value is None:
        return "unset"
    return value if value else "(no value)"


def rank_label(ranks: list[Any]) -> str:
    """``rank 3``, ``ranks 0-7``, ``ranks 0, 2, 5``."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    ints = all(isinstance(r, int) for r in ranks)
    if ints and ranks == list(range(ranks[0], ranks[0] + len(ranks))):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(str(r) for r in ranks)


def rank_changes(old: dict, new: dict) -> list[str]:
    """The differences of one rank, one line each (without the rank's name)."""
    lines: list[str] = []
    for key in ("host", "image", "role"):
        if old.get(key) != new.get(key):
            lines.append(f"{key}: {old.get(key)} -> {new.get(key)}")
    old_pos, old_flags = split_argv(list(old.get("entrypoint") or []) + list(old.get("command") or []))
    new_pos, new_flags = split_argv(list(new.get("entrypoint") or []) + list(new.get("command") or []))
    if old_pos != new_pos:
        lines.append(f"argv: {_positional(old_pos)} -> {_positional(new_pos)}")
    for flag in list(old_flags) + [f for f in new_flags if f not in old_flags]:
        before, after = old_flags.get(flag), new_flags.get(flag)
        if before != after:
            lines.append(f"argv {flag}: {_show(shown_value(flag, before))} -> {_show(shown_value(flag, after))}")
    old_env, new_env = old.get("env") or {}, new.get("env") or {}
    for name in sorted(set(old_env) | set(new_env)):
        before, after = old_env.get(name), new_env.get(name)
        if before != after:
            lines.append(f"env {name}: {_show(shown_value(name, before))} -> {_show(shown_value(name, after))}")
    return lines


def _positional(tokens: list[str]) -> str:
    """Positional arguments as shown: a token-shaped one (``hf_...``) is replaced, whatever its place."""
    return " ".join(str(shown_value("", token)) for token in tokens)


def plan_changes(old: dict | None, new: dict, where: str) -> list[str]:
    """What changed from ``old`` (the plan at ``where``, None when there was none) to ``new``, one line each."""
    if old is None:
        return [f"no previous plan at {where}: every rank is new."]
    if old.get("plan_hash") == new.get("plan_hash") and old.get("lane") == new.get("lane"):
        return [f"no rank changed since the plan at {where} (plan {str(new.get('plan_hash'))[:12]})."]
    lines = [f"changes since the plan at {where} (plan {str(old.get('plan_hash'))[:12]} -> "
             f"{str(new.get('plan_hash'))[:12]}):"]
    for label, path in LANE_FACTS:
        before, after = _get(old, path), _get(new, path)
        if before != after:
            lines.append(f"lane {label}: {before} -> {after}")
    old_ranks = {r.get("node_rank"): r for r in old.get("ranks") or [] if isinstance(r, dict)}
    new_ranks = {r.get("node_rank"): r for r in new.get("ranks") or [] if isinstance(r, dict)}
    # The same change on several ranks (a lane-wide flag) is one line naming them all.
    by_change: dict[str, list[Any]] = {}
    for rank in sorted(set(old_ranks) | set(new_ranks), key=lambda r: (r is None, r)):
        if rank not in new_ranks:
            found = [f"({old_ranks[rank].get('host')}): removed"]
        elif rank not in old_ranks:
            found = [f"({new_ranks[rank].get('host')}): new"]
        else:
            found = rank_changes(old_ranks[rank], new_ranks[rank])
        for change in found:
            by_change.setdefault(change, []).append(rank)
    for change, ranks in by_change.items():
        lines.append(f"{rank_label(ranks)} {change}")
    if len(lines) == 1:
        lines.append("no argv, env, host or image of a rank changed (a mount or docker option did: see the plan file).")
    return lines
