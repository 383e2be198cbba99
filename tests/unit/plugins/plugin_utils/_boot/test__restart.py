"""_boot/_restart.py: the ranks role's whole-lane restart decision, one case per situation."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._restart import lane_restart


def node(changed=(), missing_image=(), running=(), existing=()):
    return {"changed": list(changed), "missing_image": list(missing_image), "running": list(running),
            "existing": list(existing)}


# A two-node lane, ranks 0 and 1 on the first node, 2 on the second, all running.
SERVING = [node(running=[0, 1], existing=[0, 1]), node(running=[2], existing=[2])]


def test_nothing_changed_restarts_nothing():
    decision = lane_restart(SERVING)
    assert decision == {"changed": [], "restart": [], "teardown": False, "stop": False, "archive": False,
                        "message": "no rank changes."}


def test_one_changed_rank_restarts_the_running_others_after_stopping_and_archiving_the_lane():
    decision = lane_restart([node(running=[0, 1], existing=[0, 1]), node(changed=[2], running=[2], existing=[2])])
    assert decision["changed"] == [2]
    assert decision["restart"] == [0, 1]
    assert decision["teardown"] and decision["stop"] and decision["archive"]
    assert decision["message"] == "ranks 2 change; running ranks 0, 1 restart with them."


def test_a_changed_image_changes_every_rank_whose_image_is_not_on_its_node_yet():
    # The plan names a new image: no node holds it, so no rank can be previewed; each one changes.
    decision = lane_restart([node(missing_image=[0, 1], running=[0, 1], existing=[0, 1]),
                             node(missing_image=[2], running=[2], existing=[2])])
    assert decision["changed"] == [0, 1, 2]
    assert decision["restart"] == []
    assert decision["teardown"] and decision["stop"]
    assert decision["message"] == "ranks 0, 1, 2 change."


def test_a_first_deploy_starts_every_rank_without_a_teardown():
    decision = lane_restart([node(changed=[0, 1]), node(changed=[2])])
    assert decision["changed"] == [0, 1, 2]
    assert decision["restart"] == []
    assert not decision["teardown"] and not decision["stop"] and not decision["archive"]


def test_a_stopped_lane_that_changes_is_archived_but_restarts_no_one():
    decision = lane_restart([node(changed=[0], existing=[0, 1]), node(existing=[2])])
    assert decision["restart"] == []
    assert decision["teardown"]
    assert decision["message"] == "ranks 0 change."


def test_without_the_lane_restart_only_the_changed_ranks_restart_and_the_logs_are_still_archived():
    decision = lane_restart([node(changed=[1], running=[0, 1], existing=[0, 1])], restart_lane_on_change=False)
    assert decision["restart"] == []
    assert decision["teardown"] and decision["archive"] and not decision["stop"]
    assert decision["message"] == "ranks 1 change."


def test_neither_restart_nor_archive_means_no_teardown():
    decision = lane_restart([node(changed=[1], running=[0, 1], existing=[0, 1])],
                            restart_lane_on_change=False, archive_on_change=False)
    assert not decision["teardown"]


def test_a_rank_reported_twice_and_hosts_without_a_report_count_once():
    decision = lane_restart([node(changed=[1], missing_image=[1], running=[0], existing=[0, 1]), None])
    assert decision["changed"] == [1]
    assert decision["message"] == "ranks 1 change; running ranks 0 restart with them."


@pytest.mark.parametrize(("reports", "words"), [
    (["node"], "each node's report must be a mapping"),
    ([{"changed": "1"}], "a node's changed must be a list of rank numbers"),
    ([{"running": [True]}], "a node's running must be a list of rank numbers"),
])
def test_a_malformed_report_is_refused_with_a_sentence(reports, words):
    with pytest.raises(LanekitError, match=words):
        lane_restart(reports)
