"""Issue 23: pin edits a value in place and keeps every comment (plugin_utils/_yaml_edit.py)."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._yaml_edit import set_scalars

D = "sha256:" + "a" * 64
SPEC = """---
# why this image
upstream:
  repository: r
  tag: t
  digests:
    # The report gives only this prefix.
    arm64: "sha256:2f0cd825"  # keep me
entrypoint: [x]
"""


def test_a_value_is_replaced_in_place_and_the_comments_stay():
    text, changes = set_scalars(SPEC, "image.yml", {("upstream", "digests", "arm64"): D})
    assert text == SPEC.replace('"sha256:2f0cd825"', f'"{D}"')
    assert changes == [f'line 8: upstream.digests.arm64: "sha256:2f0cd825" -> "{D}"']


def test_an_equal_value_changes_nothing():
    text = set_scalars(SPEC, "image.yml", {("upstream", "digests", "arm64"): D})[0]
    assert set_scalars(text, "image.yml", {("upstream", "digests", "arm64"): D}) == (text, [])


def test_an_empty_value_and_a_missing_key_are_written():
    empty = SPEC.replace('arm64: "sha256:2f0cd825"  # keep me', "amd64:")
    text, changes = set_scalars(empty, "image.yml", {("upstream", "digests", "amd64"): D,
                                                     ("upstream", "digests", "arm64"): D})
    assert f'    amd64: "{D}"\n    arm64: "{D}"\nentrypoint' in text
    assert "# The report gives only this prefix." in text
    assert changes == [f'line 8: upstream.digests.amd64: null -> "{D}"',
                       f'new line after line 8: upstream.digests.arm64: "{D}"']


def test_a_null_revision_is_replaced():
    lane = "model:\n  id: org/m\n  revision: null  # pin me\n  dir: d\n"
    text = set_scalars(lane, "l.yml", {("model", "revision"): "f" * 40})[0]
    assert text == f'model:\n  id: org/m\n  revision: "{"f" * 40}"  # pin me\n  dir: d\n'


def test_an_inline_mapping_is_refused_with_the_line_to_write():
    with pytest.raises(LanekitError) as err:
        set_scalars("upstream: {digests: {}}\n", "image.yml", {("upstream", "digests", "arm64"): D})
    assert str(err.value) == f"image.yml: key 'upstream.digests' is written inline; set upstream.digests.arm64: \"{D}\" by hand."


def test_an_empty_inline_mapping_under_a_block_becomes_a_block_with_the_new_keys():
    spec = "---\n# unpinned\nupstream:\n  repository: r\n  digests: {}  # recipe_lane wrote this\nentrypoint: [x]\n"
    text, changes = set_scalars(spec, "image.yml", {("upstream", "digests", "arm64"): D,
                                                    ("upstream", "digests", "amd64"): D})
    assert text == (f'---\n# unpinned\nupstream:\n  repository: r\n  digests:\n    arm64: "{D}"\n    amd64: "{D}"'
                    "  # recipe_lane wrote this\nentrypoint: [x]\n")
    assert changes == [f'line 5: upstream.digests.arm64: "{D}"', f'line 5: upstream.digests.amd64: "{D}"']
