"""Recipe lanes for a real cluster (plugin_utils/_recipe/_cluster.py): each example inventory plans the seed's
recommended choice; AMD ranks reach their GPUs the ROCm way; choices the nodes cannot run are refused."""
from __future__ import annotations

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import table
from tests.unit.helpers.inventories import RECOMMENDED, compile_on, plan_on

# inventory -> (hardware, variant, nodes, tensor parallel, image repository)
EXPECTED = {
    "gb300": ("gb300", "default", 1, 4, "vllm/vllm-openai"),
    "h200": ("h200", "fp8", 2, 16, "vllm/vllm-openai"),
    "b200": ("b200", "default", 1, 8, "vllm/vllm-openai"),
    "mi355x": ("mi355x", "fp8", 1, 8, "vllm/vllm-openai-rocm"),
}


@pytest.mark.parametrize("name", sorted(RECOMMENDED))
def test_each_example_inventory_plans_the_seed_recommended_choice(name, tmp_path):
    compiled, plan, findings = plan_on(name, str(tmp_path))
    hardware, variant, nodes, tp, repository = EXPECTED[name]
    assert findings["errors"] == []
    assert compiled["choice"]["hardware"] == hardware and compiled["choice"]["variant"] == variant
    assert plan["hardware"] == hardware and len(plan["ranks"]) == nodes
    assert plan["topology"]["tensor_parallel"] == tp and plan["topology"]["nodes"] == nodes
    head = plan["ranks"][0]["command"]
    assert head[head.index("--tensor-parallel-size") + 1] == str(tp)
    assert plan["image"]["repository"] == repository and plan["image"]["tag"] == "mistral-large-4"
    # Planning shows the unpinned recipe image as a warning; the plan is still written.
    assert [w["id"] for w in findings["warnings"]].count("image-pin") == 1


@pytest.mark.parametrize("name", sorted(RECOMMENDED))
def test_a_deploy_is_refused_until_the_recipe_image_has_a_full_digest(name, tmp_path):
    _compiled, plan, findings = plan_on(name, str(tmp_path), purpose="deploy")
    assert plan is None and [e["id"] for e in findings["errors"]] == ["image-pin"]
    arch = "arm64" if name == "gb300" else "amd64"
    image = "mistral-large-4-1t-a52b-vllm" + ("-rocm" if name == "mi355x" else "")
    digests = {"lanekit_image_digests": {image: {arch: "sha256:" + "a" * 64}}}
    _compiled, plan, findings = plan_on(name, str(tmp_path), extra_vars=digests, purpose="deploy")
    assert findings["errors"] == [] and plan["image"]["pinned"]


def test_the_amd_plan_reaches_the_gpus_through_kfd_dri_and_the_video_group(tmp_path):
    _compiled, plan, _findings = plan_on("mi355x", str(tmp_path))
    for rank in plan["ranks"]:
        container = rank["container"]
        assert container["devices"][:2] == ["/dev/kfd", "/dev/dri"]
        assert container["groups"] == ["video"]
        assert "device_requests" not in container and rank["gpus"] == ""
        argv = rank["docker_argv"]
        assert "--gpus" not in argv and argv[argv.index("--group-add") + 1] == "video"
        assert rank["env"]["VLLM_ROCM_USE_AITER"] == "1" and rank["env"]["VLLM_FP8_MOE_REQUANT"] == "mxfp4"
    assert plan["hardware_profile"]["vendor"] == "amd" and plan["hardware_profile"]["gfx_arch"] == "gfx950"


def test_an_nvidia_device_request_on_amd_nodes_is_refused(tmp_path):
    _compiled, plan, findings = plan_on("mi355x", str(tmp_path),
                                        extra_vars={"lanekit_rank_gpus": "all", "lanekit_rank_group_add": []})
    messages = [e["message"] for e in findings["errors"] if e["id"] == "rank-gpu-access"]
    assert plan is None and len(messages) == 2
    assert "nvidia device request" in messages[0] and "video" in messages[1]


def test_a_rank_on_some_gpus_gets_the_vendor_visibility_variable(tmp_path):
    _compiled, plan, _findings = plan_on("mi355x", str(tmp_path), extra_vars={"lanekit_rank_visible_devices": "4,5,6,7"})
    assert plan["ranks"][0]["env"]["ROCR_VISIBLE_DEVICES"] == "4,5,6,7"
    _compiled, plan, _findings = plan_on("b200", str(tmp_path), extra_vars={"lanekit_rank_visible_devices": "0,1"})
    assert plan["ranks"][0]["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_recipe_notes_print_with_the_plan_and_troubleshooting_becomes_warnings(tmp_path):
    _compiled, plan, findings = plan_on("h200", str(tmp_path))
    assert any(note.startswith("H200: two 8-GPU nodes: FP8 only") for note in plan["notes"])
    assert "note    H200: two 8-GPU nodes" in table(plan)
    assert not any(note.startswith("Troubleshooting: ") for note in plan["notes"])
    fixes = [w["message"] for w in findings["warnings"] if w["id"] == "recipe-troubleshooting"]
    assert any(m.startswith("if you meet SIGBUS in FlashInfer JIT or autotune: Seen on shared filesystems.") for m in fixes)


def test_a_choice_for_other_hardware_than_the_nodes_is_refused_with_one_sentence(tmp_path):
    with pytest.raises(LanekitError) as err:
        compile_on("h200", str(tmp_path), {"strategy": "multi_node_tp", "hardware": "gb300"})
    text = str(err.value)
    assert "the choice is for gb300 hardware but the nodes of inventory inventories/h200 are h200" in text
    assert text.count(". ") == 0 and text.endswith(".") and "\n" not in text
    with pytest.raises(LanekitError, match="the choice is for gb300 hardware"):
        compile_on("b200", str(tmp_path), {"preset": "gb300_dcp8"})


def test_too_few_nodes_for_the_strategy_is_refused_naming_both_numbers(tmp_path):
    with pytest.raises(LanekitError) as err:
        compile_on("h200", str(tmp_path), hosts=1)
    assert "needs at least 2 nodes (16 GPUs) but inventory inventories/h200 has 1 host in lane_nodes with 8 GPUs " \
           "each (8 GPUs)" in str(err.value)


def test_too_few_gpus_per_node_for_the_strategy_is_refused_naming_both_numbers(tmp_path):
    with pytest.raises(LanekitError) as err:
        compile_on("h200", str(tmp_path), extra_vars={"lanekit_gpus_per_node": 4})
    assert "needs at least 4 nodes (16 GPUs) but inventory inventories/h200 has 2 hosts in lane_nodes with 4 GPUs " \
           "each (8 GPUs)" in str(err.value)
    with pytest.raises(LanekitError, match="sets lanekit_gpus_per_node to 16, but .* has 8 GPUs"):
        compile_on("h200", str(tmp_path), extra_vars={"lanekit_gpus_per_node": 16})


def test_a_single_node_strategy_on_several_hosts_is_refused(tmp_path):
    with pytest.raises(LanekitError, match="single_node_tp runs on 1 node but the group lane_nodes of inventory "
                                           "inventories/gb300 has 2 hosts"):
        compile_on("gb300", str(tmp_path), hosts=2)


def test_a_second_tray_plans_the_recipe_tp8_over_two_nodes(tmp_path):
    _compiled, plan, findings = plan_on("gb300", str(tmp_path), {"strategy": "multi_node_tp"}, hosts=2)
    assert findings["errors"] == [] and len(plan["ranks"]) == 2
    assert plan["topology"] == {"nodes": 2, "gpus_per_node": 4, "tensor_parallel": 8, "pipeline_parallel": 1,
                                "data_parallel": 1}


def test_fewer_gpus_per_node_resize_the_single_node_tp(tmp_path):
    # FP8 on 8 of a node's GPUs... and NVFP4 on 4 B200s, whose 720 GB hold less than the variant's 733 GB minimum:
    # the lane is resized to TP4 and its KV budget (the memory section) refuses it before anything boots.
    compiled, plan, findings = plan_on("b200", str(tmp_path), extra_vars={"lanekit_gpus_per_node": 4})
    with open(compiled["lane_file"], encoding="utf-8") as handle:
        assert yaml.safe_load(handle)["topology"]["tensor_parallel"] == 4
    assert plan is None and [e["id"] for e in findings["errors"]] == ["kv-budget"]
    compiled, plan, findings = plan_on("b200", str(tmp_path), {"strategy": "single_node_tp"},
                                       extra_vars={"lanekit_gpus_per_node": 6})
    assert findings["errors"] == [] and plan["topology"]["tensor_parallel"] == 6


def test_recompiling_changes_nothing_and_keeps_a_digest_written_into_the_image_spec(tmp_path):
    first = compile_on("b200", str(tmp_path))
    assert first["changed"] and not compile_on("b200", str(tmp_path))["changed"]
    with open(first["image_spec"], encoding="utf-8") as handle:
        spec = yaml.safe_load(handle)
    spec["upstream"]["digests"] = {"amd64": "sha256:" + "b" * 64}
    with open(first["image_spec"], "w", encoding="utf-8") as handle:
        yaml.safe_dump(spec, handle)
    compile_on("b200", str(tmp_path))
    with open(first["image_spec"], encoding="utf-8") as handle:
        assert yaml.safe_load(handle)["upstream"]["digests"] == {"amd64": "sha256:" + "b" * 64}


def test_hardware_without_a_lanekit_profile_is_refused(tmp_path):
    with pytest.raises(LanekitError, match="sets lanekit_hardware to 'tpu_v5'"):
        compile_on("b200", str(tmp_path), extra_vars={"lanekit_hardware": "tpu_v5"})


@pytest.mark.parametrize("ref, upstream", [
    ("vllm/vllm-openai-rocm:nightly", {"repository": "vllm/vllm-openai-rocm", "tag": "nightly", "digests": {}}),
    ("vllm/vllm-openai@sha256:" + "c" * 64,
     {"repository": "vllm/vllm-openai", "tag": "pinned", "digests": {"amd64": "sha256:" + "c" * 64}}),
    ("vllm/vllm-openai:v0.34.0@sha256:" + "d" * 64,
     {"repository": "vllm/vllm-openai", "tag": "v0.34.0", "digests": {"amd64": "sha256:" + "d" * 64}}),
    ("localhost:5000/vllm", {"repository": "localhost:5000/vllm", "tag": "latest", "digests": {}}),
])
def test_the_recipe_image_reference_becomes_an_image_spec_pinned_only_by_a_digest(ref, upstream, monkeypatch):
    from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _cluster as _recipe_cluster
    from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe import _lane as _recipe_lane
    monkeypatch.setattr(_recipe_lane, "docker_image", lambda *_args: ref)
    lane = {"lane": "x", "image": "x-vllm", "serve": {"entrypoint": ["vllm", "serve"]}}
    spec = _recipe_cluster.image_spec(None, {"choice": {"hardware": "b200", "variant": "default"}}, lane, "amd64")
    assert spec["upstream"] == upstream and spec["entrypoint"] == ["vllm", "serve"] and spec["lanes"] == ["x"]


@pytest.mark.parametrize("inventory", ["gb300", "h200", "b200", "mi355x"])
def test_no_strategy_takes_the_recommended_one_for_the_inventorys_nodes(tmp_path, inventory):
    from tests.unit.helpers.inventories import RECOMMENDED, compile_on
    compiled = compile_on(inventory, str(tmp_path), {})
    assert compiled["choice"]["strategy"] == RECOMMENDED[inventory]["strategy"]
    assert compiled["strategy_recommended"] is True and compiled["choice"]["strategy"] in compiled["strategies"]


def test_no_strategy_that_fits_the_nodes_names_the_offered_ones(tmp_path):
    from tests.unit.helpers.inventories import compile_on
    # The seed needs 16 H200 GPUs: one 8-GPU node fits none of its strategies.
    with pytest.raises(LanekitError) as err:
        compile_on("h200", str(tmp_path), {}, hosts=1)
    text = str(err.value)
    assert "no -e recipe_strategy was given, and none of the recipe's strategies on h200 (" in text
    assert "fits the 1 host of 8 GPUs in lane_nodes of inventory inventories/h200" in text
    assert text.endswith("pass -e recipe_strategy=NAME, or change lane_nodes.") and "None" not in text
