"""The generated references (tests/tools/references.py): docs/contracts.md's plan-key table and
docs/lane-schema.md say what the code says, so neither can go stale."""
from __future__ import annotations

import typing

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._lane import _table
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _model
from tests.tools import references


@pytest.mark.parametrize("path", sorted(references.documents()))
def test_the_documents_block_is_the_generated_reference(path):
    name, body = references.documents()[path]
    with open(path, encoding="utf-8") as handle:
        assert references.block(handle.read(), name) == body, (
            f"{path} is stale: run python tests/tools/references.py and commit the result")


def _keys(cls, prefix=""):
    out = set()
    for key, hint in typing.get_type_hints(cls).items():
        out.add(prefix + key)
        args = typing.get_args(hint)
        if typing.is_typeddict(hint):
            out |= _keys(hint, f"{prefix}{key}.")
        elif typing.get_origin(hint) is list and args and typing.is_typeddict(args[0]):
            out |= _keys(args[0], f"{prefix}{key}[].")
        elif typing.get_origin(hint) is dict and len(args) == 2 and typing.is_typeddict(args[1]):
            out |= _keys(args[1], f"{prefix}{key}.<name>.")
    return out


def test_every_plan_key_has_a_row_with_a_meaning():
    rows = [line for line in references.plan_keys().splitlines() if line.startswith("| `")]
    listed = {row.split("`")[1] for row in rows}
    assert listed == _keys(_model.Plan)
    assert {"api.url", "image.pin.rootfs", "plan_version", "ranks[].spec_hash", "pools.<name>.port"} <= listed
    assert all(row.rstrip(" |").rsplit("|", 1)[1].strip() for row in rows), "a key without its meaning"


def test_every_lane_key_has_a_row_with_a_meaning():
    def keys(schema, prefix=""):
        out = set()
        for key, field in schema.items():
            out.add(prefix + key)
            if field["kind"] == "map":
                out |= keys(field["extra"], f"{prefix}{key}.")
        return out
    rows = [line for line in references.lane_schema().splitlines() if line.startswith("| `")]
    assert {row.split("`")[1] for row in rows} == keys(_table.SCHEMA)
    assert all(row.rstrip(" |").rsplit("|", 1)[1].strip() for row in rows), "a lane key without its meaning"


def test_a_stale_block_is_found_and_rewritten():
    name = references.PLAN_BLOCK
    begin, end = references.markers(name)
    text = f"intro\n{begin}\n| old |\n{end}\nafter\n"
    assert references.block(text, name) == "| old |\n"
    fresh = references.with_block(text, name, "| new |\n")
    assert fresh == f"intro\n{begin}\n| new |\n{end}\nafter\n"


def test_the_image_schema_names_exactly_the_keys_the_spec_loader_accepts():
    from ansible_collections.lanekit.serving.plugins.module_utils._image import _spec
    from ansible_collections.lanekit.serving.plugins.plugin_utils._image import _spec_doc
    keys = [row[0] for row in _spec_doc.SPEC_DOC]
    assert {k for k in keys if "." not in k and "[" not in k} == set(_spec._SPEC_KEYS)
    assert {k.rsplit(".", 1)[1] for k in keys if k.startswith("upstream.digests.")} == set(_spec.ARCHES)
    assert len(keys) == len(set(keys)) and all(row[3] for row in _spec_doc.SPEC_DOC)
    rows = [line for line in references.image_schema().splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == keys
