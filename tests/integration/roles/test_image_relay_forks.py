"""The image role's preflight refuses the relay when Ansible cannot run every node at once (forks):
the chain's last nodes would start after their predecessors ended and fall back to the builder."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.unit.helpers.recipes import REPO

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")

PLAY = """\
- name: Run the image role's checks on three local nodes
  hosts: all
  gather_facts: false
  vars:
    image_plan: {name: demo, arch: arm64, spec_dir: /nonexistent, content_hash: abc, ref: "lanekit/demo:abc", pinned: true,
                 pin: {ref: "lanekit/demo:abc", content_hash: abc}}
    image_nodes: [n1, n2, n3]
    image_builder: n1
    image_lock_file: /nonexistent/image.lock.yml
  tasks:
    - name: Run the image role's preflight
      ansible.builtin.include_role:
        name: lanekit.serving.image
        tasks_from: preflight.yml
"""


def _run(tmp_path, forks: int, method: str):
    playbook = tmp_path / "check.yml"
    playbook.write_text(PLAY, encoding="utf-8")
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("n1\nn2\nn3\n[all:vars]\nansible_connection=local\n", encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [ANSIBLE_PLAYBOOK, "-i", str(inventory), "-f", str(forks), str(playbook), "-e", f"image_method={method}"]
    return subprocess.run(argv, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=180, check=False)


def test_the_relay_with_fewer_forks_than_nodes_is_refused_with_the_fix(tmp_path):
    proc = _run(tmp_path, 2, "relay")
    assert proc.returncode != 0
    assert "runs the distribution on all 3 nodes at once, but Ansible runs 2 hosts at a time" in " ".join(proc.stdout.split())
    assert "-f 3" in proc.stdout


@pytest.mark.parametrize(("forks", "method"), [(3, "relay"), (2, "stream")])
def test_enough_forks_or_another_method_passes(tmp_path, forks, method):
    proc = _run(tmp_path, forks, method)
    assert proc.returncode == 0, proc.stdout + proc.stderr
