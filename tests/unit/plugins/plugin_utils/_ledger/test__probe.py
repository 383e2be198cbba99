"""Issue 38, item 6: the watch's probe runs on the lane's head (_ledger/_probe.py), through rank_status, so the
lane's key never crosses the network from the controller; the streamed probe itself is
module_utils/_boot/_probes.stream_probe (tested in test__probes.py)."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleConnectionFailure

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _probe as probe
from tests.unit.helpers.lane_fakes import PLAN as FAKE_PLAN

# The plan says which rank answers the API (serves_api, _plan/_build.py).
PLAN = dict(FAKE_PLAN, ranks=[dict(FAKE_PLAN["ranks"][0], serves_api=True), FAKE_PLAN["ranks"][1]])


class Head:
    """Stands in for the action: its connection is the head's; it answers rank_status with ``answer``."""

    def __init__(self, answer):
        self.answer = answer
        self.calls = []

    def _execute_module(self, module_name, module_args, task_vars):
        self.calls.append((module_name, module_args))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_the_probe_asks_the_heads_rank_status_with_the_key_as_its_own_argument():
    margs = probe.probe_args(PLAN, None, deadline_s=60.0, max_tokens=16, api_key="sk-watch")
    assert margs == {"containers": [], "api_key": "sk-watch", "watch_probe": {
        "url": "http://10.10.10.1:30000", "model": "mistral-large-4", "deadline_s": 60.0, "max_tokens": 16,
        "container": "lk-r0"}}
    bare = probe.probe_args(FAKE_PLAN, "127.0.0.1", deadline_s=1.0, max_tokens=4, api_key=None)
    assert "api_key" not in bare and bare["watch_probe"]["container"] is None  # the head takes its labelled one
    head = Head({"watch_probe": {"ok": True, "tokens": 16}})
    assert probe.on_head(head, {}, "spark-01", margs) == {"ok": True, "tokens": 16}
    assert head.calls == [("lanekit.serving.rank_status", margs)]


@pytest.mark.parametrize("answer, words", [
    ({"unreachable": True, "msg": "Failed to connect to the host via ssh: timed out"}, "Failed to connect"),
    ({"failed": True, "msg": "docker: command not found"}, "docker: command not found"),
    (AnsibleConnectionFailure("ssh: connect to host 10.10.10.1 port 22: No route to host"), "No route to host"),
    ({"changed": False}, "rank_status returned no watch_probe"),
])
def test_a_head_that_cannot_run_the_probe_fails_the_watch_in_one_sentence(answer, words):
    with pytest.raises(LanekitError, match="The watch's probe could not run on the lane's head spark-01") as err:
        probe.on_head(Head(answer), {}, "spark-01", probe.probe_args(PLAN, None, 1.0, 4, "sk-watch"))
    assert words in str(err.value) and "sk-watch" not in str(err.value)


def test_the_probe_runs_only_from_the_head():
    assert probe.head_of(PLAN, delegate_to="spark-01", host="spark-07") == "spark-01"
    assert probe.head_of(PLAN, delegate_to=None, host="spark-01") == "spark-01"
    with pytest.raises(LanekitError, match="from the lane's head spark-01") as err:
        probe.head_of(PLAN, delegate_to="localhost", host="spark-01")
    assert 'delegate_to: "{{ lanekit_plan.api.host }}"' in str(err.value)
    with pytest.raises(LanekitError, match="names no head host"):
        probe.head_of({"api": {"address": "10.0.0.1"}}, delegate_to="localhost", host="x")
