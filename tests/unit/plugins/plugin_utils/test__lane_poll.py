# Copyright: lanekit developers
# Apache-2.0
"""The lane-wide actions' shared polling pieces (plugin_utils/_lane_poll.py): the API URL and the lane's members."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils import _lane_poll as poll
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
