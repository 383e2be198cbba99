"""Issue 25: the probe's containers come from the lane's own ranks (image, env, devices), argv lists only."""
from __future__ import annotations

import json

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES
from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric import _launch
from tests.unit.plugins.plugin_utils._fabric.helpers_plan import plan, rank

FLOOR = {"op": "all_gather", "gbps": 0.5}


def test_one_probe_per_node_from_the_ranks_own_container():
    spec = _launch.specs(plan(), sizes=None, iters=5, timeout_s=120, port=None, floor=FLOOR)
    assert spec["backend"] == "gloo" and spec["world"] == 2
    assert spec["master_addr"] == "10.0.0.1" and spec["master_port"] == 29502  # one above the lane's own
    assert spec["sizes"] == _launch.DEFAULT_SIZES["gloo"]
    node = spec["nodes"]["cpu-02"]
    container = node["container"]
    assert node["probe_rank"] == 1 and container["name"] == "lanekit-L-fabric"
    assert container["image"] == "lanekit/img:abc" and container["network_mode"] == "host"
    assert container["env"]["NCCL_SOCKET_IFNAME"] == "eth0" and container["env"]["PYTHONUNBUFFERED"] == "1"
    # the program differs, as an argv list: python3 -c <the probe's source> <arguments as JSON>
    assert container["entrypoint"] == ["python3"]
    assert container["command"][0] == "-c" and container["command"][1] == _launch.probe_source()
    args = json.loads(container["command"][2])
    assert args == {"rank": 1, "world": 2, "master_addr": "10.0.0.1", "master_port": 29502, "backend": "gloo",
                    "sizes": spec["sizes"], "iters": 5, "warmup": 2, "timeout_s": 120, "pairs": "auto",
                    "floor_gbps": 0.5, "floor_op": "all_gather"}
    # no weights, no secrets, no lane label (status and cluster_status count io.lanekit.lane containers)
    assert "mounts" not in container and "env_file" not in container
    assert container["labels"] == {"io.lanekit.fabric-probe": "L", "io.lanekit.fabric-rank": "1"}


def test_gpus_use_nccl_and_the_router_joins_no_collective():
    gpu = plan(hardware_profile={"gpu_name": "NVIDIA GB10"},
               ranks=[rank(0, "a", "10.0.0.1"), rank(1, "b", "10.0.0.2"), rank(2, "a", "10.0.0.1"),
                      rank(3, "c", "10.0.0.3", role="router")])
    spec = _launch.specs(gpu, sizes=[1024, 2048], iters=3, timeout_s=60, port=31000, floor=FLOOR)
    assert spec["backend"] == "nccl" and spec["master_port"] == 31000
    assert sorted(spec["nodes"]) == ["a", "b"] and spec["world"] == 2


def test_bad_settings_are_one_sentence():
    with pytest.raises(LanekitError, match="cannot measure a link"):
        _launch.specs(plan(), sizes=[2], iters=5, timeout_s=60, port=None, floor=FLOOR)
    with pytest.raises(LanekitError, match="has no fabric_ip"):
        _launch.specs(plan(ranks=[rank(0, "a", "")]), sizes=None, iters=5, timeout_s=60, port=None, floor=FLOOR)


def test_outputs_are_parsed_or_explained():
    line = _launch.MARK + json.dumps({"status": "ok", "rank": 7, "timings": []})
    parsed = _launch.parse_output("cpu-01", 0, {"container": {"Output": "warning\n" + line + "\n"}})
    assert parsed["status"] == "ok" and parsed["rank"] == 0 and parsed["host"] == "cpu-01"
    missing = _launch.parse_output("cpu-02", 1, None)
    assert missing["status"] == "failed" and "did not report" in missing["reason"]
    no_python = _launch.parse_output("cpu-02", 1, {"failed": True, "msg": 'exec: "python3": executable file not found in $PATH'})
    assert no_python["status"] == "cannot_run" and "no python3" in no_python["reason"]
    silent = _launch.parse_output("cpu-02", 1, {"failed": True, "msg": "Segmentation fault"})
    assert silent["status"] == "failed" and "Segmentation fault" in silent["reason"]


def test_accelerators_with_their_own_collectives_measure_the_host_network_with_gloo():
    for name in ("trillium", "ironwood", "arc_pro_b60", "ascend_950pr", "xeon6", "cpu_x86"):
        assert _launch.backend({"hardware_profile": PROFILES[name]}) == "gloo", name
    for name in ("dgx_spark_gb10", "h100", "rtx_pro_6000", "mi300x"):
        assert _launch.backend({"hardware_profile": PROFILES[name]}) == "nccl", name
