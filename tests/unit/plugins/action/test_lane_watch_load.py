# Copyright: lanekit developers
# Apache-2.0
"""Issue 38, items 5 and 8: lane_watch restarts nothing while a loaded lane still streams tokens (a lane under
its floors that makes progress is slow: reported once, never restarted), and a poisoned ledger line is skipped
with a warning instead of failing every later watch."""
from __future__ import annotations

import json

import pytest

from ansible_collections.lanekit.serving.plugins.action import lane_watch
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _record as rec
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _store as store
from tests.unit.helpers.lane_fakes import action_module
from tests.unit.helpers.streamserver import start_server, stop_server, vllm_metrics

# What the probe returns of a lane a flood of clients keeps busy: tokens, late and slow (the 6.2 s).
LOADED = {"ok": True, "ttft_s": 6.2, "tokens": 16, "tps": 3.1, "total_s": 11.0, "deadline_s": 60.0, "error": "",
          "url": "http://127.0.0.1:8000", "healthy": False,
          "reason": "first token after 6.2 s, the floor is 5 s (first token 0.4 s at record 1 x 10)"}
STILL_COMING = dict(LOADED, ok=False, ttft_s=38.0, tokens=6, tps=0.25, total_s=60.4,
                    error="6 tokens, then nothing until the deadline of 60 s",
                    reason="6 tokens, then nothing until the deadline of 60 s")
WEDGED = dict(LOADED, ok=False, ttft_s=None, tokens=0, tps=None, total_s=60.0, error="no first token within 60 s",
              reason="no first token within 60 s")


@pytest.fixture
def api():
    srv = start_server()
    yield srv
    stop_server(srv)


def head_node(module_name, module_args, task_vars):
    """The lane's head running the probe, for a watch that probes from the head (the module's side is tested there)."""
    from ansible_collections.lanekit.serving.plugins.module_utils._boot._probes import stream_probe
    spec = module_args["watch_probe"]
    return {"changed": False, "watch_probe": stream_probe(spec["url"], spec["model"], spec["deadline_s"],
                                                          spec["max_tokens"], module_args.get("api_key"))}


def run(args):
    action = action_module(lane_watch.ActionModule, args)
    # The playbook runs the probing steps on the lane's head (plan.api.host); a watch that probes from the
    # controller ignores both.
    action._task.delegate_to = "head"
    action._execute_module = head_node
    return action.run(task_vars={"inventory_hostname": "head"})


def lane(tmp_path, port=8000):
    return {"lane": "l", "engine": "vllm", "plan_hash": "a" * 64, "reports_dir": str(tmp_path),
            "api": {"host": "head", "address": "127.0.0.1", "port": port, "served_model_name": "m"},
            "ranks": [{"host": "head", "node_rank": 0, "role": "head", "container_name": "c0"}]}


def decide(plan, probe, **extra):
    labels = {"io.lanekit.plan-hash": plan["plan_hash"]}
    deployed = {"head": {"containers": [{"name": "c0", "exists": True, "running": True,
                                         "inspect": {"Config": {"Labels": labels}}}]}}
    result = run({"mode": "decide", "plan": plan, "probe": probe, "nodes": [], "node_results": deployed, **extra})
    assert not result.get("failed"), result.get("msg")
    return result


def test_a_watch_restarts_nothing_while_a_loaded_lane_still_streams_tokens(tmp_path):
    plan = lane(tmp_path)
    for probe in (LOADED, STILL_COMING):
        decided = decide(plan, probe)
        assert (decided["outcome"], decided["restart"]) == ("slow", False), decided["msg"]
        assert "is slow" in decided["msg"] and "makes progress" in decided["msg"]
    # Reported once however often the timer fires, and no restart is spent from the budget.
    assert [r.outcome for r in store.read(str(tmp_path))[0]] == ["slow"]
    assert store.read(str(tmp_path))[0][0].probe["ttft_s"] == 6.2
    # A lane that gives no token at all within the deadline is still restarted.
    wedged = decide(plan, WEDGED)
    assert (wedged["outcome"], wedged["restart"]) == ("restarted", True)


def test_the_probes_of_a_lane_under_its_floors_that_streams_tokens_say_slow_and_decide_agrees(api, tmp_path):
    plan = lane(tmp_path, api.server_address[1])
    # A first-token floor no answer meets stands for a lane loaded past its floors: tokens still stream.
    probed = run({"mode": "probe", "plan": plan, "api_key": "k", "probes": 2, "gap_s": 0.0, "deadline_s": 5.0,
                  "ttft_max_s": 0.0})
    assert not probed.get("failed"), probed.get("msg")
    assert not probed["healthy"] and probed["verdict"] == "slow"
    assert probed["progress"].startswith("5 tokens streamed") and probed["probe"]["progress"] == probed["progress"]
    assert "slow but making progress" in probed["msg"]
    decided = decide(plan, dict(probed["probe"], healthy=probed["healthy"], reason=probed["reason"]))
    assert (decided["outcome"], decided["restart"]) == ("slow", False)


def test_a_lane_whose_engine_counter_advances_while_the_probes_get_no_token_is_slow_and_not_restarted(api, tmp_path):
    plan = lane(tmp_path, api.server_address[1])
    # A flood of clients keeps the engine busy: each probe waits in its queue past its deadline and gets no
    # token, while the engine's counter (its open /metrics) counts the others' tokens: 400 between two reads.
    api.mode, api.metrics, api.load = "hang", vllm_metrics, 400
    probed = run({"mode": "probe", "plan": plan, "api_key": "k", "probes": 2, "gap_s": 0.0, "deadline_s": 0.5})
    assert not probed.get("failed"), probed.get("msg")
    assert [(p["tokens"], p["ok"]) for p in probed["probes"]] == [(0, False), (0, False)]
    # Four reads, 400 to 1600: 1200 tokens, less the most the two probes could have cost (16 each).
    assert probed["verdict"] == "slow"
    assert probed["progress"] == "the engine generated 1168 tokens for other requests during the probes"
    assert [auth for method, _path, auth in api.seen if method == "GET"] == [None] * 4
    decided = decide(plan, dict(probed["probe"], healthy=probed["healthy"], reason=probed["reason"]))
    assert (decided["outcome"], decided["restart"]) == ("slow", False), decided["msg"]
    kept = store.read(str(tmp_path))[0][-1].probe
    assert (kept["engine_tokens_before"], kept["engine_tokens_after"], kept["last_token_s"]) == (1200.0, 1600.0, None)
    # The same silence with an idle counter is a wedge: restarted.
    api.load = 0
    idle = run({"mode": "probe", "plan": plan, "api_key": "k", "probes": 2, "gap_s": 0.0, "deadline_s": 0.5})
    assert (idle["verdict"], idle["progress"]) == ("wedged", "")
    decided = decide(plan, dict(idle["probe"], healthy=idle["healthy"], reason=idle["reason"]))
    assert (decided["outcome"], decided["restart"]) == ("restarted", True)


def test_a_poisoned_ledger_line_is_skipped_with_a_warning_and_the_watch_still_decides(tmp_path):
    plan = lane(tmp_path)
    good = rec.new_record("deploy", "ready", plan, None, 1_796_000_000.0, probe={"ttft_s": 0.4}).to_dict()
    bad_ttft = dict(good, probe={"ttft_s": "fast"})
    bad_epoch = dict(good, epoch="yesterday")
    (tmp_path / "ledger.jsonl").write_text("".join(json.dumps(d) + "\n" for d in (good, bad_ttft, bad_epoch)))
    decided = decide(plan, WEDGED)
    assert decided["outcome"] == "restarted"
    warnings = decided["ledger_warnings"]
    assert [w.split(" was left out")[0] for w in warnings] == [f"{tmp_path}/ledger.jsonl line {n}" for n in (2, 3)]
    assert "probe.ttft_s is 'fast' (text), not a number" in warnings[0]
