# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The lane's override layers and their provenance: which layer set each key.

One job: merge the lane file with its override layers (later wins per key; mappings deep-merge,
lists are replaced) and answer "which layer set this key" for the sentences of ``_validate``.
Each layer has its own variable name: Ansible replaces a same-named variable instead of merging
it, so one name for group and host would let a host's value silently drop the group's.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import describe, load_text, plain

_describe = describe


def deep_merge(base: Any, override: Any) -> Any:
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


def inventory_layers(host: str, group_value: Any, host_value: Any, old_value: Any = None) -> list[tuple[str, dict]]:
    """One host's inventory layers [(source, mapping)]: the group's, then the host's own.

    ``old_value`` is the host's ``lane_overrides``, refused when set.
    """
    if old_value is not None:
        raise old_layer_refusal(f"in the inventory for host {host}")
    return [(GROUP_SOURCE, parse_overrides(group_value, GROUP_SOURCE, GROUP_LAYER)),
            (host_source(host), parse_overrides(host_value, host_source(host), HOST_LAYER))]


def parse_overrides(value: Any, source: str, variable: str = GROUP_LAYER) -> dict:
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


def _json_pairs(source: str, variable: str) -> Callable[[list[tuple[str, Any]]], dict]:
    def hook(pairs: list[tuple[str, Any]]) -> dict:
        seen = set()
        for key, _value in pairs:
            if key in seen:
                # Not a ValueError subclass, so the YAML fallback is not tried on a duplicate.
                raise _DuplicateKey(f"{source}: {variable} sets the key {key!r} twice in one mapping; remove one.")
            seen.add(key)
        return dict(pairs)
    return hook


# The engine flag mappings of a lane (the router's are a program of its own, with its own parser).
ENGINE_ARGS_PATHS = (("serve", "args"), ("pd", "prefill", "args"), ("pd", "decode", "args"))


def canonical_flag(flag: str) -> str:
    """A long engine flag in the spelling the ranks get: dashes, as both engines' parsers define them.

    vLLM's parser reads '--gpu_memory_utilization' as '--gpu-memory-utilization' (its FlexibleArgumentParser
    turns the underscores of a long flag into dashes); SGLang's plain argparse knows only the dashed one.
    Canonical before anything merges, lints or hashes the flags, so two spellings are one key: a later
    layer's '--gpu_memory_utilization' replaces the lane's '--gpu-memory-utilization' instead of rendering
    beside it, where the engine would obey the last while the KV-budget lint read the first.
    """
    if not flag.startswith("--"):
        return flag  # a short flag ('-tp') is one spelling
    return "--" + flag[2:].replace("_", "-")


def _negation(flag: str) -> str | None:
    """The boolean opposite argparse pairs with a flag ('--no-X' for '--X'), as a key may spell it."""
    if flag.startswith("--no-"):
        return "--" + flag[5:]
    if flag.startswith("--"):
        return "--no-" + flag[2:]
    return None


def _canonical_args(args: dict, source: str, path: tuple) -> dict:
    """``args`` with every flag canonical; one flag set twice in one layer (two spellings, or a boolean
    and its '--no-' opposite both on) is refused naming both keys, since the engine would obey one."""
    out: dict = {}
    spelled: dict = {}
    where = ".".join(path)
    for flag, value in args.items():
        if not isinstance(flag, str):
            out[flag] = value  # the validator names a key that is no flag
            continue
        key = canonical_flag(flag)
        if key in spelled:
            raise LanekitError(
                f"{source}: {where} sets {spelled[key]!r} and {flag!r}, one engine flag in two spellings (the "
                f"engine reads '_' and '-' alike and obeys the last); keep one, spelled {key!r}.")
        opposite = _negation(key)
        if opposite in spelled and value not in (None, False) and out.get(opposite) not in (None, False):
            raise LanekitError(
                f"{source}: {where} turns on both {spelled[opposite]!r} and {flag!r}, a boolean flag and its "
                "opposite (the engine obeys the last); keep one.")
        spelled[key] = flag
        out[key] = value
    return out


def _merge_args(merged: dict, layer: dict) -> dict:
    """A layer's engine flags over the merged ones: a flag turned on drops its '--no-' opposite (and the
    other way round) set by an earlier layer, as giving it later on the command line would."""
    result = {k: copy.deepcopy(v) for k, v in merged.items()}
    for flag, value in layer.items():
        opposite = _negation(flag) if isinstance(flag, str) else None
        if opposite in result and value not in (None, False):
            del result[opposite]
        result[flag] = copy.deepcopy(value)
    return result


def _at(data: Any, path: tuple) -> Any:
    for part in path:
        data = data.get(part) if isinstance(data, dict) else None
    return data


def _with_canonical_args(layer: dict, source: str, spelled: dict[tuple, str]) -> dict:
    """The layer with its engine flag mappings in canonical spelling (the layer itself is not changed);
    ``spelled`` gets each canonical flag's spelling as this layer wrote it, for the messages."""
    out = layer
    for path in ENGINE_ARGS_PATHS:
        args = _at(layer, path)
        if not isinstance(args, dict):
            continue  # absent, or a shape the validator names
        if out is layer:
            out = copy.deepcopy(layer)
        _at(out, path[:-1])[path[-1]] = _canonical_args(args, source, path)
        for flag in args:
            if isinstance(flag, str) and canonical_flag(flag) != flag:
                spelled[path + (canonical_flag(flag),)] = flag
    return out


class Layers:
    """The lane file plus its override layers, remembering which layer set each key."""

    def __init__(self, lane_file: str, data: dict, overrides: list[tuple[str, dict]] | None = None) -> None:
        raw = [(lane_file, data)] + [(name, layer) for name, layer in (overrides or []) if layer]
        # Every layer's engine flags in one spelling before they merge: the provenance below, the lints
        # and the plan hash then see one key per flag. How a layer spelled a flag is kept for messages.
        self.spelled: dict[tuple, str] = {}
        self.layers = [(name, _with_canonical_args(layer, name, self.spelled) if isinstance(layer, dict) else layer)
                       for name, layer in raw]
        merged: dict = {}
        for _name, layer in self.layers:
            before = {path: _at(merged, path) for path in ENGINE_ARGS_PATHS}
            merged = deep_merge(merged, layer)
            for path, earlier in before.items():
                later = _at(layer, path)
                if isinstance(earlier, dict) and isinstance(later, dict):
                    _at(merged, path[:-1])[path[-1]] = _merge_args(earlier, later)
        self.merged = merged

    def written(self, path: tuple) -> tuple:
        """``path`` with its last part as the user spelled it (an engine flag put in canonical spelling)."""
        return path[:-1] + (self.spelled.get(path, path[-1]),) if path else path

    def set_to_null_by(self, path: tuple) -> str | None:
        """The last layer that sets ``path`` to null explicitly, if the merged value is null."""
        for name, layer in reversed(self.layers):
            node: Any = layer
            for part in path[:-1]:
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, dict) and path[-1] in node:
                return name if node[path[-1]] is None else None
        return None

    def source_of(self, path: tuple) -> str:
        for name, layer in reversed(self.layers):
            node: Any = layer
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


def layer_variable(source: str) -> str:
    """The variable a layer's source names (its first word), for messages."""
    name = source.split(" ", 1)[0]
    return name if name in (GROUP_LAYER, HOST_LAYER, CLI_LAYER) else GROUP_LAYER
