# Copyright: lanekit developers
# Apache-2.0
"""How far a boot got and how long it still takes (plugin_utils/_boot/_estimate.py)."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _estimate as estimate
from tests.unit.helpers.ranklogs import lines_until, make_status
from tests.unit.plugins.plugin_utils._boot.test__tracker import cfg, vllm_loading


def test_joined_is_unknown_when_ranks_share_an_address():
    statuses = {r: make_status(r, lines_until("vllm-worker.log", "headless")) for r in range(2)}
    for status in statuses.values():
        status.fabric_ip = "127.0.0.1"
    statuses[0].probes = {"rendezvous": {"port": 29501, "peers": ["127.0.0.1"]}}
    assert estimate.joined(statuses) is None


def test_the_load_bar_gives_the_eta_and_the_plan_gives_the_warm_up():
    # 48 shards left at 1.6 shards/min = 30 min, plus the planned 10 min of warm-up
    left, how = estimate.eta(cfg(), vllm_loading())
    assert left == pytest.approx(48 * 37.5 - 5 + 600, abs=2)
    assert how == "load 29m55s at 1.6 shards/min + warm-up 10m00s planned"


def test_before_loading_the_plan_less_the_time_spent_is_the_eta():
    statuses = {r: make_status(r, []) for r in range(2)}
    for status in statuses.values():
        status.started_age_s = 100.0
    assert estimate.elapsed(statuses) == 100.0
    assert estimate.eta(cfg(expected_load_s=2700, expected_warmup_s=600), statuses) == (3200.0, "planned")
    assert estimate.eta(cfg(expected_load_s=None), statuses) == (None, "")
