"""The per-rank plan: golden argv of both report lanes for ranks 0 and 7, and plan invariants."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

from tests.unit.helpers.plans import REPO, SGLANG, VLLM, plan

GOLDEN = os.path.join(REPO, "tests", "fixtures", "golden")


def ranks(lane, **kw):
    result, findings = plan(lane, **kw)
    assert findings["errors"] == [], findings["errors"]
    return result, result["ranks"]


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
@pytest.mark.parametrize("rank", [0, 7])
def test_golden_docker_argv(lane, rank):
    _plan, specs = ranks(lane)
    path = os.path.join(GOLDEN, f"{lane}-r{rank}.json")
    if os.environ.get("LANEKIT_UPDATE_GOLDEN"):
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(specs[rank]["docker_argv"], handle, indent=1)
            handle.write("\n")
    with open(path, encoding="utf-8") as handle:
        assert specs[rank]["docker_argv"] == json.load(handle)


def test_vllm_multinode_mechanics():
    result, specs = ranks(VLLM)
    head, worker = specs[0], specs[7]
    assert head["entrypoint"] == ["vllm"] and head["command"][0] == "serve"
    assert head["command"][1] == "/mnt/nfs/models/mistralai/Mistral-Large-4-1T-A52B-NVFP4"
    for spec in specs:
        cmd = spec["command"]
        assert cmd[cmd.index("--node-rank") + 1] == str(spec["node_rank"])
        assert cmd[cmd.index("--master-addr") + 1] == "10.100.0.11"
        assert cmd[cmd.index("--nnodes") + 1] == "8"
        assert spec["env"]["HF_HUB_OFFLINE"] == "1"
        assert "--rm" not in spec["docker_argv"]
    assert "--headless" not in head["command"] and "--headless" in worker["command"]
    assert "--port" in head["command"] and "--port" not in worker["command"]
    assert worker["env"]["VLLM_HOST_IP"] == "10.100.0.18"
    assert worker["env"]["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    assert worker["env"]["VLLM_ENGINE_READY_TIMEOUT_S"] == "6000"  # the recipe value, not the budget
    assert worker["mounts"] == [{"source": "/mnt/nfs/models", "target": "/mnt/nfs/models", "read_only": True}]
    assert "--cuda-graph-sizes" not in worker["command"]
    spec_config = worker["command"][worker["command"].index("--speculative-config") + 1]
    assert json.loads(spec_config) == {"method": "dspark", "num_speculative_tokens": 3}
    assert result["api"] == {"host": "spark-01", "address": "10.100.0.11", "port": 8000,
                             "served_model_name": "mistral-large-4"}


def test_sglang_multinode_mechanics():
    _result, specs = ranks(SGLANG)
    for spec in specs:
        cmd = spec["command"]
        assert spec["entrypoint"] == ["/opt/nvidia/nvidia_entrypoint.sh"] and cmd[:2] == ["sglang", "serve"]
        assert cmd[cmd.index("--host") + 1] == "0.0.0.0"
        assert cmd[cmd.index("--dist-init-addr") + 1] == "10.100.0.11:25000"
        assert cmd[cmd.index("--node-rank") + 1] == str(spec["node_rank"])
        assert spec["env"]["SGLANG_UNBALANCED_LOAD_TIMEOUT_S"] == "7200"
        assert spec["env"]["SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK"] == "0"
        assert spec["health_port"] == 30000  # workers serve a health endpoint too


def test_boot_budget_fills_unset_timeouts():
    _result, specs = ranks(VLLM, overrides={"serve": {"env": {"VLLM_ENGINE_READY_TIMEOUT_S": None}}})
    assert specs[0]["env"]["VLLM_ENGINE_READY_TIMEOUT_S"] == "9000"
    cmd = specs[0]["command"]
    assert cmd[cmd.index("--distributed-timeout-seconds") + 1] == "9000"
    _result, specs = ranks(SGLANG)
    cmd = specs[3]["command"]
    assert cmd[cmd.index("--dist-timeout") + 1] == "9000"


def test_one_flag_changes_every_spec_hash_and_nothing_else_changes_them():
    base, specs = ranks(VLLM)
    again, specs_again = ranks(VLLM)
    assert [s["spec_hash"] for s in specs] == [s["spec_hash"] for s in specs_again]
    assert base["plan_hash"] == again["plan_hash"]
    changed, changed_specs = ranks(VLLM, overrides={"serve": {"args": {"--max-num-seqs": 64}}})
    assert all(a["spec_hash"] != b["spec_hash"] for a, b in zip(specs, changed_specs))
    assert changed["plan_hash"] != base["plan_hash"]


def test_host_override_changes_only_that_rank():
    _base, specs = ranks(VLLM)
    _other, other = ranks(VLLM, host_overrides={"spark-05": {"serve": {"env": {"NCCL_DEBUG": "INFO"}}}})
    changed = [s["host"] for s, t in zip(specs, other) if s["spec_hash"] != t["spec_hash"]]
    assert changed == ["spark-05"]


def test_host_override_of_lane_wide_key_is_refused():
    with pytest.raises(LanekitError, match="spark-03 change 'topology'"):
        plan(VLLM, host_overrides={"spark-03": {"topology": {"nodes": 4}}})


def test_plan_owned_flag_in_lane_is_refused():
    with pytest.raises(LanekitError, match=r"serve.args.--tensor-parallel-size.*topology.tensor_parallel"):
        plan(VLLM, overrides={"serve": {"args": {"--tensor-parallel-size": 4}}})


def test_missing_fabric_ip_names_the_host():
    from ansible_collections.lanekit.serving.plugins.module_utils._plan import plan_lane
    from tests.unit.helpers.plans import IMAGES, LANES, spark8_hosts
    hosts = spark8_hosts()
    del hosts[2]["vars"]["fabric_ip"]
    with pytest.raises(LanekitError, match="host spark-03 has no fabric_ip"):
        plan_lane(LANES, IMAGES, VLLM, hosts, None, "deploy")


def test_head_host_moves_rank_zero():
    _result, specs = ranks(VLLM, extra_vars={"lanekit_head_host": "spark-04"})
    assert specs[0]["host"] == "spark-04"
    assert specs[0]["command"][specs[0]["command"].index("--master-addr") + 1] == "10.100.0.14"
