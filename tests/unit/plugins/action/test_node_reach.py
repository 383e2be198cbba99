# Copyright: lanekit developers
# Apache-2.0
"""The node_reach action: every host that cannot be used is refused in one message; none, none."""
from __future__ import annotations

import yaml

from ansible_collections.lanekit.serving.plugins.action import node_reach as nr
from ansible_collections.lanekit.serving.plugins.modules import node_reach as doc
from tests.unit.helpers.lane_fakes import action_module


def test_argument_spec_matches_the_documentation():
    documented = yaml.safe_load(doc.DOCUMENTATION)["options"]
    assert set(documented) == set(nr.ARGUMENT_SPEC)


def run(results, hostvars):
    action = action_module(nr.ActionModule, {"results": results})
    return action.run(task_vars={"hostvars": hostvars})


def test_every_host_that_cannot_be_used_is_named_and_the_run_fails():
    out = run({
        "spark-01": {"ping": "pong"},
        "spark-07": {"unreachable": True, "msg": "ssh: connect to host 10.0.0.17 port 22: Connection timed out"},
        "spark-08": {"failed": True, "msg": "Task failed: Missing sudo password"},
    }, {"spark-07": {"ansible_host": "10.0.0.17", "ansible_ssh_timeout": 10},
        "spark-08": {"ansible_host": "10.0.0.18", "ansible_user": "ops"}})
    assert out["failed"] is True
    assert [h["kind"] for h in out["hosts"]] == ["timeout", "sudo_password"]
    lines = out["msg"].splitlines()
    assert lines[0] == "2 of 3 host(s) cannot be used, so nothing was changed on any node:"
    assert lines[1].startswith("spark-07 (10.0.0.17) is unreachable: it did not answer on SSH within 10 s")
    assert lines[2].startswith("sudo on spark-08 (10.0.0.18) asks ops for a password")


def test_all_hosts_answering_is_not_a_failure():
    out = run({"spark-01": {"ping": "pong"}, "stage-01": {"ping": "pong"}}, {})
    assert not out.get("failed") and out["hosts"] == []
