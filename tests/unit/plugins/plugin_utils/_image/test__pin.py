"""Issue 23: pin's decisions from canned registry answers (plugin_utils/_image/_pin.py)."""
from __future__ import annotations

import hashlib
import json

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._image import _pin

ARM = "sha256:" + "a" * 64
AMD = "sha256:" + "b" * 64
ATTEST = "sha256:" + "c" * 64
SPEC = {"name": "img", "spec_path": "images/img/image.yml",
        "upstream": {"repository": "vllm/vllm-openai", "tag": "v1", "digests": {"arm64": "sha256:b046d936"}}}


def index(*entries):
    return json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                       "manifests": [{"digest": d, "platform": p} for d, p in entries]}).encode()


LIST = index((AMD, {"os": "linux", "architecture": "amd64"}),
             (ARM, {"os": "linux", "architecture": "arm64", "variant": "v8"}),
             (ATTEST, {"os": "unknown", "architecture": "unknown"}))


def test_a_manifest_list_gives_the_digest_per_architecture_without_attestations():
    assert _pin.manifest_digests(LIST, "r:t") == {"amd64": AMD, "arm64": ARM}
    assert _pin.pin_digests(SPEC, _pin.manifest_digests(LIST, "r:t"), ["arm64"]) == {"arm64": ARM}


def test_a_single_manifest_is_the_sha256_of_its_bytes_for_the_one_architecture_pinned():
    raw = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                      "config": {}, "layers": []}).encode()
    found = _pin.manifest_digests(raw, "r:t")
    assert found == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert _pin.pin_digests(SPEC, found, ["arm64"]) == {"arm64": found}
    with pytest.raises(LanekitError, match=r"single-architecture image .* pin one architecture with -e pin_arches"):
        _pin.pin_digests(SPEC, found, ["arm64", "amd64"])


def test_an_architecture_the_image_does_not_have_is_one_sentence_naming_what_it_offers():
    found = _pin.manifest_digests(index((AMD, {"os": "linux", "architecture": "amd64"})), "r:t")
    with pytest.raises(LanekitError) as err:
        _pin.pin_digests(SPEC, found, ["arm64"])
    assert str(err.value) == ("vllm/vllm-openai:v1 has no linux/arm64 image (it offers linux/amd64); remove "
                              "upstream.digests.arm64 from images/img/image.yml or choose a tag built for it.")


def test_unknown_architectures_asked_for_are_refused_and_the_spec_ones_are_the_default():
    assert _pin.wanted_arches(SPEC, []) == ["arm64"]
    assert _pin.wanted_arches(SPEC, ["amd64"]) == ["amd64"]
    with pytest.raises(LanekitError, match="pin_arches names riscv64, which lanekit does not run on"):
        _pin.wanted_arches(SPEC, ["riscv64"])


def test_a_network_error_is_one_sentence_with_the_command_and_its_last_line():
    text = _pin.failure_sentence("skopeo", "r:t", 1, "time=x level=fatal\nError: dial tcp: lookup registry: no such host\n")
    assert text == ("could not read the manifest of r:t from its registry: `skopeo inspect --raw docker://r:t` failed: "
                    "Error: dial tcp: lookup registry: no such host. Check the controller's network and the tag (and "
                    "`skopeo login` for a private repository), then re-run.")
    assert "\n" not in text


def test_not_json_and_unknown_kinds_are_sentences():
    with pytest.raises(LanekitError, match="is not a JSON manifest"):
        _pin.manifest_digests(b"<html>", "r:t")
    with pytest.raises(LanekitError, match="manifest of kind 'application/x'"):
        _pin.manifest_digests(b'{"mediaType": "application/x"}', "r:t")


def test_the_resolvers_are_argv_lists_and_no_tool_is_one_sentence():
    assert _pin.resolver_argv("docker", "r:t") == ["docker", "buildx", "imagetools", "inspect", "--raw", "r:t"]
    assert _pin.resolver_argv("skopeo", "r:t") == ["skopeo", "inspect", "--raw", "docker://r:t"]
    assert _pin.choose_tool(lambda t: "/usr/bin/skopeo" if t == "skopeo" else None) == "skopeo"
    with pytest.raises(LanekitError, match="neither docker .* nor skopeo is on the controller's PATH"):
        _pin.choose_tool(lambda t: None)


def test_an_inventory_override_of_the_pinned_architecture_is_said():
    notes = _pin.overridden(SPEC, {"img": {"arm64": ARM}}, ["arm64"])
    assert notes == [f"lanekit_image_digests['img']['arm64'] is set in the inventory and takes precedence over "
                     f"images/img/image.yml: remove it there, or the plan keeps using {ARM}."]
    assert _pin.overridden(SPEC, {}, ["arm64"]) == []


def test_a_spec_listing_no_architecture_pins_the_one_its_lane_hardware_implies():
    bare = dict(SPEC, upstream=dict(SPEC["upstream"], digests={}))
    assert _pin.wanted_arches(bare, [], "arm64") == ["arm64"]
    assert _pin.wanted_arches(bare, ["amd64"], "arm64") == ["amd64"]
    with pytest.raises(LanekitError, match="lists no architecture"):
        _pin.wanted_arches(bare, [], None)
