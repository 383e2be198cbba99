"""Issue 25: the floor per hardware profile, NVIDIA's for DGX Spark, estimates marked, the inventory's override."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES
from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric import _floor


def test_spark_uses_nvidias_own_figure():
    floor = _floor.choose("dgx_spark_gb10")
    assert floor == {"op": "all_gather", "gbps": 21.875, "estimated": False, "source": floor["source"]}
    assert "MIN_NCCL_TEST_BW = 21.875" in floor["source"]


def test_every_profile_has_a_floor_and_the_others_are_marked_estimates():
    assert set(_floor.FLOORS) == set(PROFILES)
    for name, floor in _floor.FLOORS.items():
        assert floor["gbps"] > 0 and floor["source"], name
        assert floor["estimated"] == (name != "dgx_spark_gb10"), name
    assert _floor.FLOORS["h100"]["gbps"] == 30.0 and _floor.FLOORS["gb300"]["gbps"] == 60.0


def test_the_inventory_overrides_the_profile():
    floor = _floor.choose("dgx_spark_gb10", 10)
    assert floor["gbps"] == 10.0 and floor["estimated"] is False and "lanekit_fabric_floor_gbps" in floor["source"]
    assert _floor.choose("cpu_x86", "0.05")["gbps"] == 0.05
    assert _floor.choose("cpu_x86", None)["gbps"] == 0.5
    assert _floor.choose("cpu_x86", "")["gbps"] == 0.5
    assert _floor.choose("unknown-hw")["gbps"] is None


@pytest.mark.parametrize("bad", [0, -1, "fast", True, [1]])
def test_a_bad_override_is_one_sentence(bad):
    with pytest.raises(LanekitError, match="lanekit_fabric_floor_gbps is .*expected a bus bandwidth in GB/s above 0"):
        _floor.choose("h100", bad)
