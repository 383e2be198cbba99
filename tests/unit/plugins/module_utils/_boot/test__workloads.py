# Copyright: lanekit developers
# Apache-2.0
"""What runs where: lanes by their labels, other GPU holders, unreachable nodes, one table."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _workloads as wl
from ansible_collections.lanekit.serving.plugins.modules import node_workloads as nw


def rank(lane, r, state="running", code=0, plan="feedface0123456789"):
    return {"Id": f"id-{lane}-{r}", "Name": f"/lanekit-{lane}-r{r}",
            "State": {"Status": state, "Running": state == "running", "ExitCode": code},
            "Config": {"Image": "lanekit/x:1",
                       "Labels": {"io.lanekit.lane": lane, "io.lanekit.rank": str(r), "io.lanekit.plan-hash": plan}},
            "HostConfig": {}}


def other(name, running=True, gpus=False):
    host = {"DeviceRequests": [{"Driver": "", "Count": -1, "Capabilities": [["gpu"]]}]} if gpus else {}
    return {"Id": f"id-{name}", "Name": f"/{name}", "State": {"Status": "running" if running else "exited",
                                                              "Running": running, "ExitCode": 0},
            "Config": {"Image": "busybox", "Labels": {}}, "HostConfig": host}


def test_lanes_are_found_by_their_labels_with_state_and_nodes():
    found = {
        "spark-01": {"containers": [rank("a", 0), rank("b", 0)]},
        "spark-02": {"containers": [rank("a", 1, "exited", 1)]},
    }
    lanes = wl.overview(found).lanes()
    assert lanes["a"]["hosts"] == ["spark-01", "spark-02"] and lanes["a"]["state"] == "partly running"
    assert lanes["a"]["summary"] == "1/2 ranks running" and lanes["a"]["ranks"]["1"]["state"] == "exited(1)"
    assert lanes["b"]["state"] == "running" and lanes["b"]["plan_hashes"] == ["feedface0123456789"]


def test_other_gpu_holders_and_unreachable_nodes_share_the_table():
    found = {
        "spark-01": {"containers": [rank("a", 0), other("trainer", gpus=True), other("old", running=False)],
                     "gpu_processes": [{"pid": 42, "name": "python", "used_memory_mib": 1024, "container": ""},
                                       {"pid": 43, "name": "vllm", "used_memory_mib": 9, "container": "lanekit-a-r0"}]},
        "spark-02": {"unreachable": True, "msg": "Failed to connect to the host"},
        "spark-03": {"containers": [], "gpu_query_error": "nvidia-smi not found"},
    }
    view = wl.overview(found)
    table = wl.render(view)
    assert table[0] == "lane a: running, 1/1 ranks running on spark-01 (plan feedface0123)"
    assert table[1].split() == ["node", "workload", "kind", "state", "detail"]
    body = [line.split(None, 4) for line in table[2:]]
    assert body[0][:4] == ["spark-01", "a", "r0", "lane"] or body[0][:3] == ["spark-01", "a r0", "lane"]
    text = "\n".join(table)
    assert "trainer" in text and "gpus=all" in text
    assert "old" not in text  # a stopped container without a GPU request holds nothing
    assert "pid 42 python" in text and "1024 MiB GPU memory" in text
    assert "pid 43" not in text  # a lane's own process is listed as its container
    assert "spark-02  -" in text and "unreachable" in text and "Failed to connect to the host" in text
    assert "nvidia-smi not found" in text
    assert view.to_dict()["unreachable"] == {"spark-02": "Failed to connect to the host"}


def test_a_cluster_without_lanes_says_so():
    assert wl.render(wl.overview({"spark-01": {"containers": []}}))[0] == "no lanekit lane found on the nodes"


def test_gpu_requests_runtime_and_visible_devices_count_as_holding_gpus():
    assert wl.wants_gpu({"HostConfig": {"DeviceRequests": [{"DeviceIDs": ["0"], "Capabilities": [["gpu"]]}]}}) == "gpus=0"
    assert wl.wants_gpu({"HostConfig": {"Runtime": "nvidia"}}) == "nvidia runtime"
    assert wl.wants_gpu({"Config": {"Env": ["NVIDIA_VISIBLE_DEVICES=all"]}}) == "NVIDIA_VISIBLE_DEVICES=all"
    assert wl.wants_gpu({"Config": {"Env": ["NVIDIA_VISIBLE_DEVICES=void"]}}) == ""


def test_the_node_module_reads_nvidia_smi_csv_and_keeps_no_secret_env():
    assert nw.parse_gpu_apps("123, python3, 2048\nbad line\n7, x, [N/A]\n") == [
        {"pid": 123, "name": "python3", "used_memory_mib": 2048}, {"pid": 7, "name": "x", "used_memory_mib": None}]
    kept = nw.subset({"Config": {"Env": ["HF_TOKEN=secret", "NVIDIA_VISIBLE_DEVICES=0"]}})
    assert kept["Config"]["Env"] == ["NVIDIA_VISIBLE_DEVICES=0"]


def test_only_a_running_rank_of_another_lane_is_in_the_way_of_a_lane():
    found = wl.classify("spark-01", {"containers": [rank("mine", 0), rank("other", 2), rank("other", 3),
                                                    rank("old", 1, "exited", 0)]})
    assert wl.other_lanes(found, "mine") == ["lane other (r2, r3 running)"]
    assert wl.other_lanes(found, "other") == ["lane mine (r0 running)"]
    # What a replacement (lanekit_replace) tears down: the names alone, each once.
    assert wl.other_lane_names(found, "mine") == ["other"]
    assert wl.other_lane_names(found, "other") == ["mine"]
