"""A changed rank flag on the simulated cluster, driven the way a user drives it: deploy-lane.yml
with a lane override, previewed in check mode, then applied.

Each test asks for the state it needs (conftest.py), so the file also runs alone; in the full
scenario it finds the lane that converge deployed. The end-to-end failing boot (a rank crashing in
warm-up: the rank named, the fix printed, the bundle written, the containers kept) is the ledger's
failing deploy in test_scenario_15_ledger.py, which makes that deploy anyway.
"""
from __future__ import annotations

import re
import time

from simlib import ANSI, NODES, changed_tasks, flat, lane_containers, rank_containers, run_playbook

# Scenario tests use no testinfra host: they run once, from the controller.


def test_check_mode_diff_shows_the_changed_flag_per_rank_and_changes_nothing(vllm_serving):
    before = lane_containers()
    proc = run_playbook("deploy_lane.yml", {"serve": {"args": {"--max-num-seqs": 333}}}, extra=["--check", "--diff"])
    assert proc.returncode == 0
    text = ANSI.sub("", proc.stdout)
    # community.docker's diff of each rank: the old and the new command line.
    diffs = re.findall(r"- --max-num-seqs\n-\s+- '\d+'\n\+\s+- '333'", text)
    assert len(diffs) == 8, "each rank's diff must show the old and the new value of the changed flag"
    assert len(set(re.findall(r"changed: \[(spark-\d+)\] => \(item=r\d+", text))) == 8
    assert lane_containers() == before, "check mode touched the ranks"
    # Issue 28: the probe ran for real and proved the image and weights settled, so check mode skips
    # them as a real run does (they would show no change).
    assert "Skip the image phase: every node holds the pinned image" in flat(text)
    assert "TASK [lanekit.serving.image :" not in text and "TASK [lanekit.serving.weights :" not in text


def test_one_changed_flag_recreates_the_ranks_and_nothing_else(vllm_serving):
    before = {c["Names"]: c["ID"] for node in NODES for c in rank_containers(node)}
    assert len(before) == 8, "the lane is not deployed before this test"
    # A value no earlier run used, so the plan really changes whatever ran before.
    proc = run_playbook("deploy_lane.yml", {"serve": {"args": {"--max-num-seqs": 40 + int(time.time()) % 60}}})
    assert proc.returncode == 0
    changed = changed_tasks(proc.stdout)
    print("changed tasks:", changed)
    # Besides the plan and the ranks (with the teardown that archives their logs first), only the
    # pre-boot page-cache warm may act: a load is coming, and the host may have reclaimed cold pages.
    allowed = ("lanekit.serving.ranks", "lanekit.serving.preflight", "lanekit.serving.teardown",
               "lanekit.serving.cache : Measure and warm")
    outside = [t for t in changed if not t.startswith(allowed)]
    assert outside == [], f"tasks outside the ranks phase changed: {outside}"
    assert any(t.startswith("lanekit.serving.ranks") for t in changed)
    # Issue 28: one changed flag does not re-walk the image and weights phases the probe proved settled.
    assert "Skip the image phase: every node holds the pinned image" in flat(proc.stdout)
    assert "Skip the weights phase: every node sees the weights whole" in flat(proc.stdout)
    assert "TASK [lanekit.serving.image :" not in proc.stdout and "TASK [lanekit.serving.weights :" not in proc.stdout
    assert "is ready" in proc.stdout
    after = {c["Names"]: c["ID"] for node in NODES for c in rank_containers(node)}
    assert set(after) == set(before), "the rank containers keep their names"
    assert all(after[name] != before[name] for name in before), "every rank runs the new argv in a new container"


# A rank that hangs mid-load (stall) and a rank that never joins the rendezvous are the wait's own
# verdicts from what the nodes report: tests/unit/plugins/action/test_lane_wait.py drives the real
# wait code through both (and a slow rank that is not stalled) with scripted node reports and a
# controlled clock, in seconds instead of five minutes of this worker. The end-to-end fault (a real
# rank container exits and the wait names it from its real log) is in test_scenario_15_ledger.py.
