"""One operator per lane on the simulated cluster: a deploy started while another run holds the lane
is refused naming both owners and touches nothing; a lock left by a dead run is stale and broken
only on purpose; a deploy that fails after taking the lock releases it.

The holder is taken with the lane_lock module directly (an ad-hoc ansible run), on behalf of this
test process, which is alive for the whole test, or of a process that has exited.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from simlib import LANE, ROOT, assert_no_traceback, flat, lane_containers, node_of, run_playbook

HEAD = "spark-01"
LOCK = f"/var/lib/lanekit/locks/{LANE}.lock"


def take_lock(pid: int, user: str = "holder") -> dict:
    """Take the lane lock on the head for ``pid`` on this controller, through the module."""
    owner = {"user": user, "pid": pid, "started": None, "playbook": "holder.yml"}
    args = json.dumps({"lane": LANE, "owner": owner})
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([os.path.join(ROOT, ".venv", "bin", "ansible"), HEAD, "-i",
                           os.path.join(ROOT, "inventories", "sim"), "-m", "lanekit.serving.lane_lock", "-a", args],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "outcome: taken" in proc.stdout, proc.stdout + proc.stderr
    return lock_record()


def lock_record() -> dict | None:
    proc = subprocess.run(["docker", "exec", node_of(HEAD), "cat", LOCK], capture_output=True, text=True, check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def drop_lock() -> None:
    subprocess.run(["docker", "exec", node_of(HEAD), "sh", "-c", f"rm -f {LOCK} {LOCK}.broken-*"], check=False)


@pytest.fixture()
def clean_lock():
    drop_lock()
    yield
    drop_lock()


def test_a_second_deploy_is_refused_naming_both_owners(vllm_present, clean_lock):
    holder = take_lock(os.getpid())
    before = lane_containers()
    # even on purpose: the holder's run is alive on this controller
    proc = run_playbook("deploy_lane.yml", extra=["-e", "lanekit_break_lock=true"])
    assert proc.returncode != 0
    assert_no_traceback(proc.stdout)
    text = flat(proc.stdout)
    host = socket.gethostname()
    assert f"Lane {LANE} is locked by holder@{host} pid {os.getpid()} (holder.yml" in text
    assert f"@{host} pid " in text.split("this run, ", 1)[1] and "(deploy_lane.yml" in text
    assert "alive on this controller" in text and "Wait for that run to finish" in text
    assert lane_containers() == before, "a refused deploy must not touch the ranks"
    assert lock_record() == holder, "the holder's lock is left as it was"


def test_a_stale_lock_is_broken_only_on_purpose_and_released_at_the_end(vllm_present, clean_lock):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    holder = take_lock(int(gone.stdout), user="crashed")
    refused = run_playbook("deploy_lane.yml")
    assert refused.returncode != 0
    text = flat(refused.stdout)
    assert "crashed@" in text and "is gone from this controller" in text and "-e lanekit_break_lock=true" in text
    assert lock_record() == holder, "a stale lock is never broken silently"

    broken = run_playbook("deploy_lane.yml", extra=["-e", "lanekit_break_lock=true"])
    assert broken.returncode == 0
    warned = flat(broken.stdout + broken.stderr)  # Ansible prints warnings on stderr
    assert "broken on purpose" in warned and "crashed@" in warned
    assert lock_record() is None, "the deploy releases the lane at its end"


def test_a_failed_deploy_releases_the_lock(vllm_present, clean_lock):
    # A failure inside a phase, after the lock was taken: the phases run (a serving lane's re-run
    # would skip them), and the preflight's up-front check of the phases' settings is off, so the
    # weights role's own check is what fails.
    proc = run_playbook("deploy_lane.yml", extra=["-e", "weights_verify=bogus", "-e", "lanekit_rerun_probe=false",
                                                  "-e", '{"preflight_phase_roles": []}'])
    assert proc.returncode != 0
    assert_no_traceback(proc.stdout)
    assert f"the lock of lane {LANE} was released" in flat(proc.stdout)
    assert lock_record() is None
    again = run_playbook("deploy_lane.yml")
    assert again.returncode == 0, "the next run is not blocked by the failed one"
