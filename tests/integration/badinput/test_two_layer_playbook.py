"""Issue 23 end to end: plan-lane.yml on an inventory with a group_vars layer and a host_vars layer.

Ansible itself resolves the variables here, which is where the old single name went wrong: the
host's ``lane_overrides`` replaced the group's before lanekit saw either.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.unit.helpers.plans import REPO

PLAYBOOK = os.path.join(REPO, "playbooks", "plan-lane.yml")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
LANE = "mistral-large4-nvfp4-8x-vllm"

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")


def _inventory(tmp_path, group_text: str, host_text: str):
    inventory = tmp_path / "inventory"
    shutil.copytree(os.path.join(REPO, "inventories", "spark8"), inventory)
    (inventory / "group_vars" / "all" / "overrides.yml").write_text(group_text, encoding="utf-8")
    (inventory / "host_vars").mkdir()
    (inventory / "host_vars" / "spark-03.yml").write_text(host_text, encoding="utf-8")
    return inventory


def _plan(inventory, reports):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [ANSIBLE_PLAYBOOK, PLAYBOOK, "-i", str(inventory), "-e", f"lane={LANE}",
            "-e", f"lanekit_reports_dir={reports}"]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)


def test_group_flag_and_host_env_both_reach_the_ranks(tmp_path):
    inventory = _inventory(tmp_path, "lane_group_overrides:\n  serve:\n    args:\n      --max-num-seqs: 64\n",
                           "lane_host_overrides:\n  serve:\n    env:\n      NCCL_DEBUG: INFO\n")
    proc = _plan(inventory, tmp_path / "reports")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plan = json.loads((tmp_path / "reports" / LANE / "plan.json").read_text(encoding="utf-8"))
    seqs = [r["command"][r["command"].index("--max-num-seqs") + 1] for r in plan["ranks"]]
    assert seqs == ["64"] * 8
    assert [r["host"] for r in plan["ranks"] if r["env"].get("NCCL_DEBUG") == "INFO"] == ["spark-03"]


def test_the_old_name_in_host_vars_is_refused_with_the_new_names(tmp_path):
    inventory = _inventory(tmp_path, "lane_group_overrides: {}\n",
                           "lane_overrides:\n  serve:\n    env:\n      NCCL_DEBUG: INFO\n")
    proc = _plan(inventory, tmp_path / "reports")
    assert proc.returncode != 0
    out = " ".join(proc.stdout.split())
    assert "lane_overrides is set in the inventory for host spark-01" not in out
    assert "lane_overrides is set in the inventory for host spark-03" in out
    assert "rename it to lane_group_overrides in group_vars and to lane_host_overrides in host_vars." in out
    assert "Traceback" not in proc.stdout + proc.stderr


def test_plan_lane_check_writes_no_plan_and_reports_no_change(tmp_path):
    # Issue 23: plan_lane --check wrote reports/<lane>/plan.json and reported a change.
    inventory = _inventory(tmp_path, "lane_group_overrides: {}\n", "lane_host_overrides: {}\n")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [ANSIBLE_PLAYBOOK, PLAYBOOK, "--check", "-i", str(inventory), "-e", f"lane={LANE}",
            "-e", f"lanekit_reports_dir={tmp_path / 'reports'}"]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (tmp_path / "reports" / LANE / "plan.json").exists()
    assert " changed=0 " in proc.stdout
