"""Hardware profiles (module_utils/_lane/_hardware.py): every profile has the facts the plan and lint read, and
every piece of hardware the seed recipe names has one."""
from __future__ import annotations

import json

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import (
    PROFILES,
    cpu_backend,
    host_env,
    kv_in_device_memory,
    node_mismatch,
    rank_container,
    requires_gpu,
    sm_major,
)
from tests.unit.helpers.recipes import SEED

KEYS = ("display_name", "gpu_name", "vendor", "compute_capability", "gfx_arch", "gpus_per_node", "device_memory_gib",
        "admission_free_gib", "unified_memory", "env", "engine_env", "rank_container", "visible_devices_env", "source")


@pytest.mark.parametrize("hardware", sorted(PROFILES))
def test_every_profile_has_the_facts_the_plan_reads(hardware):
    profile = PROFILES[hardware]
    assert set(KEYS) <= set(profile)
    if not requires_gpu(profile):  # CPU nodes: no GPU facts at all, and a CPU backend instead
        assert [profile[k] for k in ("gpu_name", "compute_capability", "gfx_arch", "device_memory_gib",
                                     "admission_free_gib", "visible_devices_env")] == [None] * 6
        assert profile["rank_container"]["gpus"] == "" and profile["rank_container"]["devices"] == []
        assert not kv_in_device_memory(profile) and profile.get("cpu_backend")
        return
    assert 0 < profile["admission_free_gib"] < profile["device_memory_gib"] and kv_in_device_memory(profile)
    # A CUDA compute capability on NVIDIA only, a gfx target on AMD only.
    assert (profile["compute_capability"] is not None) == (profile["vendor"] == "nvidia")
    assert (profile["gfx_arch"] is not None) == (profile["vendor"] == "amd")


def test_the_seed_recipes_hardware_and_the_common_clusters_have_profiles():
    with open(SEED, encoding="utf-8") as handle:
        named = set(json.load(handle)["meta"]["hardware"])
    assert named | {"gb200", "b300", "h100", "mi300x", "mi325x"} <= set(PROFILES)


def test_amd_has_no_sm_and_its_ranks_get_rocm_devices_unless_the_inventory_says_otherwise():
    assert sm_major(PROFILES["mi355x"]) is None and sm_major(PROFILES["b200"]) == 10
    assert rank_container(PROFILES["mi300x"], {}) == {"gpus": "", "devices": ["/dev/kfd", "/dev/dri"],
                                                      "group_add": ["video"], "security_opt": [], "mounts": []}
    assert rank_container(PROFILES["h100"], {"lanekit_rank_devices": ["/dev/infiniband"]})["devices"] == ["/dev/infiniband"]


def test_cpu_nodes_have_no_gpu_one_worker_and_vllms_cpu_backend():
    cpu = PROFILES["cpu_x86"]
    assert (cpu["vendor"], cpu["arch"], cpu["gpus_per_node"], sm_major(cpu)) == ("cpu", "amd64", 1, None)
    assert rank_container(cpu, {}) == {"gpus": "", "devices": [], "group_add": [], "security_opt": [], "mounts": []}
    assert cpu_backend(cpu, "vllm")["kv_space_env"] == "VLLM_CPU_KVCACHE_SPACE"
    assert cpu_backend(cpu, "sglang") is None and cpu_backend(PROFILES["h100"], "vllm") is None


def test_a_hosts_thread_binding_comes_from_its_own_variable():
    cpu = PROFILES["cpu_x86"]
    assert host_env(cpu, "vllm", "cpu-01", {"lanekit_cpu_threads_bind": 0}) == {"VLLM_CPU_OMP_THREADS_BIND": "0"}
    assert host_env(cpu, "vllm", "cpu-01", {"lanekit_cpu_threads_bind": ""}) == {}
    assert host_env(PROFILES["dgx_spark_gb10"], "vllm", "spark-01", {"lanekit_cpu_threads_bind": "0"}) == {}
    with pytest.raises(LanekitError, match=r"^host cpu-01: lanekit_cpu_threads_bind is True; expected text"):
        host_env(cpu, "vllm", "cpu-01", {"lanekit_cpu_threads_bind": True})


DOCKER = {"server_version": "28.2.2"}
GB10 = {"name": "NVIDIA GB10", "compute_capability": "12.1", "memory_total_mib": 122570, "count": 1}
NO_GPU = {"name": "", "compute_capability": "", "memory_total_mib": None, "count": 0, "error": "nvidia-smi not found"}


def published(hardware):
    """The profile as the plan publishes it (hardware_profile)."""
    profile = PROFILES[hardware]
    return {k: profile.get(k) for k in ("display_name", "gpu_name", "compute_capability", "gfx_arch", "vendor")}


def test_a_gpu_node_matches_its_profile_and_a_mismatch_is_one_sentence():
    assert node_mismatch(published("dgx_spark_gb10"), GB10, "arm64", DOCKER, "arm64") == ""
    assert node_mismatch(published("dgx_spark_gb10"), NO_GPU, "arm64", DOCKER, "arm64") == (
        "it reports GPU '' (compute capability ), architecture arm64 and docker '28.2.2'; the lane needs NVIDIA GB10 "
        "(12.1), arm64 (lanekit_node_arch) and a running docker daemon. Fix the node or the inventory.")
    mi355x = {"name": "AMD Instinct MI355X", "compute_capability": "gfx950", "count": 8}
    assert node_mismatch(published("mi355x"), mi355x, "amd64", DOCKER, "amd64") == ""


def test_a_cpu_node_needs_no_gpu_only_its_architecture_and_docker():
    cpu = published("cpu_x86")
    assert node_mismatch(cpu, NO_GPU, "amd64", DOCKER, "amd64") == ""
    assert node_mismatch(cpu, GB10, "amd64", DOCKER, "amd64") == ""  # a GPU on the node is not in the way
    assert node_mismatch(cpu, NO_GPU, "arm64", {"server_version": "", "error": "Cannot connect to the Docker daemon"},
                         "amd64") == (
        "it reports architecture arm64 and docker ''; the lane needs amd64 (lanekit_node_arch) and a running docker "
        "daemon (Cannot connect to the Docker daemon) (its hardware profile, x86-64 CPU node (vLLM CPU backend), "
        "needs no GPU). Fix the node or the inventory.")
