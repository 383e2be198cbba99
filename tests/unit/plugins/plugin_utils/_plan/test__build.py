"""The plan builder (plugin_utils/_plan/_build.py): the whole plan in one place, its version, and the
keys later phases read (api.url, image.pin)."""
from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._load import load_lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _build
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._build import PlanInputs, api_url, build_plan
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._model import PLAN_VERSION
from tests.unit.helpers.plans import IMAGES, LANES, REPO, SGLANG, VLLM, plan

GOLDEN = os.path.join(REPO, "tests", "fixtures", "golden")


def _plan(lane=VLLM, **kw):
    result, findings = plan(lane, **kw)
    assert findings["errors"] == [], findings["errors"]
    return result


def _image() -> dict:
    image = {k: None for k in ("name", "base_ref", "base_digest", "arch", "platform", "pinned", "pin_problem",
                               "spec_dir", "patches", "labels", "repository", "tag")}
    image.update({"ref": "img", "content_hash": "c", "entrypoint": ["vllm"]})
    return image


# -- the version ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lane", [VLLM, SGLANG])
def test_the_golden_plans_carry_the_codes_plan_version(lane):
    # The goldens' hashes moved once, with the bump to this version (changelogs/fragments/typed-plan.yml);
    # a golden regenerated without a bump would still say the old number and fail here.
    with open(os.path.join(GOLDEN, f"{lane}-plan.json"), encoding="utf-8") as handle:
        assert json.load(handle)["plan_version"] == PLAN_VERSION == _plan(lane)["plan_version"]


def test_the_plan_version_is_part_of_every_spec_hash(monkeypatch):
    before = _plan()
    monkeypatch.setattr(_build, "PLAN_VERSION", PLAN_VERSION + 1)
    after = _plan()
    assert before["plan_hash"] != after["plan_hash"]
    assert all(a["spec_hash"] != b["spec_hash"] for a, b in zip(before["ranks"], after["ranks"], strict=True))
    # ...and nothing a rank runs moved with it: the version changes the hashes and their labels only.
    for a, b in zip(before["ranks"], after["ranks"], strict=True):
        assert (a["command"], a["env"], a["entrypoint"], a["mounts"]) == (b["command"], b["env"], b["entrypoint"],
                                                                          b["mounts"])


# -- one builder, the whole plan ---------------------------------------------------------------------------

def test_build_plan_returns_the_whole_plan_and_nothing_is_added_afterwards():
    # plan_lane returns exactly what the builder built: every key of the model, none besides.
    from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._model import Plan, RankSpec
    result = _plan()
    assert set(Plan.__required_keys__) <= set(result) <= set(Plan.__required_keys__) | set(Plan.__optional_keys__)
    for rank in result["ranks"]:
        assert set(RankSpec.__required_keys__) <= set(rank) <= (set(RankSpec.__required_keys__)
                                                                | set(RankSpec.__optional_keys__))


def test_every_rank_of_a_tensor_parallel_lane_names_its_pool():
    ranks = _plan()["ranks"]
    assert [r["pool"] for r in ranks] == ["lane"] * 8
    assert [r["pool_rank"] for r in ranks] == list(range(8))
    assert [r["serves_api"] for r in ranks] == [True] + [False] * 7
    assert {r["api_port"] for r in ranks} == {8000}


def test_bench_and_hardware_keys_are_published_for_every_lane():
    result = _plan()
    assert result["bench"] == {}
    assert result["hardware_profile"]["memory_model"] is None and result["hardware_profile"]["arch"] is None
    assert result["api"]["key_required"] is False


# -- api.url ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("address, url", [
    ("10.100.0.11", "http://10.100.0.11:8000"),
    ("fd00:100::11", "http://[fd00:100::11]:8000"),
    ("::1", "http://[::1]:8000"),
])
def test_api_url_puts_an_ipv6_address_in_brackets(address, url):
    assert api_url(address, 8000) == url


def test_the_plan_publishes_the_api_url_of_the_head():
    assert _plan()["api"]["url"] == "http://10.100.0.11:8000"


def test_an_ipv6_fabric_gives_a_bracketed_api_url():
    one = build_plan(PlanInputs(lane=load_lane(LANES, VLLM), profile={"env": {}}, image=_image(),
                                hosts=[{"name": "solo", "fabric_ip": "fd00:100::11"}], cluster={"weights_root": "/w"}))
    assert one["api"]["address"] == "fd00:100::11"
    assert one["api"]["url"] == "http://[fd00:100::11]:8000"


def test_api_bind_names_the_address_of_the_url():
    result = _plan(overrides={"api": {"bind": "10.100.0.11"}})
    assert result["api"]["url"] == "http://10.100.0.11:8000"


# -- image.pin ------------------------------------------------------------------------------------------------

def test_without_a_lock_the_pin_is_the_ref_and_content_hash():
    result = _plan()
    assert result["image"]["pin"] == {"ref": result["image"]["ref"], "content_hash": result["image"]["content_hash"],
                                      "rootfs": "", "config": ""}


def _images_with_lock(tmp_path, lock) -> str:
    images = tmp_path / "images"
    shutil.copytree(IMAGES, images)
    (images / "mistral-large4-vllm" / "image.lock.yml").write_text(yaml.safe_dump(lock), encoding="utf-8")
    return str(images)


def test_the_pin_carries_the_locked_digests_for_the_nodes_architecture(tmp_path):
    lock = {"version": 1, "name": "mistral-large4-vllm", "arches": {
        "arm64": {"content_hash": "x", "rootfs": "sha256:" + "a" * 64, "config": "sha256:" + "b" * 64},
        "amd64": {"content_hash": "y", "rootfs": "sha256:" + "e" * 64}}}
    result = _plan(images_dir=_images_with_lock(tmp_path, lock))
    assert result["image"]["pin"]["rootfs"] == "sha256:" + "a" * 64
    assert result["image"]["pin"]["config"] == "sha256:" + "b" * 64
    assert result["image"]["pin"]["ref"] == result["image"]["ref"]


def test_a_lock_that_is_not_a_lock_is_one_sentence_naming_the_file(tmp_path):
    with pytest.raises(LanekitError, match=r"image\.lock\.yml is not an image lock"):
        _plan(images_dir=_images_with_lock(tmp_path, {"arches": ["arm64"]}))
