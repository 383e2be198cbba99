# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Setting a few scalar values in a hand-written YAML file without losing its comments.

One job: the text edit behind ``lanekit.serving.pin``. PyYAML cannot write a file back with its
comments, and lanes and image specs carry their reasons in comments. So the value's own span in
the text is replaced (found through the composed node's marks), or a ``key: value`` line is added
under a block mapping that exists; everything else stays byte for byte. The result is parsed
again and must equal the old data with exactly the wanted values set, else the edit is refused
with the lines to change by hand: a pin never writes a file that means something else.
"""
from __future__ import annotations

import copy
import json
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import LanekitLoader, load_text


def _compose(text: str, source: str) -> Any:
    load_text(text, source)  # the loader's sentences for a file that is not a lanekit YAML file
    loader = LanekitLoader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def _child(node: Any, key: str) -> tuple[Any, Any] | None:
    """(key node, value node) of ``key`` in a mapping node, None when absent."""
    for key_node, value_node in node.value:
        if getattr(key_node, "value", None) == key:
            return key_node, value_node
    return None


def _by_index(text: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _set_in(data: Any, path: tuple[str, ...], value: str) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def _hand_lines(source: str, wanted: dict[tuple[str, ...], str]) -> str:
    return "; ".join(f"set {'.'.join(path)}: {json.dumps(value)}" for path, value in wanted.items())


def set_scalars(text: str, source: str, wanted: dict[tuple[str, ...], str]) -> tuple[str, list[str]]:
    """``text`` with each ``path -> value`` set (values are written double-quoted), and one line per change.

    A value already equal is left alone (no change line). The parent mapping of every path must
    exist in block style; a missing last key is added as a line after its last sibling.
    """
    root = _compose(text, source)
    data = load_text(text, source)
    expected = copy.deepcopy(data)
    edits: list[tuple[int, int, str]] = []
    changes: list[str] = []
    # An empty inline mapping (`digests: {}`, as recipe_lane writes an unpinned spec) becomes a block
    # holding the new keys: {id of the node: (node, the block's indent, [(key, quoted value)])}.
    filled: dict[int, tuple[Any, str, list[tuple[str, str]]]] = {}
    for path, value in wanted.items():
        node = root
        parent_column, parent_inline = -2, True
        for depth, key in enumerate(path[:-1]):
            found = _child(node, key) if node is not None and node.id == "mapping" else None
            if found is None or found[1].id != "mapping":
                raise LanekitError(
                    f"{source}: key '{'.'.join(path[:depth + 1])}' is not a mapping lanekit can edit; "
                    f"{_hand_lines(source, {path: value})} by hand.")
            parent_column, parent_inline = found[0].start_mark.column, bool(node.flow_style)
            node = found[1]
        quoted = json.dumps(value)
        found = _child(node, path[-1])
        if found is not None:
            key_node, value_node = found
            if value_node.id != "scalar":
                raise LanekitError(f"{source}: key '{'.'.join(path)}' is not a single value; "
                                   f"{_hand_lines(source, {path: value})} by hand.")
            old = load_text(text[value_node.start_mark.index:value_node.end_mark.index] or "null", source)
            if old == value:
                continue
            start, end = value_node.start_mark.index, value_node.end_mark.index
            edits.append((start, end, quoted if start != end else " " + quoted))
            changes.append(f"line {key_node.start_mark.line + 1}: {'.'.join(path)}: "
                           f"{json.dumps(old)} -> {quoted}")
        elif node.flow_style and not node.value and not parent_inline:
            entry = filled.setdefault(id(node), (node, " " * (parent_column + 2), []))
            entry[2].append((path[-1], quoted))
            changes.append(f"line {node.start_mark.line + 1}: {'.'.join(path)}: {quoted}")
        else:
            if node.flow_style or not node.value:
                raise LanekitError(f"{source}: key '{'.'.join(path[:-1])}' is written inline; "
                                   f"{_hand_lines(source, {path: value})} by hand.")
            first_key = node.value[0][0]
            last_value = node.value[-1][1]
            indent = " " * first_key.start_mark.column
            # After the last sibling's line (its value may be a block of its own).
            at = text.find("\n", last_value.end_mark.index if last_value.end_mark.column else
                           last_value.end_mark.index - 1)
            at = len(text) if at < 0 else at + 1
            if at == len(text) and not text.endswith("\n"):
                text += "\n"
                at = len(text)
            edits.append((at, at, f"{indent}{path[-1]}: {quoted}\n"))
            changes.append(f"new line after line {last_value.end_mark.line + (1 if last_value.end_mark.column else 0)}: "
                           f"{'.'.join(path)}: {quoted}")
        _set_in(expected, path, value)
    for node, indent, pairs in filled.values():
        block = "".join(f"\n{indent}{key}: {quoted}" for key, quoted in pairs)
        start = node.start_mark.index
        # `key: {}` -> `key:` and the block below it (the space before `{}` goes too).
        while start > 0 and text[start - 1] == " ":
            start -= 1
        edits.append((start, node.end_mark.index, block))
    if not edits:
        return text, []
    new_text = _by_index(text, edits)
    try:
        again = load_text(new_text, source)
    except LanekitError:
        again = None
    if again != expected:
        raise LanekitError(f"{source}: lanekit could not edit the file without changing its other values; "
                           f"{_hand_lines(source, wanted)} by hand.")
    return new_text, changes
