# Copyright: lanekit developers
# Apache-2.0
"""lane_lock: the module on the head and the controller action that judges and refuses or breaks."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ansible_collections.lanekit.serving.plugins.action import lane_lock as action
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _lock as ll
from ansible_collections.lanekit.serving.plugins.modules import lane_lock as module
from tests.unit.helpers.lane_fakes import action_module
from tests.unit.helpers.modules import assert_documentation_matches_argument_spec, run_module

LANE = "mistral-large4-nvfp4-8x-vllm"


def test_documentation_matches_the_argument_spec():
    assert_documentation_matches_argument_spec("lane_lock")
    assert set(action.ARGUMENT_SPEC) <= set(module.argument_spec())


def test_module_takes_keeps_and_releases(tmp_path):
    owner = {"user": "u", "controller": "c", "pid": 5, "started": 1, "playbook": "deploy_lane.yml"}
    args = {"lane": LANE, "lock_dir": str(tmp_path), "owner": owner}
    r = run_module("lane_lock", args, check=True, tmp=tmp_path)
    assert not r["changed"] and r["outcome"] == "taken" and not os.path.exists(r["lock_path"])
    r = run_module("lane_lock", args, tmp=tmp_path)
    assert not r["changed"] and r["outcome"] == "taken" and os.path.exists(r["lock_path"])
    r = run_module("lane_lock", args, tmp=tmp_path)
    assert not r["changed"] and r["outcome"] == "held"
    r = run_module("lane_lock", dict(args, owner=dict(owner, pid=6)), tmp=tmp_path)
    assert not r.get("failed") and r["outcome"] == "refused" and r["holder"]["owner"]["pid"] == 5
    r = run_module("lane_lock", dict(args, state="absent"), tmp=tmp_path)
    assert not r["changed"] and r["outcome"] == "released" and not os.path.exists(r["lock_path"])
    r = run_module("lane_lock", {"lane": LANE, "lock_dir": str(tmp_path), "owner": {}}, tmp=tmp_path)
    assert r["failed"] and "needs an owner" in r["msg"]


class Runner:
    """The action with its module call routed to the module's logic on this machine."""

    def __init__(self, tmp_path, monkeypatch, owner, **args):
        monkeypatch.setattr(action, "controller_owner", lambda override: dict(owner))
        self.act = action_module(action.ActionModule, dict({"lane": LANE, "lock_dir": str(tmp_path)}, **args))
        self.act._execute_module = lambda module_name, module_args, task_vars: module.run(
            dict({"state": "present", "break_token": None, "owner": None}, **module_args), False)

    def run(self):
        return self.act.run(task_vars={})


def dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)


def test_a_live_holder_on_this_controller_is_never_broken(tmp_path, monkeypatch):
    live = {"user": "alice", "controller": "ctl", "pid": os.getpid(), "started": action.process_start(os.getpid()),
            "playbook": "deploy_lane.yml"}
    ll.take(ll.lock_path(str(tmp_path), LANE), LANE, live)
    me = {"user": "bob", "controller": "ctl", "pid": 1, "started": 2, "playbook": "teardown_lane.yml"}
    r = Runner(tmp_path, monkeypatch, me, break_lock=True).run()
    assert r["failed"] and not r["breakable"]
    assert f"alice@ctl pid {os.getpid()} (deploy_lane.yml" in r["msg"] and "bob@ctl pid 1 (teardown_lane.yml" in r["msg"]
    assert "alive on this controller" in r["msg"]


def test_a_dead_holder_is_stale_and_broken_only_on_purpose(tmp_path, monkeypatch):
    gone = {"user": "alice", "controller": "ctl", "pid": dead_pid(), "started": 1, "playbook": "deploy_lane.yml"}
    path = ll.lock_path(str(tmp_path), LANE)
    ll.take(path, LANE, gone)
    me = {"user": "bob", "controller": "ctl", "pid": 1, "started": 2, "playbook": "deploy_lane.yml"}
    r = Runner(tmp_path, monkeypatch, me).run()
    assert r["failed"] and r["stale"] and "lanekit_break_lock=true" in r["msg"]
    assert ll.read_lock(path)["owner"]["user"] == "alice", "never broken silently"
    r = Runner(tmp_path, monkeypatch, me, break_lock=True).run()
    assert not r.get("failed") and r["outcome"] == "taken" and r["broken"]["owner"]["user"] == "alice"
    assert r["changed"], "breaking another run's lock is a change"
    assert ll.read_lock(path)["owner"]["user"] == "bob"


def test_release_leaves_another_owners_lock(tmp_path, monkeypatch):
    other = {"user": "alice", "controller": "ctl", "pid": 9, "started": 1, "playbook": "deploy_lane.yml"}
    path = ll.lock_path(str(tmp_path), LANE)
    ll.take(path, LANE, other)
    me = {"user": "bob", "controller": "ctl", "pid": 1, "started": 2, "playbook": "deploy_lane.yml"}
    r = Runner(tmp_path, monkeypatch, me, state="absent").run()
    assert r["outcome"] == "not-mine" and not r["changed"] and os.path.exists(path)


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="Linux /proc")
def test_the_owner_is_this_run_with_its_start_time():
    owner = action.controller_owner({"playbook": "x.yml"})
    assert owner["pid"] == os.getppid() and owner["playbook"] == "x.yml" and owner["controller"]
    assert abs(owner["started"] - action.process_start(os.getppid())) < 1
