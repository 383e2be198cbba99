"""The image_method filter: the image role's registered reports and variables as Ansible gives them."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.lanekit.serving.plugins.filter.image_method import FilterModule

image_method = FilterModule().filters()["image_method"]
REPORTS = {"n1": {"current": True, "held_layers": 2}, "n2": {"current": False, "held_layers": 0},
           "n3": {"current": False, "held_layers": 0}}


def test_sizes_and_forks_may_arrive_as_text():
    choice = image_method(REPORTS, ["100", "50"], "16")
    assert choice["method"] == "relay" and choice["needing"] == 2 and choice["image_bytes"] == 150
    assert image_method(REPORTS, [100, 50], 16, "stream")["method"] == "stream"


@pytest.mark.parametrize(("reports", "sizes", "forks", "requested", "words"), [
    (["n1"], [1], 16, "auto", "needs a mapping of node name to its image_info report"),
    (REPORTS, ["many"], 16, "auto", "layer sizes as whole numbers and forks as a number"),
    (REPORTS, [1], None, "auto", "layer sizes as whole numbers and forks as a number"),
    (REPORTS, [1], 16, "chain", "image_method is 'chain'"),
])
def test_bad_input_is_a_filter_error_with_a_sentence(reports, sizes, forks, requested, words):
    with pytest.raises(AnsibleFilterError, match=words):
        image_method(reports, sizes, forks, requested)
