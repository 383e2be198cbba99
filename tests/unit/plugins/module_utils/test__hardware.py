"""Hardware profiles (module_utils/_hardware.py): every profile has the facts the plan and lint read, and
every piece of hardware the seed recipe names has one."""
from __future__ import annotations

import json

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._hardware import PROFILES, rank_container, sm_major
from tests.unit.helpers.recipes import SEED

KEYS = ("display_name", "gpu_name", "vendor", "compute_capability", "gfx_arch", "gpus_per_node", "device_memory_gib",
        "admission_free_gib", "unified_memory", "env", "engine_env", "rank_container", "visible_devices_env", "source")


@pytest.mark.parametrize("hardware", sorted(PROFILES))
def test_every_profile_has_the_facts_the_plan_reads(hardware):
    profile = PROFILES[hardware]
    assert set(KEYS) <= set(profile)
    assert 0 < profile["admission_free_gib"] < profile["device_memory_gib"]
    assert (profile["compute_capability"] is None) == (profile["vendor"] == "amd") == (profile["gfx_arch"] is not None)


def test_the_seed_recipes_hardware_and_the_common_clusters_have_profiles():
    with open(SEED, encoding="utf-8") as handle:
        named = set(json.load(handle)["meta"]["hardware"])
    assert named | {"gb200", "b300", "h100", "mi300x", "mi325x"} <= set(PROFILES)


def test_amd_has_no_sm_and_its_ranks_get_rocm_devices_unless_the_inventory_says_otherwise():
    assert sm_major(PROFILES["mi355x"]) is None and sm_major(PROFILES["b200"]) == 10
    assert rank_container(PROFILES["mi300x"], {}) == {"gpus": "", "devices": ["/dev/kfd", "/dev/dri"],
                                                      "group_add": ["video"], "security_opt": []}
    assert rank_container(PROFILES["h100"], {"lanekit_rank_devices": ["/dev/infiniband"]})["devices"] == ["/dev/infiniband"]
