"""The filters phases_settled and phase_skip: the plugin_utils answers through Jinja (issue 28)."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.lanekit.serving.plugins.filter.phase_skip import FilterModule as SkipFilters
from ansible_collections.lanekit.serving.plugins.filter.phases_settled import FilterModule as SettledFilters

phase_skip = SkipFilters().filters()["phase_skip"]
phases_settled = SettledFilters().filters()["phases_settled"]

SETTLED = {"pending_phases": {"image": [], "weights": [], "ranks": [], "ready": []}}


def test_settled_reads_every_nodes_probe_and_a_skipped_probe_task_settles_nothing():
    stopped = {"pending_phases": {"image": [], "weights": [], "ranks": ["rank 3 is exited"], "ready": []}}
    assert phases_settled([SETTLED, stopped]) == ["image", "weights", "ready"]
    # What hostvars holds for a host whose probe task did not run or failed.
    assert phases_settled([SETTLED, {"skipped": True}]) == []
    assert phases_settled([SETTLED, "AnsibleUndefined"]) == []


def test_settled_refuses_what_is_not_a_list():
    with pytest.raises(AnsibleFilterError, match="needs a list of the nodes' lane_probe results"):
        phases_settled({"a": SETTLED})


def test_skip_takes_the_phase_the_settled_list_the_plan_and_the_settings():
    plan = {"weights": {"path": "/w/.revisions/" + "a" * 40, "revision": "a" * 40}}
    assert phase_skip("weights", ["weights"], plan, {"weights_verify": "quick"})["skip"]
    assert not phase_skip("weights", ["weights"], plan, {"weights_verify": "full"})["skip"]
    assert phase_skip("image", None, None, None) == {"skip": False, "why": ""}
    with pytest.raises(AnsibleFilterError, match="lanekit_phases_settled"):
        phase_skip("image", "image")
