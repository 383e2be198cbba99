"""playbooks/tasks/phase.yml, the one wrapper of every deploy phase (issue 24), run for real on the
controller: a serving lane skips the phase, a failing phase releases the lane lock and ends the run
with the failed task's name, and without a lock to release the failure still ends the run. Issue 28:
the image and weights phases the probe proved settled are skipped with one line, unless the run asks
them for more; the other phases run."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.unit.helpers.recipes import REPO

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")

# The ready role refuses at once without a plan: a phase that fails on its first task.
PLAY = """\
- name: Run the {phase} phase through the wrapper
  hosts: lane_nodes
  gather_facts: false
  vars:
    lanekit_phase: {phase}
  tasks:
    - name: Run the {phase} phase
      ansible.builtin.import_tasks: {wrapper}
"""
REV = "a" * 40
PLAN = json.dumps({"lanekit_plan": {"lane": "demo", "weights": {
    "path": f"/nonexistent/m/.revisions/{REV}", "revision": REV, "model_id": "org/m", "layout": "hf",
    "source": {"kind": "hf"}}}})


def _run(tmp_path, *extra, phase="ready"):
    playbook = tmp_path / "phase.yml"
    playbook.write_text(PLAY.format(phase=phase, wrapper=os.path.join(REPO, "playbooks", "tasks", "phase.yml")),
                        encoding="utf-8")
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[lane_nodes]\nnode1 ansible_connection=local\n", encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [ANSIBLE_PLAYBOOK, "-i", str(inventory), str(playbook), "-e", "lane=demo",
            "-e", f"lanekit_lock_dir={tmp_path / 'locks'}", "-e", f"ansible_python_interpreter={sys.executable}"]
    for item in extra:
        argv += ["-e", item]
    proc = subprocess.run(argv, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=180, check=False)
    return proc, " ".join(proc.stdout.split())


def test_a_lane_that_serves_its_plan_skips_the_phase(tmp_path):
    proc, out = _run(tmp_path, '{"lanekit_lane_serving": true}')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Check that a plan with ranks was given" not in out
    assert "Release the lane lock after a failure" not in out


def test_a_failing_phase_releases_the_lock_and_ends_the_run_naming_the_task(tmp_path):
    proc, out = _run(tmp_path)
    assert proc.returncode != 0
    assert "lanekit.serving.ready : Check that a plan with ranks was given" in out
    assert "Release the lane lock on the head" in out
    assert "failed on node1 (see above); the lock of lane demo was released." in out


def test_without_a_lock_to_release_the_failure_still_ends_the_run(tmp_path):
    proc, out = _run(tmp_path, "lanekit_phase_unlock=false")
    assert proc.returncode != 0
    assert "Release the lane lock on the head" not in out
    assert "Check that a plan with ranks was given failed on node1 (see above)." in out


def test_a_settled_image_phase_is_skipped_with_one_line(tmp_path):
    proc, out = _run(tmp_path, '{"lanekit_phases_settled": ["image", "weights"]}', phase="image")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Skip the image phase: every node holds the pinned image (the preflight probe proved it)." in out
    assert "lanekit.serving.image :" not in out


def test_a_settled_weights_phase_is_skipped_with_the_roles_own_defaults(tmp_path):
    # The weights role's defaults (weights_path, weights_verify, ...) resolve from the plan: nothing more is asked.
    proc, out = _run(tmp_path, PLAN, '{"lanekit_phases_settled": ["weights"]}', phase="weights")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"Skip the weights phase: every node sees the weights whole, revision {REV[:12]}" in out
    assert "lanekit.serving.weights :" not in out


@pytest.mark.parametrize(("extra", "said"), [
    ("weights_verify=full", "weights_verify=full re-hashes every staged file"),
    ("weights_revision=" + "b" * 40, "is not the revision of the plan the probe checked"),
])
def test_a_settled_weights_phase_asked_for_more_runs(tmp_path, extra, said):
    proc, out = _run(tmp_path, PLAN, '{"lanekit_phases_settled": ["weights"]}', extra, "lanekit_phase_unlock=false",
                     phase="weights")
    assert "Run the weights phase although the preflight probe found it settled: " in out and said in out
    # The role ran: its first check refuses this inventory (no weights_staging host).
    assert "lanekit.serving.weights : Check the weights inputs" in out
    assert proc.returncode != 0


def test_a_settled_ready_phase_still_runs(tmp_path):
    proc, out = _run(tmp_path, '{"lanekit_phases_settled": ["image", "weights", "ranks", "ready"]}',
                     "lanekit_phase_unlock=false")
    assert proc.returncode != 0
    assert "Skip the" not in out
    assert "lanekit.serving.ready : Check that a plan with ranks was given" in out
