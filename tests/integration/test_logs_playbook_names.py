"""Issue 23: logs_lane's options carry the logs_ prefix; the bare old names are refused before any node is read."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.unit.helpers.plans import REPO

PLAYBOOK = os.path.join(REPO, "playbooks", "logs_lane.yml")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")


def test_the_old_option_names_are_refused_naming_the_new_ones(tmp_path):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    # The example inventory's nodes do not exist: the refusal must come before any is contacted.
    argv = [ANSIBLE_PLAYBOOK, PLAYBOOK, "-i", os.path.join(REPO, "inventories", "spark8"), "-e", "lane=x",
            "-e", "lines=5", "-e", "grep=ERROR", "-e", f"lanekit_reports_dir={tmp_path}"]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    assert "-e grep, -e lines are old names that lanekit no longer reads" in out
    assert "pass -e logs_grep, -e logs_lines instead." in out
    assert "UNREACHABLE" not in proc.stdout and "Traceback" not in proc.stdout + proc.stderr
