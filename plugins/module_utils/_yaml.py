# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The one safe YAML loader of lanekit: every lane, image spec, image lock and override text goes through it.

On top of PyYAML's SafeLoader it refuses, with one sentence naming the file (and line):
  - bytes that are not UTF-8 (the byte offset and line of the first bad byte),
  - duplicate keys in one mapping (YAML would keep the last silently),
  - alias bombs: the document's expanded size is measured on the composed node graph, which
    shares aliased nodes, so a billion-laughs file is refused in time linear in its text,
  - aliases that refer to themselves (a cycle no lane setting can mean),
  - nesting deeper than MAX_DEPTH (PyYAML's recursive composer would otherwise hit Python's
    recursion limit).
"""
from __future__ import annotations

import datetime
import json
import math
import re
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

try:
    # PyYAML comes with ansible-core; untyped here (mypy.ini: no types-PyYAML), so yaml is Any.
    import yaml
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

MAX_DEPTH = 64
MAX_ALIASES = 200
# Expanded nodes (scalars, sequences, mappings, counting every alias use in full). The largest
# lane in the collection has a few hundred.
MAX_NODES = 20000
# Lanes, specs and locks are a few KiB; a bigger file is a mistake, and PyYAML's pure-Python parser
# would take minutes on a large one.
MAX_BYTES = 1 << 20


class _Refused(Exception):
    """A shape the loader refuses; the message is completed with the source by the caller."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


if yaml is not None:
    class LanekitLoader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
        """SafeLoader with duplicate-key, alias and depth limits."""

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._depth = 0
            self._aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self._aliases += 1
                if self._aliases > MAX_ALIASES:
                    mark = self.peek_event().start_mark
                    raise _Refused(f"uses more than {MAX_ALIASES} aliases (*name); refused", mark.line + 1)
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    mark = self.peek_event().start_mark
                    raise _Refused(f"nests deeper than {MAX_DEPTH} levels; refused", mark.line + 1)
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, MappingNode):
                seen: dict[Any, int] = {}
                for key_node, _value in node.value:
                    if not isinstance(key_node, ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        first = seen.get(key)
                    except TypeError:
                        continue
                    if first is not None:
                        raise _Refused(
                            f"sets the key {key!r} twice in one mapping (lines {first} and "
                            f"{key_node.start_mark.line + 1}); YAML would keep the last silently: remove one",
                            key_node.start_mark.line + 1)
                    seen[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    class Yaml12Loader(LanekitLoader):  # pylint: disable=too-many-ancestors
        """LanekitLoader with YAML 1.2's booleans (only true/false), as js-yaml reads vLLM recipes: an
        unquoted ``on`` or ``no`` stays a string."""

    Yaml12Loader.yaml_implicit_resolvers = {
        key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
        for key, resolvers in LanekitLoader.yaml_implicit_resolvers.items()
    }
    Yaml12Loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
else:  # pragma: no cover
    # Never read: load_text refuses first. The names exist on both branches, so mypy sees a class set to None.
    LanekitLoader = None  # type: ignore[misc,assignment]
    Yaml12Loader = None  # type: ignore[misc,assignment]


def _expanded_size(root: Any) -> int:
    """Nodes of the document with every alias expanded, without expanding it; refuses cycles."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Any) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise _Refused("has an alias that refers to itself (a node containing its own anchor); refused",
                           node.start_mark.line + 1)
        active.add(key)
        total = 1
        if isinstance(node, SequenceNode):
            for child in node.value:
                total += size(child)
        elif isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                total += size(key_node) + size(value_node)
        active.discard(key)
        sizes[key] = min(total, MAX_NODES + 1)
        return sizes[key]

    return size(root)


def _decode(data: bytes | str, source: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise LanekitError(
            f"{source} is not UTF-8 text: byte {exc.start} (line {line}) is 0x{data[exc.start]:02x}; "
            f"save the file as UTF-8."
        ) from None


def _check_size(data: bytes | str, source: str) -> None:
    if len(data) > MAX_BYTES:
        raise LanekitError(f"{source} is {len(data):,} bytes, more than the {MAX_BYTES:,} a lanekit YAML file may "
                           f"hold; refused.")


def load_text(data: bytes | str, source: str, yaml12: bool = False) -> Any:
    """Parse one YAML document from ``data``; every problem is a LanekitError naming ``source``.

    ``yaml12``: YAML 1.2 booleans (vLLM recipes are written for js-yaml), same limits otherwise."""
    if yaml is None:  # pragma: no cover
        raise LanekitError(f"{source} cannot be read here: PyYAML is not installed.")
    _check_size(data, source)
    text = _decode(data, source)
    loader = (Yaml12Loader if yaml12 else LanekitLoader)(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        if _expanded_size(root) > MAX_NODES:
            raise _Refused(f"expands to more than {MAX_NODES} values through its aliases (an alias bomb); refused",
                           root.start_mark.line + 1)
        return loader.construct_document(root)
    except _Refused as exc:
        where = f" (line {exc.line})" if exc.line else ""
        raise LanekitError(f"{source}{where} {exc.message}.") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        detail = f"{context}, {problem}" if context else problem
        raise LanekitError(f"{source} is not valid YAML{where}: {' '.join(str(detail).split())}.") from None
    except RecursionError:
        raise LanekitError(f"{source} nests too deeply to read; refused.") from None
    finally:
        loader.dispose()


def _depth_of(value: Any) -> int:
    """Nesting depth of parsed data, without recursion (JSON has no aliases, but may nest deep)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return deepest


def load_json_text(data: bytes | str, source: str) -> Any:
    """Parse one JSON document with the YAML loader's limits (size, UTF-8, depth) and duplicate keys refused."""
    _check_size(data, source)
    text = _decode(data, source)

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise _Refused(f"sets the key {key!r} twice in one object; JSON readers would keep one silently: "
                               "remove one")
            out[key] = value
        return out

    try:
        value = json.loads(text, object_pairs_hook=no_duplicates)
    except _Refused as exc:
        raise LanekitError(f"{source} {exc.message}.") from None
    except RecursionError:
        raise LanekitError(f"{source} nests deeper than {MAX_DEPTH} levels; refused.") from None
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        where = f" at line {line}, column {getattr(exc, 'colno', '?')}" if line else ""
        raise LanekitError(f"{source} is not valid JSON{where}: {getattr(exc, 'msg', exc)}.") from None
    if _depth_of(value) > MAX_DEPTH:
        raise LanekitError(f"{source} nests deeper than {MAX_DEPTH} levels; refused.")
    return value


def read_limited(path: str, what: str = "") -> bytes:
    """The bytes of ``path`` (at most MAX_BYTES + 1, so the size check can refuse); sentences for
    a directory, a missing or an unreadable file."""
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_BYTES + 1)
    except IsADirectoryError:
        raise LanekitError(f"{path} is a directory, not a file{what}.") from None
    except FileNotFoundError:
        raise LanekitError(f"{path} does not exist{what}.") from None
    except OSError as exc:
        raise LanekitError(f"{path} cannot be read{what}: {exc.strerror or exc}.") from None


def load_file(path: str, what: str = "", yaml12: bool = False) -> object:
    """Read and parse ``path``; a missing or unreadable file is a sentence too."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except IsADirectoryError:
        raise LanekitError(f"{path} is a directory, not a YAML file{what}.") from None
    except OSError as exc:
        raise LanekitError(f"{path} cannot be read{what}: {exc.strerror or exc}.") from None
    return load_text(data, path, yaml12=yaml12)


_DIGITS_RE = re.compile(r"[0-9]+")


def ascii_digits(text: Any) -> bool:
    """True for text of ASCII digits only. ``str.isdigit`` is also true for '²' or '٣', which ``int()``
    refuses or reads as a different number than the one a person sees."""
    return isinstance(text, str) and _DIGITS_RE.fullmatch(text) is not None


def whole_number(value: Any) -> int | None:
    """``value`` as an int when it is one (not a bool) or ASCII-digit text (surrounding spaces allowed); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and ascii_digits(value.strip()):
        return int(value.strip())
    return None


def finite_number(value: Any) -> bool:
    """A real number for a comparison: int or float, not a bool, not NaN or infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def describe(value: Any) -> str:
    """A value as a sentence names it, without Python's type names."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} (not a finite number)"
    if isinstance(value, (int, float)):
        return f"{value!r} (a number)"
    if isinstance(value, str):
        return f"{value!r} (a string)"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return f"{value.isoformat()} (a date; quote it to make it a string)"
    if isinstance(value, (bytes, bytearray)):
        return "binary data"
    if isinstance(value, set):
        return "a set"
    return "a value of an unsupported kind"


def plain(value: Any, _depth: int = 0) -> Any:
    """``value`` with Ansible's tagged/unsafe subclasses turned into plain dict, list, str, int, float, bool."""
    if _depth > MAX_DEPTH:
        raise LanekitError(f"a value nests deeper than {MAX_DEPTH} levels; refused.")
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, dict):
        return {plain(k, _depth + 1): plain(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, _depth + 1) for v in value]
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value
