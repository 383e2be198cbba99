# Copyright: lanekit developers
# Apache-2.0
"""The words and tables of a boot: durations, rank ranges, the per-rank table, the memory note."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _report as report

# --- formatting ----------------------------------------------------------------------------


def test_formatting_helpers():
    assert report.fmt_ranks([1, 2, 4, 5, 7]) == "r1-2,4-5,7"
    assert report.fmt_ranks([3]) == "r3"
    assert report.fmt_duration(45) == "45s"
    assert report.fmt_duration(725) == "12m05s"
    assert report.fmt_duration(4800) == "1h20m"


def test_fmt_ranks_of_no_rank_is_empty():
    assert report.fmt_ranks([]) == ""
    assert report.fmt_ranks([2, 0, 1, 1]) == "r0-2"
