# Copyright: lanekit developers
# Apache-2.0
"""The one status line per poll (plugin_utils/_boot/_statusline.py): ranks by phase, ETA, barrier, memory."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _report as report
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _statusline as statusline
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _tracker as boot
from tests.unit.helpers.ranklogs import lines_until, make_status
from tests.unit.plugins.plugin_utils._boot.test__tracker import HOSTS, cfg, vllm_loading


def test_status_line_lists_every_rank_with_eta():
    tracker = boot.LaneTracker("mistral-large4-nvfp4-8x-vllm", "vllm", cfg(), HOSTS)
    verdict = tracker.update(0.0, vllm_loading())
    assert verdict.status == boot.WAITING
    line = verdict.line
    assert "mistral-large4-nvfp4-8x-vllm 10m" in line and "/1h20m" in line
    assert "r0 loading 16/64 (25%)" in line
    assert "r1-7 loading" in line
    # 48 shards left at 1.6 shards/min = 30 min, plus the planned 10 min of warm-up
    assert "ETA ~39m55s (load 29m55s at 1.6 shards/min + warm-up 10m00s planned)" in line
    assert verdict.eta_s == pytest.approx(48 * 37.5 - 5 + 600, abs=2)


def test_no_barrier_note_without_a_barrier():
    statuses = {r: make_status(r, lines_until("sglang-worker.log", "Load weight begin"), engine="sglang")
                for r in range(8)}
    statuses[0] = make_status(0, lines_until("sglang-worker.log", "Load weight end"), engine="sglang")
    line = boot.LaneTracker("l", "sglang", cfg(barrier_timeout_s=None), HOSTS).update(0.0, statuses).line
    assert "barrier closes" not in line and "r0 barrier" in line


def test_overdue_plan_eta_is_said():
    statuses = {r: make_status(r, []) for r in range(8)}
    for status in statuses.values():
        status.started_age_s = 4000.0
    line = boot.LaneTracker("l", "vllm", cfg(expected_load_s=2700, expected_warmup_s=600), HOSTS).update(
        0.0, statuses).line
    assert "ETA overdue by 11m40s (planned)" in line


def test_memory_note_names_the_tightest_node():
    statuses = vllm_loading()
    for status in statuses.values():
        status.mem_free_kb = 30 * 1048576
    statuses[5].mem_free_kb = int(1.6 * 1048576)
    assert report.memory_note(statuses) == "MemFree min 1.6G r5"
    assert "MemFree min 1.6G r5" in boot.LaneTracker("l", "vllm", cfg(), HOSTS).update(0.0, statuses).line


def test_the_line_is_rendered_from_the_statuses_alone():
    # The tracker only adds its note and the quiet time: the rest is the statuses and the figures.
    statuses = boot.LaneTracker("l", "vllm", cfg(), HOSTS).infer(vllm_loading())
    line = statusline.render("l", cfg(), statuses, now=0.0, quiet_s=600.0, note="healthy 0s/30s")
    assert "r0 loading 16/64 (25%)" in line and "ETA ~39m55s" in line
    assert line.endswith("| no progress 10m00s/10m00s | healthy 0s/30s")
    assert statusline.barrier_note(cfg(barrier_timeout_s=None), statuses) == ""
