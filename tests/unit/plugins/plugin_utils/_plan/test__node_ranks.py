"""_plan/_node_ranks.py: this node's ranks, from the plan's hosts index, in rank order."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._node_ranks import node_ranks

PLAN = {
    "ranks": [{"node_rank": 0, "host": "a", "container_name": "r0"},
              {"node_rank": 1, "host": "b", "container_name": "r1"},
              {"node_rank": 2, "host": "a", "container_name": "r2"}],
    "hosts": {"a": [0, 2], "b": [1]},
}


def test_a_host_gets_its_ranks_in_rank_order():
    assert [r["container_name"] for r in node_ranks(PLAN, "a")] == ["r0", "r2"]
    assert [r["container_name"] for r in node_ranks(PLAN, "b")] == ["r1"]


def test_a_host_outside_the_lane_and_an_empty_plan_get_none():
    assert node_ranks(PLAN, "c") == []
    assert node_ranks({}, "a") == []
    assert node_ranks(None, "a") == []


def test_a_plan_without_the_hosts_index_is_read_by_each_ranks_host():
    plan = {"ranks": PLAN["ranks"]}
    assert [r["container_name"] for r in node_ranks(plan, "a")] == ["r0", "r2"]


def test_the_answer_is_a_copy_the_caller_may_change():
    node_ranks(PLAN, "a")[0]["container_name"] = "changed"
    assert PLAN["ranks"][0]["container_name"] == "r0"


@pytest.mark.parametrize(("plan", "words"), [
    ("not a plan", "node_ranks needs the lane's plan"),
    ({"ranks": PLAN["ranks"], "hosts": [0, 1]}, "hosts index must map each host"),
    ({"ranks": PLAN["ranks"], "hosts": {"a": [5]}}, "names rank 5 for a, but the plan has 3 ranks; plan the lane again"),
    ({"ranks": PLAN["ranks"], "hosts": {"a": ["0"]}}, "names rank '0' for a"),
])
def test_a_broken_plan_is_refused_with_a_sentence(plan, words):
    with pytest.raises(LanekitError, match=words.replace("(", r"\(").replace(")", r"\)")):
        node_ranks(plan, "a")
