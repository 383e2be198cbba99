"""The recipe taxonomy's hardware (module_utils/_lane/_hardware_taxonomy.py, _hardware_kinds.py): every id has a profile
whose per-node figures are the taxonomy's, each kind's rank container is what its vendor's docs say, and the Xeon
profiles share the real-engine lane's CPU backend instead of a second copy (issue 27)."""
from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.module_utils._lane import _hardware_kinds
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import (
    PROFILES,
    rank_container,
    requires_gpu,
)
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware_taxonomy import TAXONOMY_PROFILES
from tests.unit.helpers.recipes import TREE, shared_corpus


def _taxonomy(root):
    with open(os.path.join(root, "taxonomy.yaml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["hardware_profiles"]


def test_every_hardware_id_of_the_collections_taxonomy_has_a_profile():
    assert set(_taxonomy(TREE)) <= set(PROFILES)


def test_every_hardware_id_of_the_upstream_taxonomy_has_a_profile():
    corpus = shared_corpus()
    if corpus is None:
        pytest.skip("the shared recipe corpus (../shared/recipes) is not beside this checkout")
    assert set(_taxonomy(os.path.join(corpus, "upstream"))) <= set(PROFILES)


@pytest.mark.parametrize("hardware", sorted(TAXONOMY_PROFILES))
def test_a_profile_has_the_taxonomys_devices_per_node_and_memory(hardware):
    # The data-centre profiles predate these and keep their datasheet figures (b300: 288 GB; the taxonomy, 268).
    entry, profile = _taxonomy(TREE)[hardware], PROFILES[hardware]
    assert profile["gpus_per_node"] == entry["gpu_count"]
    if requires_gpu(profile):
        per_device_gb = entry["vram_gb"] / entry["gpu_count"]
        # The vendor's figure; the taxonomy's may round (within 4%).
        assert abs(profile["device_memory_gib"] / _hardware_kinds.GIB_PER_GB - per_device_gb) <= 0.04 * per_device_gb
        assert profile["admission_free_gib"] < profile["device_memory_gib"]


def test_the_xeon_profiles_share_the_real_engine_lanes_cpu_backend():
    cpu = PROFILES["cpu_x86"]
    for hardware in ("xeon6", "xeon5"):
        profile = PROFILES[hardware]
        assert profile["cpu_backend"]["vllm"] is cpu["cpu_backend"]["vllm"] is _hardware_kinds.VLLM_CPU_BACKEND
        same = {k for k in cpu if cpu[k] == profile.get(k)}
        # What differs is only what makes them Xeon nodes: the name, four workers, the NUMA nodes, the recognition.
        assert set(cpu) - same == {"display_name", "gpus_per_node", "source"}
        assert set(profile) - set(cpu) == {"recognition", "numa_nodes"}


@pytest.mark.parametrize("hardware, devices, mounts, visible", [
    ("trillium", ["/dev/vfio"], [], "TPU_VISIBLE_CHIPS"),
    ("arc_pro_b70", ["/dev/dri"], ["/dev/dri/by-path:/dev/dri/by-path:ro"], "ZE_AFFINITY_MASK"),
    ("ascend_950pr", ["/dev/davinci0", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"],
     _hardware_kinds.ASCEND_RANK_CONTAINER["mounts"], "ASCEND_RT_VISIBLE_DEVICES"),
    ("rtx_pro_6000", [], [], "CUDA_VISIBLE_DEVICES"),
])
def test_each_kind_reaches_its_accelerators_as_its_docs_say(hardware, devices, mounts, visible):
    access = rank_container(PROFILES[hardware], {})
    assert access["devices"] == devices and access["mounts"] == mounts
    assert access["gpus"] == ("all" if PROFILES[hardware]["vendor"] == "nvidia" else "")
    assert PROFILES[hardware]["visible_devices_env"] == visible
    assert rank_container(PROFILES[hardware], {"lanekit_rank_mounts": []})["mounts"] == []


def test_the_images_built_for_x86_only_fix_the_nodes_architecture():
    assert {h: PROFILES[h].get("arch") for h in ("trillium", "ironwood", "arc_pro_b60", "xeon6", "ascend_950pr")} == {
        "trillium": "amd64", "ironwood": "amd64", "arc_pro_b60": "amd64", "xeon6": "amd64", "ascend_950pr": None}
