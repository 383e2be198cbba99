"""Failure handling on the simulated cluster, driven the way a user drives it: deploy-lane.yml
with a lane override (here: the stand-in engines' fault injection), then teardown-lane.yml.

Runs after the scenario's converge/idempotence/verify on the deployed lane, in file order:
one flag changed, a rank crashing in warm-up, a rank hanging mid-load, a rank that never joins,
teardown. Each test states what a person would check: the exit, the rank named, the fix printed,
the bundle written, the containers kept.
"""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import time

import pytest

LANE = os.environ.get("LANEKIT_LANE", "mistral-large4-nvfp4-8x-vllm")
ROOT = os.environ.get("LANEKIT_ROOT", os.getcwd())
PLAYBOOK = os.path.join(ROOT, ".venv", "bin", "ansible-playbook")
NODES = [f"lksim-spark-{i:02d}" for i in range(1, 9)]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
G1_LINE = "AttributeError: 'FusedMoE' object has no attribute 'g1_scale_c'"

# Scenario tests use no testinfra host: they run once, from the controller.


def run_playbook(name: str, overrides: dict | None = None, extra: list[str] | None = None, timeout: int = 900):
    argv = [PLAYBOOK, os.path.join(ROOT, "playbooks", name), "-i", os.path.join(ROOT, "inventories", "sim"),
            "-e", f"lane={LANE}"]
    if overrides is not None:
        argv += ["-e", "lane_overrides=" + json.dumps(overrides)]
    argv += extra or []
    # Molecule exports ANSIBLE_FORCE_COLOR for its own runs; these outputs are parsed, so no colour.
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0")
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    proc.seconds = time.monotonic() - started
    print(proc.stdout[-6000:])
    print(proc.stderr[-2000:])
    return proc


def changed_tasks(output: str) -> list[str]:
    """Names of the tasks that reported a change, from the default callback's output."""
    tasks, current = [], None
    for line in ANSI.sub("", output).splitlines():
        match = re.match(r"^TASK \[(.*)\] \*+", line)
        if match:
            current = match.group(1)
        elif line.startswith("changed:") and current and current not in tasks:
            tasks.append(current)
    return tasks


def rank_containers(node: str) -> list[dict]:
    proc = subprocess.run(["docker", "exec", node, "docker", "ps", "-a", "--filter", f"label=io.lanekit.lane={LANE}",
                           "--format", "{{json .}}"], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def newest_bundle(since: float) -> str | None:
    bundles = [d for d in glob.glob(os.path.join(ROOT, "reports", LANE, "*")) if os.path.isdir(d)
               and os.path.getmtime(d) >= since]
    return max(bundles, key=os.path.getmtime) if bundles else None


def fault(rank: int, phase: str, line: str | None = None, hang: bool = False) -> dict:
    env = {"STANDIN_HANG_RANK": str(rank), "STANDIN_HANG_PHASE": phase} if hang else \
          {"STANDIN_FAULT_RANK": str(rank), "STANDIN_FAULT_PHASE": phase, "STANDIN_FAULT_LINE": line}
    return {"serve": {"env": env}}


def test_one_changed_flag_recreates_the_ranks_and_nothing_else():
    before = {c["Names"]: c["ID"] for node in NODES for c in rank_containers(node)}
    assert len(before) == 8, "the lane is not deployed before this test"
    # A value no earlier run used, so the plan really changes whatever ran before.
    proc = run_playbook("deploy-lane.yml", {"serve": {"args": {"--max-num-seqs": 40 + int(time.time()) % 60}}})
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
    assert "is ready" in proc.stdout
    after = {c["Names"]: c["ID"] for node in NODES for c in rank_containers(node)}
    assert set(after) == set(before), "the rank containers keep their names"
    assert all(after[name] != before[name] for name in before), "every rank runs the new argv in a new container"


def test_rank_crash_in_warmup_fails_fast_names_rank_and_fix_keeps_everything():
    started = time.time()
    proc = run_playbook("deploy-lane.yml", fault(3, "warmup", G1_LINE))
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
    print(f"crash surfaced {proc.seconds:.0f} s after the playbook started (sim boot budget 600 s)")


def test_hung_rank_trips_stall_detection():
    proc = run_playbook("deploy-lane.yml", fault(5, "load", hang=True))
    assert proc.returncode != 0
    assert re.search(r"stall|no progress", proc.stdout, re.IGNORECASE)
    assert re.search(r"\br(ank )?5\b", proc.stdout)
    print(f"stall surfaced {proc.seconds:.0f} s after the playbook started (stall_s 60, budget 600 s)")


def test_rank_that_never_joins_is_named():
    proc = run_playbook("deploy-lane.yml", fault(5, "rendezvous", hang=True))
    assert proc.returncode != 0
    assert re.search(r"never joined|did not join|not joined|waiting for r5", proc.stdout, re.IGNORECASE)
    assert re.search(r"\br(ank )?5\b", proc.stdout)


def test_teardown_leaves_no_container_running():
    proc = run_playbook("teardown-lane.yml", extra=["-e", "teardown_remove=true"])
    assert proc.returncode == 0
    for node in NODES:
        assert rank_containers(node) == [], f"{node} still has rank containers"
