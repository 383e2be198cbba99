"""What the plan publishes for later phases: orders, per-host index, container options, ports, paths."""
from __future__ import annotations

import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils import _plan
from ansible_collections.lanekit.serving.plugins.module_utils._lane import load_lane

from tests.unit.helpers.plans import LANES, SGLANG, VLLM, plan


def _plan_of(lane=VLLM, **kw):
    result, findings = plan(lane, **kw)
    assert findings["errors"] == [], findings["errors"]
    return result


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
def test_start_and_stop_order_put_the_head_first(lane):
    result = _plan_of(lane)
    assert result["start_order"] == [[0], [1, 2, 3, 4, 5, 6, 7]]
    assert result["stop_order"] == [[0], [1, 2, 3, 4, 5, 6, 7]]


def test_hosts_index_follows_the_rank_order():
    result = _plan_of(VLLM, extra_vars={"lanekit_head_host": "spark-04"})
    assert result["hosts"]["spark-04"] == [0] and result["hosts"]["spark-01"] == [1]
    assert list(result["hosts"]) == [r["host"] for r in result["ranks"]]
    for host, node_ranks in result["hosts"].items():
        assert [result["ranks"][i]["host"] for i in node_ranks] == [host] * len(node_ranks)
    assert [r["node_rank"] for r in result["ranks"]] == list(range(8))


def test_rendezvous_port_and_barrier_timeout_are_published():
    vllm, sglang = _plan_of(VLLM), _plan_of(SGLANG)
    assert vllm["rendezvous_port"] == 29501 and sglang["rendezvous_port"] == 25000
    assert vllm["barrier_timeout_s"] is None
    assert sglang["barrier_timeout_s"] == 7200.0
    assert sglang["ranks"][3]["env"]["SGLANG_UNBALANCED_LOAD_TIMEOUT_S"] == "7200"


def test_single_node_lane_has_no_rendezvous_port():
    # The seed lanes are multi-node: render the vLLM lane on one host directly (render does not lint).
    image = {k: None for k in ("name", "base_ref", "base_digest", "arch", "platform", "pinned", "pin_problem",
                               "spec_dir", "patches", "labels", "repository", "tag")}
    image.update({"ref": "img", "content_hash": "c", "entrypoint": ["vllm"]})
    one = _plan.render(load_lane(LANES, VLLM), {"env": {}}, image, [{"name": "solo", "fabric_ip": "10.0.0.1"}],
                       {"weights_root": "/w"}, None, "/r")
    assert one["rendezvous_port"] is None
    assert one["hosts"] == {"solo": [0]} and one["start_order"] == [[0]]
    assert one["reports_dir"] == f"/r/{VLLM}"
    assert "--nnodes" not in one["ranks"][0]["command"]


def test_container_block_is_docker_container_options():
    rank = _plan_of(VLLM)["ranks"][7]
    c = rank["container"]
    assert c["name"] == rank["container_name"] and c["image"] == rank["image"]
    assert c["entrypoint"] == rank["entrypoint"] and c["command"] == rank["command"]
    assert c["env"] == rank["env"] and c["labels"] == rank["labels"]
    assert c["mounts"] == [{"type": "bind", "source": "/mnt/nfs/models", "target": "/mnt/nfs/models",
                            "read_only": True}]
    assert c["ulimits"] == ["memlock:-1:-1", "stack:67108864"]
    assert c["capabilities"] == ["IPC_LOCK"] and c["devices"] == ["/dev/infiniband"]
    assert c["shm_size"] == "32g"
    assert c["device_requests"] == [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
    assert (c["network_mode"], c["ipc_mode"]) == ("host", "host")


@pytest.mark.parametrize("gpus, expected", [
    ("all", [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]),
    ("2", [{"driver": "nvidia", "count": 2, "capabilities": [["gpu"]]}]),
    ("0,1", [{"driver": "nvidia", "device_ids": ["0", "1"], "capabilities": [["gpu"]]}]),
    ("device=GPU-3f", [{"driver": "nvidia", "device_ids": ["GPU-3f"], "capabilities": [["gpu"]]}]),
    ("", []),
    (None, []),
])
def test_gpus_become_device_requests(gpus, expected):
    assert _plan.device_requests(gpus) == expected


def test_empty_gpus_and_shm_size_are_left_out_of_the_container_block():
    rank = _plan_of(VLLM, extra_vars={"lanekit_rank_gpus": "", "lanekit_rank_shm_size": ""})["ranks"][0]
    assert "device_requests" not in rank["container"] and "shm_size" not in rank["container"]
    assert "--gpus" not in rank["docker_argv"]


def test_ulimits_take_the_modules_form():
    assert _plan.module_ulimit("nofile=1048576:1048576") == "nofile:1048576:1048576"
    assert _plan.module_ulimit("memlock=-1") == "memlock:-1"
    assert _plan.module_ulimit("core:0") == "core:0"  # already in the module's form


# --- where the controller reads and writes ------------------------------------------------

def test_reports_root_prefers_the_variable(tmp_path):
    assert _plan.reports_root("/r", "/repo/playbooks", str(tmp_path)) == "/r"
    assert _plan.reports_root("rel", "/repo/playbooks", str(tmp_path)) == str(tmp_path / "rel")


def test_reports_root_sits_beside_a_checkouts_playbooks(tmp_path):
    assert _plan.reports_root(None, "/repo/playbooks", str(tmp_path)) == "/repo/reports"
    assert _plan.reports_root("", "/site", str(tmp_path)) == "/site/reports"


def test_reports_root_of_an_installed_collection_is_the_working_directory(tmp_path):
    installed = "/home/u/.ansible/collections/ansible_collections/lanekit/serving/playbooks"
    assert _plan.reports_root(None, installed, str(tmp_path)) == str(tmp_path / "reports")
    assert _plan.reports_root(None, None, str(tmp_path)) == str(tmp_path / "reports")


def test_plan_reports_dir_is_the_lanes_folder_under_the_root():
    result, _findings = plan(VLLM, reports_root="/srv/reports")
    assert result["reports_dir"] == f"/srv/reports/{VLLM}"


def test_lanes_and_images_are_found_argument_variable_working_directory_collection(tmp_path):
    collection = str(tmp_path / "collection")
    cwd = tmp_path / "team"
    cwd.mkdir()
    find = _plan.find_spec_dir
    assert find("lanes", "/explicit", "/configured", str(cwd), collection) == "/explicit"
    assert find("lanes", None, "/configured", str(cwd), collection) == "/configured"
    assert find("lanes", "", "", str(cwd), collection) == os.path.join(collection, "lanes")
    (cwd / "lanes").mkdir()
    assert find("lanes", None, None, str(cwd), collection) == str(cwd / "lanes")
    assert find("images", None, None, str(cwd), collection) == os.path.join(collection, "images")
