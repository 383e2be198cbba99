"""The node_ranks filter: the plugin_utils answer through Jinja, a refusal as a filter error."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.lanekit.serving.plugins.filter.node_ranks import FilterModule

node_ranks = FilterModule().filters()["node_ranks"]


def test_the_filter_gives_the_hosts_ranks():
    plan = {"ranks": [{"host": "a", "node_rank": 0}, {"host": "b", "node_rank": 1}], "hosts": {"a": [0], "b": [1]}}
    assert node_ranks(plan, "b") == [{"host": "b", "node_rank": 1}]


def test_a_broken_plan_is_a_filter_error_with_the_sentence():
    with pytest.raises(AnsibleFilterError, match="plan the lane again"):
        node_ranks({"ranks": [], "hosts": {"a": [3]}}, "a")
