"""preflight's phase_settings.yml on the controller: a bad setting given to a deploy phase is refused
before the lock is taken (by the phase's own argument spec; a serving lane's re-run skips the phases,
so this is the only check it gets), and unset settings are left to the phases' defaults."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.unit.helpers.recipes import REPO

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")

PLAY = """\
- name: Check the phases' settings as the preflight does
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run the preflight's phase settings check
      ansible.builtin.include_role:
        name: lanekit.serving.preflight
        tasks_from: phase_settings.yml
"""


def _run(tmp_path, *extra):
    playbook = tmp_path / "check.yml"
    playbook.write_text(PLAY, encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", str(playbook)]
    for item in extra:
        argv += ["-e", item]
    return subprocess.run(argv, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=180, check=False)


def test_a_bad_value_for_a_phase_is_refused_with_its_key_and_choices(tmp_path):
    proc = _run(tmp_path, "weights_verify=bogus")
    assert proc.returncode != 0
    assert "weights_verify must be one of: quick, full, got: bogus" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_wrong_type_is_refused_for_every_phase_role(tmp_path):
    proc = _run(tmp_path, "ready_poll_s=soon")
    assert proc.returncode != 0
    assert "ready_poll_s" in proc.stdout, proc.stdout


def test_valid_and_unset_settings_pass(tmp_path):
    # Required options of the phases (set by their defaults when they run) are not demanded here.
    proc = _run(tmp_path, "weights_verify=full", "image_method=relay", "cache_state=warm")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_value_templated_over_a_phase_default_is_left_to_its_phase(tmp_path):
    # The sim inventory's image_lock_file names image_plan; outside its phase only the plan's
    # image can stand in for it, and a name no one defines here is not a reason to stop.
    proc = _run(tmp_path, "image_lock_file={{ image_work_dir }}/x.lock.yml",
                'lanekit_plan={"image": {"name": "m"}}', "weights_verify=quick")
    assert proc.returncode == 0, proc.stdout + proc.stderr
