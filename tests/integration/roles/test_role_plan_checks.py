"""A role given a plan without a key it needs says so in its sentence (what it needs, where a plan comes
from), never "Error while evaluating conditional": bench_distribute passed an image section without its
pin and met the error, which any user passing their own plan to a role would meet too."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.unit.helpers.recipes import REPO

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")

IMAGE = {"name": "x", "arch": "amd64", "spec_dir": "/nonexistent", "content_hash": "0" * 12, "ref": "lanekit/x:0"}
RANK = {"host": "localhost", "container_name": "lk-r0", "container": {}}
RANKS = {"engine": "vllm", "ranks": [RANK], "start_order": [[0]], "reports_dir": "/nonexistent"}


@pytest.mark.parametrize(("role", "variable", "plan", "sentence"), [
    ("image", "image_plan", IMAGE, "The image role needs the plan's image section"),
    ("ranks", "ranks_plan", RANKS, "The ranks role needs the lane's plan in lanekit_plan"),
    ("ranks", "ranks_plan", dict(RANKS, hosts={"localhost": [0]}, ranks=[{"host": "localhost"}]),
     "The ranks role needs the lane's plan in lanekit_plan"),
    ("ready", "ready_plan", RANKS, "The ready role needs the lane's plan in lanekit_plan"),
], ids=["image-without-pin", "ranks-without-hosts", "ranks-without-container", "ready-without-hosts"])
def test_a_plan_without_a_key_the_role_needs_is_its_sentence(tmp_path, role, variable, plan, sentence):
    playbook = tmp_path / "play.yml"
    playbook.write_text(f"- hosts: localhost\n  gather_facts: false\n  roles:\n    - lanekit.serving.{role}\n")
    extra = tmp_path / "extra.json"
    # The image role's builder default reads the lane's plan; name one, as a run without preflight would.
    extra.write_text(json.dumps({variable: plan, "image_builder": "localhost"}))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([ANSIBLE_PLAYBOOK, str(playbook), "-i", "localhost,", "-c", "local", "-e", f"@{extra}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0
    assert sentence in out, out[-2000:]
    assert "Error while evaluating conditional" not in out and "Traceback" not in out
