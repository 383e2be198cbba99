"""Every accelerator of the recipe taxonomy deploys as a lane (issue 27): a golden plan per new hardware profile (each
rank's docker argv with its devices, env and mounts), each example inventory planning the recipes' recommended
choice for deploy, a lane refused on the wrong kind of node naming its profile, and restricted profiles only for the
recipes that list them, the refusal naming those that do."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES, node_mismatch
from ansible_collections.lanekit.serving.plugins.module_utils._lane._recognise import node_summary
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import Choice
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._cluster import (
    Cluster,
    compile_for_cluster,
    node_arch,
    write_cluster_lane,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._compose import compile_recipe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import load_recipe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._rules import RecipeRefusal
from tests.unit.helpers.inventories import inventory_hosts, plan_on
from tests.unit.helpers.recipes import FIXTURES, REPO, SEED, TINY, TREE, shared_corpus

DENSE = os.path.join(FIXTURES, "models", "acme", "Tiny-Dense.yaml")
GOLDEN = os.path.join(REPO, "tests", "fixtures", "golden", "hardware")
NEW = ("rtx_pro_6000", "rtx_pro_6000_8x", "dgx_station_gb300", "trillium", "ironwood", "arc_pro_b60", "arc_pro_b70",
       "xeon6", "ascend_950pr")
# example inventory -> (hardware, image repository of the fixture's lane, the upstream recipe that lists it)
INVENTORIES = {
    "tpu-v6e": ("trillium", "vllm/vllm-tpu", "meta-llama/Llama-3.1-8B-Instruct"),
    "xeon6": ("xeon6", "vllm/vllm-openai-cpu", "meta-llama/Llama-3.1-8B-Instruct"),
    "arc-b60": ("arc_pro_b60", "vllm/vllm-openai-xpu", "meta-llama/Llama-3.1-8B-Instruct"),
    "ascend": ("ascend_950pr", "quay.io/ascend/vllm-ascend", "Qwen/Qwen3.8-27B"),
    "rtx-pro-6000": ("rtx_pro_6000_8x", "vllm/vllm-openai", "deepseek-ai/DeepSeek-V4-Flash"),
}


def _write(path: str, text: str) -> bool:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return True


def _plan_fixture(hardware: str, reports: str):
    """The fixture recipe's recommended choice on one node of ``hardware`` (the profile's defaults, nothing set)."""
    hosts = [{"name": "node-01", "vars": {"lanekit_weights_root": "/mnt/nfs/models", "fabric_ip": "10.99.0.1",
                                          "lanekit_node_arch": node_arch(hardware)}, "layers": []}]
    cluster = Cluster(hosts=["node-01"], hardware=hardware, arch=node_arch(hardware), where="the test's inventory")
    sized, result = compile_for_cluster(load_recipe(DENSE, TREE), Choice(), cluster)
    written = write_cluster_lane(sized, result, reports, ["test"], _write, node_arch(hardware))
    return plan_lane(written["lanes_dir"], written["images_dir"], written["lane"], hosts, [], "plan")


def _golden_view(plan: dict, reports: str) -> str:
    ranks = [{key: rank[key] for key in ("docker_argv", "env", "mounts", "devices", "gpus", "group_add")}
             for rank in plan["ranks"]]
    view = {"hardware_profile": plan["hardware_profile"], "topology": plan["topology"], "ranks": ranks,
            "image": f"{plan['image']['repository']}:{plan['image']['tag']}", "memory": plan["memory"]}
    return json.dumps(view, indent=1, sort_keys=True).replace(reports, "<reports>") + "\n"


@pytest.mark.parametrize("hardware", NEW)
def test_each_new_profile_plans_the_golden_docker_run(hardware, tmp_path):
    plan, findings = _plan_fixture(hardware, str(tmp_path))
    assert findings["errors"] == [], findings["errors"]
    path = os.path.join(GOLDEN, f"{hardware}.json")
    actual = _golden_view(plan, str(tmp_path))
    if os.environ.get("LANEKIT_UPDATE_GOLDEN"):
        os.makedirs(GOLDEN, exist_ok=True)
        _write(path, actual)
    with open(path, encoding="utf-8") as handle:
        assert actual == handle.read(), f"{path} differs from the rendered plan"


def test_the_goldens_show_each_kinds_access():
    def golden(hardware):
        with open(os.path.join(GOLDEN, f"{hardware}.json"), encoding="utf-8") as handle:
            return json.load(handle)

    def argv(hardware):
        return " ".join(golden(hardware)["ranks"][0]["docker_argv"])
    assert "--device /dev/vfio " in argv("trillium") and "--gpus" not in argv("trillium")
    assert "--device /dev/dri -v /mnt/nfs/models:/mnt/nfs/models:ro -v /dev/dri/by-path:/dev/dri/by-path:ro" in argv(
        "arc_pro_b60")
    assert "--device /dev/davinci0 --device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc" in \
        argv("ascend_950pr") and "-v /usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64:ro" in argv("ascend_950pr")
    # 16 GB fit one card: the site's auto-fit TP1, on an NVIDIA device request.
    assert "--gpus all" in argv("rtx_pro_6000_8x") and "--tensor-parallel-size 1" in argv("rtx_pro_6000_8x")
    assert "--device" not in argv("xeon6") and "--tensor-parallel-size 2" in argv("xeon6")  # the recipe's TP2 override
    # The recipe's exact-hardware image pin is the base of the Ascend lane's image; the others take the family's.
    assert golden("ascend_950pr")["image"] == "quay.io/ascend/vllm-ascend:v0.13.0"
    assert golden("ironwood")["image"] == "vllm/vllm-tpu:latest" and golden("arc_pro_b70")["image"] == \
        "vllm/vllm-openai-xpu:latest"


@pytest.mark.parametrize("name", sorted(INVENTORIES))
def test_each_example_inventory_plans_the_fixtures_recommended_choice_for_deploy(name, tmp_path):
    # What a check-mode deploy plans first (preflight's lane_plan, purpose deploy), once the image is pinned.
    hardware, repository, _upstream = INVENTORIES[name]
    compiled, plan, findings = plan_on(name, str(tmp_path), {}, recipe=DENSE, recipe_root=TREE)
    assert compiled["choice"]["hardware"] == hardware and findings["errors"] == []
    assert plan["image"]["repository"] == repository
    image = plan["image"]["name"]
    digests = {"lanekit_image_digests": {image: {plan["image"]["arch"]: "sha256:" + "a" * 64}}}
    _compiled, plan, findings = plan_on(name, str(tmp_path), {}, extra_vars=digests, purpose="deploy", recipe=DENSE,
                                        recipe_root=TREE)
    assert findings["errors"] == [] and plan["image"]["pinned"]
    profile = PROFILES[hardware]
    for rank in plan["ranks"]:
        assert rank["gpus"] == ("all" if profile["vendor"] == "nvidia" else "")
        assert [d for d in profile["rank_container"]["devices"] if d not in rank["devices"]] == []


@pytest.mark.parametrize("name", sorted(INVENTORIES))
def test_each_example_inventory_plans_the_upstream_recipes_recommended_choice(name, tmp_path):
    corpus = shared_corpus()
    if corpus is None:
        pytest.skip("the shared recipe corpus (../shared/recipes) is not beside this checkout")
    hardware, repository, recipe = INVENTORIES[name]
    path = os.path.join(corpus, "upstream", "models", recipe + ".yaml")
    compiled, plan, findings = plan_on(name, str(tmp_path), {}, recipe=path)
    assert findings["errors"] == [] and compiled["choice"]["hardware"] == hardware
    assert plan["image"]["repository"] == repository
    if name == "rtx-pro-6000":  # the recipe's default_strategy, TEP over the node's 8 cards
        assert compiled["choice"]["strategy"] == "single_node_tep" and plan["topology"]["tensor_parallel"] == 8
    if name == "xeon6":  # the recipe's TP2 on one node: two CPU workers, each on a NUMA node of its own (auto)
        assert plan["topology"]["tensor_parallel"] == 2 and "VLLM_CPU_OMP_THREADS_BIND" not in plan["ranks"][0]["env"]


def test_a_lane_planned_for_tpu_nodes_is_refused_on_a_gpu_node_naming_the_profile(tmp_path):
    _compiled, plan, _findings = plan_on("tpu-v6e", str(tmp_path), {}, recipe=DENSE, recipe_root=TREE)
    h100 = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "count": 8}
    gpu_node = node_summary("vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n",
                            [{"vendor": "0x10de", "device": "0x2330", "class": "0x030200", "driver": "nvidia"}], [])
    text = node_mismatch(plan["hardware_profile"], h100, "amd64", {"server_version": "28.2.2"}, plan["image"]["arch"],
                         gpu_node)
    assert "the lane's hardware profile trillium (Google Cloud TPU v6e (Trillium)) needs Google TPU v6e chips" in text
    tpu_node = node_summary("", [{"vendor": "0x1ae0", "device": "0x006f", "class": "0x120000", "driver": "vfio-pci"}],
                            ["vfio"])
    assert node_mismatch(plan["hardware_profile"], {}, "amd64", {"server_version": "28.2.2"}, "amd64", tpu_node) == ""


def _tree_with(tmp_path, *recipes):
    root = tmp_path / "tree"
    shutil.copytree(os.path.join(TREE, "strategies"), root / "strategies")
    shutil.copy(os.path.join(TREE, "taxonomy.yaml"), root / "taxonomy.yaml")
    (root / "models" / "acme").mkdir(parents=True)
    for recipe in recipes:
        shutil.copy(recipe, root / "models" / "acme" / os.path.basename(recipe))
    return root


def test_a_restricted_profile_is_refused_for_a_recipe_that_does_not_list_it_naming_those_that_do(tmp_path):
    root = _tree_with(tmp_path, TINY, DENSE)
    src = load_recipe(str(root / "models" / "acme" / "Tiny-MoE.yaml"))
    with pytest.raises(RecipeRefusal) as err:
        compile_recipe(src, Choice(hardware="trillium", strategy="single_node_tp"))
    assert err.value.rule == "restricted_hardware"
    assert str(err.value).endswith(f"trillium is a restricted profile the recipe does not list in meta.hardware; the "
                                   f"recipes of {root} that list it: acme/Tiny-Dense.")
    dense = compile_recipe(load_recipe(str(root / "models" / "acme" / "Tiny-Dense.yaml")),
                           Choice(hardware="trillium", strategy="single_node_tp"))
    assert dense["choice"]["hardware"] == "trillium"


def test_the_seed_on_tpu_nodes_is_refused_saying_no_recipe_of_its_tree_lists_them(tmp_path):
    with pytest.raises(LanekitError, match=r"trillium is a restricted profile the recipe does not list in meta.hardware, "
                                           r"and no recipe of .*recipes lists it\.$"):
        plan_on("tpu-v6e", str(tmp_path), {"strategy": "single_node_tp"}, recipe=SEED)


def test_the_upstream_refusal_names_the_upstream_recipes_that_list_the_profile():
    corpus = shared_corpus()
    if corpus is None:
        pytest.skip("the shared recipe corpus (../shared/recipes) is not beside this checkout")
    src = load_recipe(os.path.join(corpus, "upstream", "models", "Qwen", "Qwen3-235B-A22B-Instruct-2507.yaml"))
    with pytest.raises(RecipeRefusal, match=r"the recipes of .* that list it: meta-llama/Llama-3\.1-8B-Instruct\.$"):
        compile_recipe(src, Choice(hardware="xeon6", strategy="single_node_tp"))


def test_the_example_inventories_name_their_hardware_and_its_nodes_architecture():
    for name, (hardware, _repository, _recipe) in INVENTORIES.items():
        head = inventory_hosts(name)[0]["vars"]
        assert head["lanekit_hardware"] == hardware and head["lanekit_gpus_per_node"] == PROFILES[hardware]["gpus_per_node"]
        assert head["lanekit_node_arch"] == node_arch(hardware)


# -- lint on the new kinds: what each kind's ranks need, and what replaces the GPU memory rules ------------------

@pytest.mark.parametrize("name, devices, missing", [
    ("arc-b60", [], "lanekit_rank_devices lacks /dev/dri: Intel XPU ranks"),
    ("ascend", ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"],
     "lanekit_rank_devices lacks a /dev/davinci<N> per accelerator: Ascend ranks"),
    ("ascend", ["/dev/davinci0"], "lanekit_rank_devices lacks /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc"),
    ("tpu-v6e", ["/dev/infiniband"], "lanekit_rank_devices lacks /dev/vfio or /dev/accel: TPU ranks"),
])
def test_ranks_without_their_kinds_devices_are_refused(name, devices, missing, tmp_path):
    _compiled, plan, findings = plan_on(name, str(tmp_path), {}, extra_vars={"lanekit_rank_devices": devices},
                                        recipe=DENSE, recipe_root=TREE)
    messages = [e["message"] for e in findings["errors"] if e["id"] == "rank-gpu-access"]
    assert plan is None and len(messages) == 1 and messages[0].startswith(missing), messages


def test_a_v4_style_tpu_node_may_pass_its_accel_devices_instead(tmp_path):
    _compiled, plan, findings = plan_on("tpu-v6e", str(tmp_path), {}, recipe=DENSE, recipe_root=TREE,
                                        extra_vars={"lanekit_rank_devices": ["/dev/accel0", "/dev/accel1"]})
    assert findings["errors"] == [] and plan["ranks"][0]["devices"] == ["/dev/accel0", "/dev/accel1"]


def test_an_nvidia_request_on_tpu_nodes_is_refused(tmp_path):
    _compiled, plan, findings = plan_on("tpu-v6e", str(tmp_path), {}, recipe=DENSE, recipe_root=TREE,
                                        extra_vars={"lanekit_rank_gpus": "all"})
    assert plan is None and [e["id"] for e in findings["errors"]] == ["rank-gpu-access"]
    assert findings["errors"][0]["message"].startswith(
        "lanekit_rank_gpus is 'all' on Google Cloud TPU v6e (Trillium): that asks docker for NVIDIA GPUs (--gpus, an "
        "nvidia device request), which TPU nodes cannot grant.")


def test_on_tpu_the_maximum_model_length_bounds_what_xla_compiles_and_no_cuda_graph_rule_applies(tmp_path):
    compiled, _plan, findings = plan_on("tpu-v6e", str(tmp_path), {}, recipe=DENSE, recipe_root=TREE)
    assert "tpu-max-model-len" not in [w["id"] for w in findings["warnings"]]  # the recipe sets --max-model-len
    # The command line drops it and asks for CUDA-graph sizes, which a GPU lane would be warned about.
    graphs = {"serve": {"args": {"--cuda-graph-sizes": [1, 2, 4], "--max-model-len": None}}}
    hosts = [dict(h, layers=[("lane_cli_overrides (-e)", graphs)]) for h in inventory_hosts("tpu-v6e")]
    _plan, findings = plan_lane(compiled["lanes_dir"], compiled["images_dir"], compiled["lane"], hosts, [], "plan")
    warned = {w["id"]: w["message"] for w in findings["warnings"]}
    assert "cuda-graph-sizes" not in warned and warned["tpu-max-model-len"].startswith(
        "--max-model-len is not set on Google Cloud TPU v6e (Trillium): vLLM TPU then compiles its shapes up to")


def test_auto_thread_binding_serves_as_many_workers_as_the_xeon_profiles_numa_nodes(tmp_path):
    # Llama-3.1-8B's TP2 on one Xeon 6 node: two workers, four NUMA nodes (ESTIMATE), no binding needed...
    _compiled, plan, findings = plan_on("xeon6", str(tmp_path), {}, recipe=DENSE, recipe_root=TREE)
    assert findings["errors"] == [] and plan["topology"]["gpus_per_node"] == 2
    # ...but the same two workers on cpu_x86 (NUMA nodes unknown) must be bound explicitly.
    from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _lint
    ctx = _lint.LintContext(lane=dict(_lane_of(plan, tmp_path), hardware="cpu_x86"), profile=PROFILES["cpu_x86"],
                            image=None, hosts=["xeon6-01"], node_ranks={}, purpose="plan", rank_container={}, host_env={})
    assert [e["id"] for e in _lint.run(ctx)["errors"]] == ["cpu-threads-bind"]


def _lane_of(plan, tmp_path):
    from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._load import load_lane
    return dict(load_lane(str(tmp_path / plan["lane"]), plan["lane"]))
