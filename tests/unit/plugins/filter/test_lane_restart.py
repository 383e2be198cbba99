"""The lane_restart filter: role variables as given by Ansible (booleans or their text)."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.lanekit.serving.plugins.filter.lane_restart import FilterModule

lane_restart = FilterModule().filters()["lane_restart"]
REPORTS = [{"changed": [1], "running": [0, 1], "existing": [0, 1]}]


@pytest.mark.parametrize(("restart", "expected"), [(True, [0]), ("True", [0]), ("false", []), (False, [])])
def test_the_settings_are_read_as_booleans(restart, expected):
    assert lane_restart(REPORTS, restart, True)["restart"] == expected


@pytest.mark.parametrize(("reports", "restart", "words"), [
    ("not a list", True, "needs a list of the nodes' reports"),
    (REPORTS, "maybe", "restart_lane_on_change must be true or false"),
    ([{"changed": "1"}], True, "must be a list of rank numbers"),
])
def test_bad_input_is_a_filter_error_with_a_sentence(reports, restart, words):
    with pytest.raises(AnsibleFilterError, match=words):
        lane_restart(reports, restart)
