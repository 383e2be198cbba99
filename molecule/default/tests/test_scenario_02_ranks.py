"""Failure handling on the simulated cluster, driven the way a user drives it: deploy-lane.yml
with a lane override (here: the stand-in engines' fault injection), then teardown-lane.yml.

Each test asks for the state it needs (conftest.py), so the file also runs alone; in the full
scenario it finds the lane that converge deployed: one flag changed, a rank crashing in warm-up, a rank hanging mid-load, a rank that never joins
(teardown is in test_scenario_04). Each test states what a person would check: the exit, the rank named, the fix printed,
the bundle written, the containers kept.
"""
from __future__ import annotations

import glob
import os
import re
import time

from simlib import ANSI, LANE, NODES, ROOT, changed_tasks, flat, lane_containers, rank_containers, record_timing, run_playbook

G1_LINE = "AttributeError: 'FusedMoE' object has no attribute 'g1_scale_c'"

# Scenario tests use no testinfra host: they run once, from the controller.


def newest_bundle(since: float) -> str | None:
    # A bundle holds the wait's verdict (the ledger's timeline/ and the bench's runs are folders there too).
    bundles = [d for d in glob.glob(os.path.join(ROOT, "reports", LANE, "*")) if os.path.isdir(d)
               and os.path.getmtime(d) >= since and os.path.isfile(os.path.join(d, "verdict.json"))]
    return max(bundles, key=os.path.getmtime) if bundles else None


def fault(rank: int, phase: str, line: str | None = None, hang: bool = False) -> dict:
    env = {"STANDIN_HANG_RANK": str(rank), "STANDIN_HANG_PHASE": phase} if hang else \
          {"STANDIN_FAULT_RANK": str(rank), "STANDIN_FAULT_PHASE": phase, "STANDIN_FAULT_LINE": line}
    return {"serve": {"env": env}}


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


def test_rank_crash_in_warmup_fails_fast_names_rank_and_fix_keeps_everything(vllm_only):
    started = time.time()
    proc = run_playbook("deploy_lane.yml", fault(3, "warmup", G1_LINE))
    assert proc.returncode != 0
    out = proc.stdout
    assert "g1_scale_c" in out and "flashinfer_cutlass" in out
    assert re.search(r"\br(ank )?3\b", out)
    bundle = newest_bundle(started)
    assert bundle, "no failure bundle under reports/<lane>/"
    assert os.path.isfile(os.path.join(bundle, "plan.json"))
    logs = glob.glob(os.path.join(bundle, "**", "*r3*"), recursive=True) + \
        glob.glob(os.path.join(bundle, "**", "*rank-3*"), recursive=True) + \
        glob.glob(os.path.join(bundle, "**", "*rank3*"), recursive=True)
    assert logs, f"rank 3's logs are not in {bundle}: {os.listdir(bundle)}"
    kept = [c for node in NODES for c in rank_containers(node)]
    assert len(kept) == 8, "a failed boot must keep every rank container for inspection"
    # Within two poll intervals: the wait counts the polls that began after the rank exited. When a
    # poll sees the fatal line before the exit, the rank is blamed while still going down.
    noticed = re.search(r"Noticed ([\d.]+) s after the first rank exited, at poll (\d+) after the exit", flat(out))
    if noticed:
        assert int(noticed.group(2)) <= 2, noticed.group(0)
    else:
        assert "is going down" in flat(out)
    record_timing("crash in warm-up", proc.seconds, noticed.group(0) if noticed else "seen before the exit")


# A rank that hangs mid-load (stall) and a rank that never joins the rendezvous are the wait's own
# verdicts from what the nodes report: tests/unit/plugins/action/test_lane_wait.py drives the real
# wait code through both (and a slow rank that is not stalled) with scripted node reports and a
# controlled clock, in seconds instead of five minutes of this worker. The crash above stays here as
# the end-to-end fault: a real rank container exits and the wait names it from its real log.
