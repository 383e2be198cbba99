"""The image lock: what it records, how a disagreement is found and said."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image_spec import (
    load_image_spec,
    lock_arch_entry,
    lock_differences,
    lock_entry,
    lock_problem,
    merge_lock,
    resolve_image,
)

from tests.unit.helpers.docker import make_spec

ROOTFS = "sha256:" + "ee" * 32


@pytest.fixture
def resolved(tmp_path):
    return resolve_image(load_image_spec(str(tmp_path), "thin", data=make_spec(tmp_path)), "amd64")


def test_entry_records_the_pin_and_drops_empty_fields(resolved):
    entry = lock_entry(resolved, rootfs=ROOTFS, image_id="sha256:" + "01" * 32, builder="spark-01")
    assert entry["content_hash"] == resolved["content_hash"]
    assert entry["base_digest"] == resolved["base_digest"]
    assert entry["rootfs"] == ROOTFS
    assert entry["ref"] == resolved["ref"]
    assert "registry_digest" not in entry and "registry_ref" not in entry


def test_identical_lock_has_no_differences(resolved):
    entry = lock_entry(resolved, rootfs=ROOTFS)
    assert lock_differences(entry, dict(entry)) == []
    assert lock_problem("x/image.lock.yml", "thin", "amd64", []) is None


def test_image_id_is_not_compared(resolved):
    locked = lock_entry(resolved, rootfs=ROOTFS, image_id="sha256:" + "01" * 32)
    now = lock_entry(resolved, rootfs=ROOTFS, image_id="sha256:" + "02" * 32)
    assert lock_differences(locked, now) == []


def test_missing_fields_are_not_compared(resolved):
    locked = lock_entry(resolved, rootfs=ROOTFS, registry_digest="sha256:" + "aa" * 32)
    before_build = {"content_hash": resolved["content_hash"], "base_digest": resolved["base_digest"]}
    assert lock_differences(locked, before_build) == []


def test_changed_spec_is_named_with_the_fix(resolved):
    locked = dict(lock_entry(resolved, rootfs=ROOTFS), content_hash="0" * 64)
    differences = lock_differences(locked, {"content_hash": resolved["content_hash"]})
    assert differences == [f"content_hash: locked {'0' * 64}, now {resolved['content_hash']}"]
    sentence = lock_problem("images/thin/image.lock.yml", "thin", "amd64", differences)
    assert sentence.startswith("images/thin/image.lock.yml pins image 'thin' for amd64")
    assert "no longer builds the locked image" in sentence
    assert "-e image_lock_update=true" in sentence
    assert "no container was touched" in sentence


def test_rebuilt_image_is_explained_as_a_rebuild(resolved):
    locked = lock_entry(resolved, rootfs=ROOTFS)
    differences = lock_differences(locked, dict(locked, rootfs="sha256:" + "ff" * 32))
    sentence = lock_problem("l.yml", "thin", "amd64", differences)
    assert "rebuilt from the same spec but its layers differ" in sentence


def test_merge_keeps_other_architectures(resolved):
    doc = {"version": 1, "name": "thin", "arches": {"arm64": {"content_hash": "a" * 64}}}
    merged = merge_lock(doc, "thin", "amd64", lock_entry(resolved, rootfs=ROOTFS))
    assert list(merged["arches"]) == ["amd64", "arm64"]
    assert merged["arches"]["arm64"] == {"content_hash": "a" * 64}
    assert merged["arches"]["amd64"]["rootfs"] == ROOTFS
    assert merge_lock(None, "thin", "amd64", {"rootfs": ROOTFS})["name"] == "thin"


@pytest.mark.parametrize("doc, words", [
    ({"name": "thin", "arches": ["amd64"]}, "is not an image lock"),
    ({"name": "other", "arches": {}}, "sits next to image 'thin'"),
    ({"name": "thin", "arches": {"amd64": "sha256:x"}}, "must be a mapping"),
])
def test_malformed_lock_is_refused(doc, words):
    with pytest.raises(LanekitError) as err:
        lock_arch_entry(doc, "thin", "amd64", "images/thin/image.lock.yml")
    assert words in str(err.value)


def test_absent_lock_has_no_entry():
    assert lock_arch_entry(None, "thin", "amd64") is None
    assert lock_arch_entry({"name": "thin", "arches": {}}, "thin", "amd64") is None
