"""Issue 23: plan_lane's output is what a person checks: with --diff what changed since the previous
plan.json, rank by rank; and no screen of per-host "skipping" lines for the node checks a plan does not do."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.unit.helpers.plans import REPO, VLLM

PLAYBOOK = os.path.join(REPO, "playbooks", "plan_lane.yml")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")


def _plan(tmp_path, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [ANSIBLE_PLAYBOOK, PLAYBOOK, "-i", os.path.join(REPO, "inventories", "spark8"), "-e", f"lane={VLLM}",
            "-e", f"lanekit_reports_dir={tmp_path}", *extra]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_diff_names_what_changed_since_the_previous_plan_and_no_host_is_skipped_per_check(tmp_path):
    first = _plan(tmp_path, "--diff")
    assert f"no previous plan at {tmp_path}/{VLLM}/plan.json: every rank is new." in first
    # Eight nodes, five node checks a plan leaves out: these were 43 lines; what is left is run once.
    assert first.count("skipping:") <= 3, first

    second = _plan(tmp_path, "--diff", "-e", 'lane_cli_overrides={"serve": {"args": {"--max-num-seqs": 64}}}')
    assert "ranks 0-7 argv --max-num-seqs: 128 -> 64" in second
    assert '"--max-num-seqs"' not in second  # a list of changes, not a JSON dump

    quiet = _plan(tmp_path, "-e", 'lane_cli_overrides={"serve": {"args": {"--max-num-seqs": 64}}}')
    assert "changes since the plan" not in quiet and "no rank changed" not in quiet
