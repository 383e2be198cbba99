"""The plan-key reference (docs/contracts.md), the lane-schema reference (docs/lane-schema.md) and the
image-spec reference (docs/image-schema.md), from the code.

One job: render the typed plan (``plugin_utils/_plan/_model.py``: every key, its type and the
meaning in its ``Annotated``), the lane schema table (``plugin_utils/_lane/_table.py``) and the
image spec's table (``plugin_utils/_image/_spec_doc.py``) as
Markdown tables, and put each between its markers in its document. A unit test
(tests/unit/test_references.py) fails when a document's block differs from the code, so
neither reference can go stale. Run from the checkout to rewrite the blocks:
``python tests/tools/references.py`` (``--check`` only reports).
"""
from __future__ import annotations

import os
import sys
import types
import typing
from collections.abc import Iterator
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTRACTS = os.path.join(REPO, "docs", "contracts.md")
LANE_SCHEMA = os.path.join(REPO, "docs", "lane-schema.md")
IMAGE_SCHEMA = os.path.join(REPO, "docs", "image-schema.md")
PLAN_BLOCK = "plan-keys"
LANE_BLOCK = "lane-schema"
IMAGE_BLOCK = "image-schema"


def _import_core() -> tuple[Any, Any]:
    """The plan model and the lane table, imported by the collection's name (the checkout's link)."""
    collections = os.path.join(REPO, ".collections")
    link = os.path.join(collections, "ansible_collections", "lanekit", "serving")
    if not os.path.exists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink("../../..", link)
    if collections not in sys.path:
        sys.path.insert(0, collections)
    from ansible_collections.lanekit.serving.plugins.plugin_utils._lane import _table
    from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _model
    return _model, _table


# --- the plan ----------------------------------------------------------------------------------

def _unwrap(hint: Any) -> tuple[Any, str, bool]:
    """(type, meaning, optional) of one TypedDict field hint."""
    optional = False
    if typing.get_origin(hint) in (typing.NotRequired, typing.Required):
        optional = typing.get_origin(hint) is typing.NotRequired
        hint = typing.get_args(hint)[0]
    meaning = ""
    if typing.get_origin(hint) is typing.Annotated:
        hint, meaning = typing.get_args(hint)[0], str(typing.get_args(hint)[1])
    return hint, meaning, optional


def _type_name(hint: Any) -> str:
    names = {str: "text", int: "integer", float: "number", bool: "true/false", type(None): "null"}
    if hint in names:
        return names[hint]
    if hint is Any:
        return "any"
    if typing.is_typeddict(hint):
        return "mapping"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}s" if typing.is_typeddict(args[0]) else f"list of {_type_name(args[0])}"
    if origin is dict:
        return "mapping"
    return getattr(hint, "__name__", str(hint))


def _rows(cls: Any, prefix: str = "") -> Iterator[tuple[str, str, str]]:
    for key, raw in typing.get_type_hints(cls, include_extras=True).items():
        hint, meaning, optional = _unwrap(raw)
        path = f"{prefix}{key}"
        yield path, _type_name(hint) + (" (optional key)" if optional else ""), meaning
        args = typing.get_args(hint)
        if typing.is_typeddict(hint):
            yield from _rows(hint, f"{path}.")
        elif typing.get_origin(hint) is list and args and typing.is_typeddict(args[0]):
            yield from _rows(args[0], f"{path}[].")
        elif typing.get_origin(hint) is dict and len(args) == 2 and typing.is_typeddict(args[1]):
            yield from _rows(args[1], f"{path}.<name>.")


def plan_keys() -> str:
    """The plan-key table: every key of ``_model.Plan`` (nested keys dotted), its type and meaning."""
    model, _table = _import_core()
    lines = [f"Plan version {model.PLAN_VERSION}.", "", "| key | type | meaning |", "|---|---|---|"]
    lines += [f"| `{path}` | {_cell(kind)} | {_cell(meaning)} |" for path, kind, meaning in _rows(model.Plan)]
    return "\n".join(lines) + "\n"


# --- the lane ----------------------------------------------------------------------------------

def _field_type(field: dict[str, Any], words: dict[str, str]) -> str:
    kind = field["kind"]
    if kind == "enum":
        return "one of " + ", ".join(f"`{choice}`" for choice in field["extra"])
    if kind == "bench":
        return "a mapping of bench settings"
    text = words.get(kind, kind)
    return text.split(" (")[0].split(";")[0] if kind in ("image", "name") else text


def _lane_rows(schema: dict[str, Any], words: dict[str, str], prefix: str = "") -> Iterator[tuple[str, ...]]:
    for key, field in schema.items():
        path = f"{prefix}{key}"
        default = "" if field["default"] is None else f"`{_value(field['default'])}`"
        least = f" (at least {field['min']})" if field.get("min") else ""
        yield path, _field_type(field, words) + least, "yes" if field["required"] else "", default, field["doc"]
        if field["kind"] == "map":
            yield from _lane_rows(field["extra"], words, f"{path}.")


def lane_schema() -> str:
    """The lane-schema table: every key of ``_table.SCHEMA`` (nested keys dotted), type, required, default, meaning."""
    _model, table = _import_core()
    lines = ["| key | type | required | default | meaning |", "|---|---|---|---|---|"]
    lines += [f"| `{path}` | {_cell(kind)} | {required} | {default} | {_cell(doc)} |"
              for path, kind, required, default, doc in _lane_rows(table.SCHEMA, table.TYPE_WORDS)]
    return "\n".join(lines) + "\n"


# --- the image spec ----------------------------------------------------------------------------

def image_schema() -> str:
    """The image-spec table: every key of ``_spec_doc.SPEC_DOC``, its type, whether required, its meaning."""
    _import_core()
    from ansible_collections.lanekit.serving.plugins.plugin_utils._image import _spec_doc
    lines = ["| key | type | required | meaning |", "|---|---|---|---|"]
    lines += [f"| `{key}` | {_cell(kind)} | {'yes' if required else ''} | {_cell(meaning)} |"
              for key, kind, required, meaning in _spec_doc.SPEC_DOC]
    return "\n".join(lines) + "\n"


# --- the documents -----------------------------------------------------------------------------

def _cell(text: str) -> str:
    """Table-cell text: '<lane>' would be read as an HTML tag and '|' would end the cell."""
    return text.replace("<", "\\<").replace(">", "\\>").replace("|", "\\|")


def _value(value: Any) -> str:
    """A default as a lane file spells it (true, round_robin, 4.0)."""
    return "true" if value is True else "false" if value is False else str(value)


def markers(name: str) -> tuple[str, str]:
    return (f"<!-- {name}: generated by tests/tools/references.py, do not edit -->", f"<!-- {name}: end -->")


def block(text: str, name: str) -> str:
    """The text between ``name``'s markers in ``text`` ('' when the markers are missing)."""
    begin, end = markers(name)
    if begin not in text or end not in text:
        return ""
    return text.split(begin, 1)[1].split(end, 1)[0].lstrip("\n")


def with_block(text: str, name: str, body: str) -> str:
    begin, end = markers(name)
    head, rest = text.split(begin, 1)
    return head + begin + "\n" + body + end + rest.split(end, 1)[1]


def documents() -> dict[str, tuple[str, str]]:
    """Document path -> (block name, generated body)."""
    return {CONTRACTS: (PLAN_BLOCK, plan_keys()), LANE_SCHEMA: (LANE_BLOCK, lane_schema()),
            IMAGE_SCHEMA: (IMAGE_BLOCK, image_schema())}


def main(argv: list[str]) -> int:
    stale = []
    for path, (name, body) in documents().items():
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if block(text, name) == body:
            continue
        stale.append(os.path.relpath(path, REPO))
        if "--check" not in argv:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(with_block(text, name, body))
    if stale:
        print(("stale: " if "--check" in argv else "rewrote: ") + ", ".join(stale))
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
