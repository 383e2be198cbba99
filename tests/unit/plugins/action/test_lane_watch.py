# Copyright: lanekit developers
# Apache-2.0
"""Issue 26: lane_watch against a local streaming API: a wedge is found by the probes, restarted within the
budget, healed; a back-off and a spent budget are reported once; a cause a restart cannot fix is not restarted."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.action import lane_watch
from ansible_collections.lanekit.serving.plugins.module_utils._boot._probes import stream_probe
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _store as store
from tests.unit.helpers.lane_fakes import action_module
from tests.unit.helpers.procfs import start_recorder, stop_recorder
from tests.unit.helpers.streamserver import start_server, stop_server

KV = ("2026-10-30T06:00:01.000000000Z ValueError: To serve at least one request with the model's max seq len "
      "(524288), the estimated maximum model length is 495296.")


@pytest.fixture
def api():
    srv = start_server()
    yield srv
    stop_server(srv)


def head_node(module_name, module_args, task_vars):
    """The head's rank_status running the watch's probe (its node side, the port check, is test_rank_status's)."""
    assert module_name == "lanekit.serving.rank_status" and module_args["containers"] == []
    spec = module_args["watch_probe"]
    return {"changed": False, "watch_probe": stream_probe(spec["url"], spec["model"], spec["deadline_s"],
                                                          spec["max_tokens"], module_args.get("api_key"))}


def run(args, delegate_to="head", node=head_node):
    # The playbook delegates the probing steps to the lane's head (plan.api.host).
    action = action_module(lane_watch.ActionModule, args)
    action._task.delegate_to = delegate_to
    action._execute_module = node
    return action.run(task_vars={"inventory_hostname": "spark-01"})


def watcher(api, tmp_path):
    plan = {"lane": "l", "engine": "vllm", "plan_hash": "a" * 64, "ranks": [], "reports_dir": str(tmp_path),
            "api": {"host": "head", "address": "127.0.0.1", "port": api.server_address[1], "served_model_name": "m"}}
    fast = {"plan": plan, "api_key": "k", "probes": 2, "gap_s": 0.0, "deadline_s": 0.5}

    def probe(mode, **extra):
        api.mode = mode
        result = run(dict(fast, mode="probe", **extra))
        assert not result.get("failed"), result.get("msg")
        return result

    def decide(probed, nodes=(), **budget):
        probe_arg = dict(probed["probe"], healthy=probed["healthy"], reason=probed["reason"])
        return run({"mode": "decide", "plan": plan, "probe": probe_arg, "nodes": list(nodes),
                    "node_results": budget.pop("node_results", deployed(plan)), **budget})

    return plan, fast, probe, decide


def deployed(plan, hosts=("head",)):
    """rank_status results of a lane the deploy started: every rank's container, labelled with this plan."""
    labels = {"io.lanekit.plan-hash": plan["plan_hash"]}
    return {host: {"containers": [{"name": f"c{i}", "exists": True, "running": True,
                                   "inspect": {"Config": {"Labels": labels}}}]} for i, host in enumerate(hosts)}


def outcomes(tmp_path):
    return [r.outcome for r in store.read(str(tmp_path))[0]]


def test_a_wedge_is_found_in_two_probes_restarted_once_and_healed(api, tmp_path):
    plan, fast, probe, decide = watcher(api, tmp_path)
    healthy = probe("stream")
    assert healthy["healthy"] and len(healthy["probes"]) == 1
    assert decide(healthy)["outcome"] == "healthy" and outcomes(tmp_path) == []

    wedged = probe("hang")
    assert not wedged["healthy"] and [p["error"] for p in wedged["probes"]] == ["no first token within 0.5 s"] * 2
    decided = decide(wedged)
    assert (decided["outcome"], decided["restart"]) == ("restarted", True)
    api.mode = "stream"
    healed = run(dict(fast, mode="verify", restarted_at=decided["restarted_at"]))
    assert healed["outcome"] == "healed" and healed["msg"].startswith("Lane l healed by the restart")
    # Recorded once the restart happened (issue 37): its result, not the decision.
    assert outcomes(tmp_path) == ["healed"]


def test_a_wedge_that_outlives_the_budget_is_reported_once_and_left(api, tmp_path):
    _plan, fast, probe, decide = watcher(api, tmp_path)
    wedged = probe("stall")
    assert not wedged["healthy"] and "3 tokens, then nothing" in wedged["reason"]

    def restart():
        decided = decide(wedged, backoff_s=0.0) if outcomes(tmp_path) else decide(wedged)
        assert decided["outcome"] == "restarted"
        # the restart play ran; the lane still stalls after it
        assert run(dict(fast, mode="verify", restarted_at=decided["restarted_at"]))["outcome"] == "restart-failed"

    restart()
    waiting = decide(wedged)
    assert (waiting["outcome"], waiting["restart"]) == ("backing-off", False)
    assert "back-off: restart 2 waits 300 s after restart 1" in waiting["msg"]
    restart()
    spent = decide(wedged, backoff_s=0.0, max_restarts=2)
    assert (spent["outcome"], spent["restart"]) == ("gave-up", False)
    assert "the restart budget is spent (2 restarts in the last 6 h, the budget is 2)" in spent["msg"]
    again = decide(wedged, backoff_s=0.0, max_restarts=2)
    assert again["outcome"] == "gave-up" and again["record"] is None
    assert outcomes(tmp_path) == ["restart-failed", "backing-off", "restart-failed", "gave-up"]


def test_a_cause_a_restart_cannot_fix_is_reported_not_restarted(api, tmp_path):
    _plan, _fast, probe, decide = watcher(api, tmp_path)
    nodes = [{"containers": [{"name": "c0", "exists": True, "rank": 0, "role": "head", "lines": [KV]}]}]
    decided = decide(probe("refuse"), nodes)
    assert (decided["outcome"], decided["restart"]) == ("not-restartable", False)
    record = store.read(str(tmp_path))[0][-1]
    assert record.cause.signature == "kv_budget_refused" and "495296" in record.cause.evidence


def test_a_restart_whose_boot_failed_is_recorded_with_its_cause(api, tmp_path):
    plan, _fast, _probe, _decide = watcher(api, tmp_path)
    wait = {"status": "failed", "culprits": [1], "bundle": "/r/b", "msg": "Lane l failed to boot",
            "signatures": [{"id": "stalled", "title": "no progress", "fix": "f", "ranks": [1]}], "ranks": []}
    result = run({"mode": "record", "plan": plan, "nodes": [{"changed": False}, wait]})
    assert result["outcome"] == "restart-failed"
    record = store.read(str(tmp_path))[0][-1]
    assert (record.cause.signature, record.cause.ranks, record.bundle) == ("stalled", [1], "/r/b")


def test_the_floors_come_from_the_ledger_and_a_slow_first_token_is_a_stall(api, tmp_path):
    _plan, _fast, probe, _decide = watcher(api, tmp_path)
    slow = probe("stream", ttft_max_s=0.0)
    assert not slow["healthy"] and slow["reason"].startswith("first token after ")
    assert slow["floors"]["source"] == "first token floor given"


def test_the_watch_probes_from_the_lanes_head_not_from_the_controller(tmp_path):
    # Issue 38, item 6: the key goes to the head over the Ansible connection, and from there to the head's own
    # API address; the controller itself opens no connection to the API.
    lane_api = start_recorder()
    try:
        plan = {"lane": "l", "engine": "vllm", "plan_hash": "a" * 64, "reports_dir": str(tmp_path),
                "api": {"host": "head", "address": "127.0.0.1", "port": lane_api.server_address[1],
                        "served_model_name": "m"},
                "ranks": [{"host": "head", "node_rank": 0, "role": "head", "container_name": "c0", "serves_api": True}]}
        calls = []

        def head(module_name, module_args, task_vars):
            calls.append((module_name, module_args))
            return {"watch_probe": {"url": module_args["watch_probe"]["url"], "ok": True, "ttft_s": 0.1, "tokens": 16,
                                    "tps": 50.0, "total_s": 0.4, "deadline_s": 60.0, "error": ""}}

        args = {"mode": "probe", "plan": plan, "api_key": "k", "probes": 1, "ttft_max_s": 5.0, "tps_min": 1.0}
        result = run(args, node=head)
        assert result["healthy"] and lane_api.seen == []
        assert [name for name, _margs in calls] == ["lanekit.serving.rank_status"]
        margs = calls[0][1]
        assert margs["api_key"] == "k" and margs["watch_probe"]["container"] == "c0"
        assert margs["watch_probe"]["url"] == f"http://127.0.0.1:{lane_api.server_address[1]}"
        local = run(args, delegate_to="localhost", node=head)
        assert local["failed"] and "from the lane's head head" in local["msg"]
        assert len(calls) == 1 and lane_api.seen == []
    finally:
        stop_recorder(lane_api)


# Issue 37: the watch heals only what it deployed. Before: a lane never deployed (its API answering 404,
# no rank container on the nodes) was "wedged ... restarting it (restart 1 of 3)", and the ledger said
# "restarted" before anything happened.

@pytest.mark.parametrize("node_results, probe_extra, words", [
    ({"head": {"containers": [{"name": "c0", "exists": False}]}}, {}, "the lane is not deployed: c0 on head does not exist"),
    ({"head": {"unreachable": True, "msg": "ssh: connect to host head port 22: No route to host"}}, {},
     "head did not answer (unreachable)"),
    ({}, {"unreachable": True, "reason": "Failed to connect to the host via ssh"}, "the lane's head head did not answer"),
    ({"head": {"containers": [{"name": "c0", "exists": True, "running": True,
                               "inspect": {"Config": {"Labels": {"io.lanekit.plan-hash": "b" * 64}}}}]}}, {},
     "the ranks run another plan"),
])
def test_a_lane_the_watch_did_not_deploy_is_left_for_a_person_and_nothing_is_recorded_as_restarted(
        api, tmp_path, node_results, probe_extra, words):
    _plan, _fast, probe, decide = watcher(api, tmp_path)
    wedged = probe("hang")
    wedged["probe"].update(probe_extra)
    decided = decide(wedged, node_results=node_results)
    assert (decided["outcome"], decided["restart"]) == ("not-restartable", False), decided["msg"]
    assert words in decided["msg"] and "Left for a person" in decided["msg"]
    assert "restarting" not in decided["msg"]
    assert outcomes(tmp_path) == ["not-restartable"]


def test_an_api_answering_404_is_not_this_lanes_engine(api, tmp_path):
    _plan, _fast, probe, decide = watcher(api, tmp_path)
    wedged = probe("hang")
    wedged["probe"]["error"] = "the chat completion answered HTTP 404"
    decided = decide(wedged)
    assert decided["outcome"] == "not-restartable" and "answers HTTP 404" in decided["msg"]
