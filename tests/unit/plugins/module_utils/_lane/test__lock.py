# Copyright: lanekit developers
# Apache-2.0
"""The lane lock (module_utils/_lane/_lock.py): atomic take, release by its owner only, stale verdicts."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _lock as ll

LANE = "mistral-large4-nvfp4-8x-vllm"
ALICE = {"user": "alice", "controller": "ctl-a", "pid": 4242, "started": 1_790_000_000, "playbook": "deploy_lane.yml"}
BOB = {"user": "bob", "controller": "ctl-b", "pid": 77, "started": 1_790_000_100, "playbook": "teardown_lane.yml"}


def test_the_first_run_takes_the_lock_and_the_second_is_refused_seeing_the_first(tmp_path):
    path = ll.lock_path(str(tmp_path / "locks"), LANE)
    outcome, record = ll.take(path, LANE, ALICE, now=1_790_000_010)
    assert outcome == "taken" and record["owner"] == ALICE and record["taken"] == 1_790_000_010
    assert json.loads(open(path, encoding="utf-8").read())["token"] == ll.owner_token(ALICE)
    outcome, record = ll.take(path, LANE, BOB)
    assert outcome == "refused" and record["owner"]["user"] == "alice"
    # the same run again (a second include of preflight) keeps its lock
    assert ll.take(path, LANE, ALICE)[0] == "held"
    assert os.listdir(tmp_path / "locks") == [f"{LANE}.lock"], "no temporary file is left beside the lock"


def test_check_mode_writes_nothing(tmp_path):
    path = ll.lock_path(str(tmp_path / "locks"), LANE)
    assert ll.take(path, LANE, ALICE, check_mode=True)[0] == "taken"
    assert not os.path.exists(path)


def test_only_the_owner_releases_and_a_missing_lock_is_no_change(tmp_path):
    path = ll.lock_path(str(tmp_path), LANE)
    ll.take(path, LANE, ALICE)
    assert ll.release(path, BOB)[0] == "not-mine" and os.path.exists(path)
    assert ll.release(path, ALICE, check_mode=True)[0] == "released" and os.path.exists(path)
    assert ll.release(path, ALICE)[0] == "released" and not os.path.exists(path)
    assert ll.release(path, ALICE) == ("absent", None)


def test_racing_takers_get_exactly_one_lock(tmp_path):
    """Eight processes try at once; the hard link lets exactly one of them in."""
    locks = tmp_path / "locks"
    code = ("import sys; from ansible_collections.lanekit.serving.plugins.module_utils._lane import _lock as ll; "
            "o={'user':'u','controller':'c','pid':int(sys.argv[1]),'started':1,'playbook':'p'}; "
            f"print(ll.take(ll.lock_path({str(locks)!r}, 'lane'), 'lane', o)[0])")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(1000 + i)], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
             for i in range(8)]
    outcomes = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert outcomes == ["refused"] * 7 + ["taken"]


def test_breaking_replaces_only_the_named_record_and_keeps_it_aside(tmp_path):
    path = ll.lock_path(str(tmp_path), LANE)
    ll.take(path, LANE, ALICE)
    # a token of another record (the lock changed hands since it was judged) breaks nothing
    assert ll.break_and_take(path, LANE, BOB, "0" * 32)[0] == "refused"
    assert ll.break_and_take(path, LANE, BOB, ll.owner_token(ALICE), check_mode=True)[0] == "taken"
    assert ll.read_lock(path)["owner"]["user"] == "alice"
    outcome, record = ll.break_and_take(path, LANE, BOB, ll.owner_token(ALICE))
    assert outcome == "taken" and record["owner"]["user"] == "bob"
    aside = path + ".broken-" + ll.owner_token(ALICE)[:12]
    assert json.loads(open(aside, encoding="utf-8").read())["owner"]["user"] == "alice"


def test_a_damaged_lock_and_a_bad_lane_name_are_sentences(tmp_path):
    path = ll.lock_path(str(tmp_path), LANE)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("{not json")
    with pytest.raises(LanekitError, match="is damaged"):
        ll.take(path, LANE, ALICE)
    with pytest.raises(LanekitError, match="cannot name a lock file"):
        ll.lock_path(str(tmp_path), "../etc/passwd")
    with pytest.raises(LanekitError, match="must be an absolute path"):
        ll.lock_path("relative", LANE)


def test_pid_state_sees_a_live_pid_a_dead_pid_and_a_reused_pid():
    me = os.getpid()
    assert ll.pid_state(me, 100.0, lambda pid: 100.4) == "alive"
    assert ll.pid_state(me, 100.0, lambda pid: 5000.0) == "dead", "a live pid with another start time was reused"
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    assert ll.pid_state(int(done.stdout), None, lambda pid: None) == "dead"
    assert ll.pid_state("x", None, lambda pid: None) == "unknown"


def test_judge_never_breaks_a_live_run_and_calls_a_dead_or_old_one_stale():
    holder = {"lane": LANE, "owner": ALICE, "token": ll.owner_token(ALICE), "taken": 1000}
    same = dict(BOB, controller="ctl-a")
    assert ll.judge(holder, same, 1100, 86400, "alive")[:2] == (False, False)
    stale, breakable, why = ll.judge(holder, same, 1100, 86400, "dead")
    assert stale and breakable and "gone from this controller" in why
    # another controller: unknown liveness, stale only by age, breakable on purpose
    assert ll.judge(holder, BOB, 1100, 86400, None)[:2] == (False, True)
    stale, breakable, why = ll.judge(holder, BOB, 1000 + 86401, 86400, None)
    assert stale and breakable and "lanekit_lock_stale_after_s" in why


def test_the_refusal_names_both_owners_and_the_way_out():
    holder = {"lane": LANE, "owner": ALICE, "token": ll.owner_token(ALICE), "taken": 1000}
    msg = ll.refusal("/var/lib/lanekit/locks/x.lock", holder, BOB, True, True, "stale: pid 4242 is gone")
    assert "alice@ctl-a pid 4242 (deploy_lane.yml" in msg and "bob@ctl-b pid 77 (teardown_lane.yml" in msg
    assert "-e lanekit_break_lock=true" in msg and "\n" not in msg
    assert "break" not in ll.refusal("/l", holder, BOB, False, False, "alive").split("refused.")[1]
