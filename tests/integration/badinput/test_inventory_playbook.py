"""plan_lane.yml on inventories without the group lane_nodes (or with it limited away): one sentence each.

Moved from tests/unit/badinput/test_files_and_paths.py: it runs ansible-playbook (issue 24 part 5)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.unit.helpers.plans import REPO

# --- the inventory ----------------------------------------------------------------------------------------

INVENTORY_CASES = [
    ("all:\n  hosts:\n    spark-01:\n", [], "has no hosts in the group lane_nodes"),
    ("all:\n  children:\n    lane_nodes:\n      hosts: {}\n", [], "has no hosts in the group lane_nodes"),
    ("all:\n  children:\n    lane_nodes:\n      hosts: {spark-01: {}}\n    weights_staging:\n      hosts: {nfs-01: {}}\n",
     ["--limit", "nfs-01"], "None of the hosts of the group lane_nodes (spark-01) is in this run"),
]


@pytest.mark.parametrize("inventory, extra, sentence", INVENTORY_CASES, ids=["no-group", "empty-group", "limit"])
def test_an_inventory_without_lane_nodes_fails_with_a_sentence(tmp_path, inventory, extra, sentence):
    (tmp_path / "hosts.yml").write_text(inventory)
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    run = subprocess.run([playbook, os.path.join(REPO, "playbooks", "plan_lane.yml"), "-i",
                          str(tmp_path / "hosts.yml"), "-e", "lane=mistral-large4-nvfp4-8x-vllm", *extra],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=120, check=False)
    assert run.returncode != 0, run.stdout
    assert sentence in " ".join((run.stdout + run.stderr).split())
