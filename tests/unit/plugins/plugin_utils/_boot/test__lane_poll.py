# Copyright: lanekit developers
# Apache-2.0
"""The lane-wide actions' shared polling pieces (plugin_utils/_boot/_lane_poll.py): the API URL and the lane's members."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _lane_poll as poll
from tests.unit.helpers.lane_fakes import PLAN, TWO_NODES


def test_api_url():
    assert poll.api_url(PLAN) == "http://10.10.10.1:30000"
    assert poll.api_url(PLAN, "127.0.0.1") == "http://127.0.0.1:30000"
    assert poll.api_url({"api": {"address": "fd00::1", "port": 8000}}) == "http://[fd00::1]:8000"


def test_lane_members_come_from_the_plans_host_index():
    members = poll.lane_members(TWO_NODES, {"inventory_hostname": "spark-02",
                                            "ansible_play_batch": ["spark-01", "spark-02"]}, "lane_wait")
    assert members.hosts == ["spark-01", "spark-02"] and members.coordinator == "spark-01"
    assert [r["container_name"] for r in members.mine("spark-02")] == ["lk-r1"]
    assert members.rank_hosts == {0: "spark-01", 1: "spark-02"}


def test_a_node_missing_from_the_batch_is_refused_in_one_sentence():
    with pytest.raises(poll.LaneTaskError, match="spark-02 is not in this play's batch; drop --limit/serial"):
        poll.lane_members(TWO_NODES, {"inventory_hostname": "spark-01", "ansible_play_batch": ["spark-01"]},
                          "lane_wait")


def test_a_plan_without_the_host_index_is_refused_in_one_sentence():
    plan = {k: v for k, v in TWO_NODES.items() if k != "hosts"}
    with pytest.raises(poll.LaneTaskError, match=r"no per-host index \(plan.hosts\); re-plan"):
        poll.lane_members(plan, {"inventory_hostname": "spark-01"}, "lane_wait")


def test_the_status_module_gets_the_lane_key_as_its_own_argument():
    from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._lane_poll import LaneMembers, LaneWorker
    plan = {"lane": "l1", "engine": "sglang", "api": {"address": "10.0.0.1", "port": 8000, "served_model_name": "m"},
            "ranks": [{"node_rank": 0, "host": "a", "role": "head", "container_name": "c0", "health_port": 8000},
                      {"node_rank": 1, "host": "a", "role": "worker", "container_name": "c1", "health_port": 8000}]}
    members = LaneMembers("l1", "sglang", plan["ranks"], ["a"], "a")
    worker = LaneWorker(None, {"inventory_hostname": "a"}, plan, members, None, tail_lines=10)
    assert "api_key" not in worker.module_args()
    worker.secret_args = {"api_key": "sk-x", "secret_values": ["v1"]}
    margs = worker.module_args()
    assert margs["api_key"] == "sk-x" and margs["secret_values"] == ["v1"]
    assert "sk-x" not in str(margs["api_probe"])  # the probe spec is not a no_log argument
    assert worker.module_args(bundle_dir="/t/b")["api_key"] == "sk-x"


# A P/D lane: the router shares the prefill head's host and is the lane's API.
PD_PLAN = {
    "lane": "pd", "engine": "vllm", "api": {"host": "spark-01", "address": "10.0.0.1", "port": 8000,
                                            "served_model_name": "m"},
    "rendezvous_port": None, "hosts": {"spark-01": [0, 2], "spark-02": [1]},
    "ranks": [
        {"node_rank": 0, "host": "spark-01", "role": "prefill-head", "container_name": "pd-r0", "health_port": 8001},
        {"node_rank": 1, "host": "spark-02", "role": "decode-head", "container_name": "pd-r1", "health_port": 8002},
        {"node_rank": 2, "host": "spark-01", "role": "router", "container_name": "pd-r2", "health_port": 8000},
    ],
}


def test_a_pd_lane_probes_the_router_api_and_each_pool_heads_health():
    batch = {"ansible_play_batch": ["spark-01", "spark-02"]}
    members = poll.lane_members(PD_PLAN, dict(batch, inventory_hostname="spark-02"), "lane_wait")
    assert members.coordinator == "spark-01"
    worker = poll.LaneWorker(None, dict(batch, inventory_hostname="spark-01"), PD_PLAN, members, None, tail_lines=10)
    margs = worker.module_args()
    assert margs["containers"] == ["pd-r0", "pd-r2"] and margs["api_probe"]["url"] == "http://10.0.0.1:8000"
    assert margs["health_probes"] == [{"name": "pd-r0", "url": "http://127.0.0.1:8001/health"}]
    assert "listen_ports" not in margs
    decode = poll.LaneWorker(None, dict(batch, inventory_hostname="spark-02"), PD_PLAN, members, None, tail_lines=10)
    margs = decode.module_args()
    assert "api_probe" not in margs and margs["health_probes"] == [{"name": "pd-r1", "url": "http://127.0.0.1:8002/health"}]


def test_the_api_probe_names_the_container_that_must_hold_the_api_port():
    # Issue 38: the node sends the key only to a port this container holds.
    members = poll.LaneMembers("l1", "sglang", PLAN["ranks"], ["spark-01"], "spark-01")
    worker = poll.LaneWorker(None, {"inventory_hostname": "spark-01"}, PLAN, members, None, tail_lines=10)
    assert worker.module_args()["api_probe"]["container"] == "lk-r0"
    batch = {"ansible_play_batch": ["spark-01", "spark-02"], "inventory_hostname": "spark-01"}
    router = poll.LaneWorker(None, batch, PD_PLAN, poll.lane_members(PD_PLAN, batch, "lane_wait"), None, tail_lines=10)
    assert router.module_args()["api_probe"]["container"] == "pd-r2"
