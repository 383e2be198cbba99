"""Issue 26: the watch's budget arithmetic, floors and decisions (_ledger/_watch.py)."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _signatures as sigs
from ansible_collections.lanekit.serving.plugins.module_utils._boot._metrics import engine_generated_tokens
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _record as rec
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _watch as watch

H = 3600.0
T0 = 1_796_000_000.0
PLAN = {"lane": "l", "engine": "vllm", "plan_hash": "a" * 64, "ranks": []}
BUDGET = watch.Budget(max_restarts=3, window_s=6 * H, backoff_s=300.0)


def test_the_first_restart_is_allowed_at_once():
    state = watch.budget_state([], T0, BUDGET)
    assert (state.allowed, state.used, state.left, state.next_at) == (True, 0, 3, None)
    assert state.reason == "restart 1 of 3 in 6 h"


@pytest.mark.parametrize("restarts, now, allowed, next_at", [
    ([T0], T0 + 299, False, T0 + 300),              # back-off after restart 1: 300 s
    ([T0], T0 + 300, True, None),
    ([T0, T0 + 300], T0 + 300 + 599, False, T0 + 900),   # after restart 2: 600 s
    ([T0, T0 + 300], T0 + 900, True, None),
])
def test_the_back_off_doubles_per_restart_in_the_window(restarts, now, allowed, next_at):
    state = watch.budget_state(restarts, now, BUDGET)
    assert (state.allowed, state.next_at, state.exhausted) == (allowed, next_at, False)


def test_a_spent_budget_frees_a_restart_when_the_oldest_leaves_the_window():
    restarts = [T0, T0 + 1 * H, T0 + 2 * H]
    spent = watch.budget_state(restarts, T0 + 3 * H, BUDGET)
    assert (spent.allowed, spent.exhausted, spent.left, spent.next_at) == (False, True, 0, T0 + 6 * H)
    assert spent.reason == "3 restarts in the last 6 h, the budget is 3"
    later = watch.budget_state(restarts, T0 + 6 * H, BUDGET)  # the first one aged out; back-off of 600 s is long past
    assert (later.allowed, later.used) == (True, 2)


def test_a_budget_of_no_restarts_is_spent_from_the_start():
    state = watch.budget_state([], T0, watch.Budget(max_restarts=0))
    assert (state.allowed, state.exhausted, state.next_at) == (False, True, None)
    assert watch.decide(False, [], state).outcome == "gave-up"


def test_only_the_watchs_restarts_count():
    records = [rec.new_record("watch", "restarted", PLAN, None, T0),
               rec.new_record("deploy", "ready", PLAN, None, T0 + 10),
               rec.new_record("watch", "healed", PLAN, None, T0 + 20)]
    assert watch.restart_times(records) == [T0]


def test_floors_come_from_the_ready_probe_and_the_last_valid_bench():
    records = [rec.new_record("deploy", "ready", PLAN, None, T0, probe={"ttft_s": 0.8}),
               rec.new_record("bench", "valid", PLAN, None, T0 + 1, bench={"valid": True, "tg_tps": 24.8}),
               rec.new_record("bench", "invalid", PLAN, None, T0 + 2, bench={"valid": False, "tg_tps": 2.0})]
    for i, r in enumerate(records, 1):
        r.boot = i
    floor = watch.floors(records)
    assert (floor.ttft_max_s, floor.tps_min) == (8.0, 2.48)
    assert floor.source == "first token 0.8 s at record 1 x 10; decode 24.8 tok/s at bench record 2 x 0.1"
    assert watch.floors(records[:1], ttft_min_s=5.0).ttft_max_s == 8.0
    assert watch.floors([]).ttft_max_s == 30.0 and watch.floors([]).tps_min is None
    assert watch.floors(records, ttft_max_s=2.0, tps_min=1.0).source == "first token floor given; tokens/s floor given"


def test_a_probe_is_judged_by_its_deadline_first_token_and_rate():
    floor = watch.Floors(ttft_max_s=8.0, tps_min=2.5, source="s")
    assert watch.judge({"ok": True, "ttft_s": 0.3, "tps": 20.0}, floor) == (True, "")
    assert watch.judge({"ok": False, "error": "no first token within 60 s"}, floor) == (
        False, "no first token within 60 s")
    assert watch.judge({"ok": True, "ttft_s": 9.0, "tps": 20.0}, floor)[1].startswith("first token after 9.0 s")
    assert watch.judge({"ok": True, "ttft_s": 0.3, "tps": 1.0}, floor)[1] == "1.00 tokens/s, the floor is 2.5 (s)"


def test_decisions():
    allowed = watch.budget_state([], T0, BUDGET)
    spent = watch.budget_state([T0, T0 + 1, T0 + 2], T0 + 3, BUDGET)
    waiting = watch.budget_state([T0], T0 + 10, BUDGET)
    kv = sigs.collect({0: {"kv_budget_refused": "estimated maximum model length is 495296"}})[0].to_dict()
    nccl = {"id": "nccl_watchdog_timeout", "title": "t", "fix": "f"}
    assert watch.decide(True, [], spent).outcome == "healthy"
    restart = watch.decide(False, [nccl], allowed)
    assert (restart.outcome, restart.restart) == ("restarted", True)
    blocked = watch.decide(False, [nccl, kv], allowed)
    assert (blocked.outcome, blocked.restart) == ("not-restartable", False)
    assert blocked.reason.startswith("kv_budget_refused: ") and "fix: " in blocked.reason
    assert watch.decide(False, [], spent).outcome == "gave-up"
    assert watch.decide(False, [], waiting).outcome == "backing-off"


def test_every_signature_a_restart_cannot_fix_exists():
    for sid in watch.RESTART_CANNOT_FIX:
        assert sigs.get(sid).id == sid


def test_a_repeated_report_is_recorded_once_and_a_healthy_probe_never():
    gave_up = rec.new_record("watch", "gave-up", PLAN, None, T0)
    assert not watch.worth_recording([], "healthy")
    assert watch.worth_recording([], "gave-up")
    assert not watch.worth_recording([gave_up], "gave-up")
    assert watch.worth_recording([gave_up, rec.new_record("deploy", "ready", PLAN, None, T0 + 1)], "gave-up")
    assert watch.worth_recording([gave_up], "restarted")


def test_signatures_are_read_from_the_nodes_rank_logs():
    line = ("2026-10-30T06:00:01.000000000Z ValueError: To serve at least one request with the model's max seq len "
            "(524288), the estimated maximum model length is 495296.")
    nodes = [{"containers": [{"name": "c0", "exists": True, "rank": 0, "role": "head", "lines": [line]}]},
             {"containers": [{"name": "c1", "exists": False, "rank": 1}]}, {"unreachable": True}]
    found = watch.signatures_of(nodes, "vllm")
    assert [(s["id"], s["ranks"]) for s in found] == [("kv_budget_refused", [0])]


# --- issue 38, item 5: a slow lane that makes progress is never restarted -----------------------------------

FLOOR = watch.Floors(ttft_max_s=5.0, tps_min=2.5, source="s")
NOTHING = {"ok": False, "ttft_s": None, "tokens": 0, "tps": None, "total_s": 60.0, "deadline_s": 60.0,
           "error": "no first token within 60 s"}


@pytest.mark.parametrize("probe, words", [
    # The reproduction: a 6.2 s first token while tokens flowed.
    ({"ok": True, "ttft_s": 6.2, "tokens": 16, "tps": 9.0, "total_s": 7.9, "deadline_s": 60.0, "error": ""},
     "16 tokens streamed, the first after 6.2 s"),
    # A rate under a tenth of the bench's.
    ({"ok": True, "ttft_s": 0.4, "tokens": 16, "tps": 0.9, "total_s": 17.1, "deadline_s": 60.0, "error": ""},
     "16 tokens streamed, the first after 0.4 s"),
    # So slow that the deadline came while tokens still came (the last one 1.5 s before it).
    ({"ok": False, "ttft_s": 41.0, "tokens": 5, "tps": 0.23, "total_s": 60.9, "deadline_s": 60.0,
      "error": "5 tokens, then nothing until the deadline of 60 s"},
     "5 tokens streamed, the first after 41 s, still coming at the deadline"),
])
def test_a_loaded_lane_whose_stream_still_produces_tokens_is_slow_not_wedged(probe, words):
    found = watch.verdict([NOTHING, probe], FLOOR)
    assert (found.state, found.progress) == ("slow", words)
    assert found.reason
    allowed = watch.budget_state([], T0, BUDGET)
    decision = watch.decide(False, [], allowed, found.progress)
    assert (decision.outcome, decision.restart) == ("slow", False)
    assert decision.reason.startswith(f"it makes progress ({words})")


def test_no_token_within_the_deadline_or_tokens_that_stopped_is_a_wedge():
    stalled = {"ok": False, "ttft_s": 0.1, "tokens": 3, "tps": 100.0, "total_s": 60.2, "deadline_s": 60.0,
               "error": "3 tokens, then nothing until the deadline of 60 s"}
    refused = {"ok": False, "ttft_s": None, "tokens": 0, "tps": None, "total_s": 0.01, "deadline_s": 60.0,
               "error": "the chat completion answered HTTP 503"}
    for probes in ([NOTHING, NOTHING], [stalled, NOTHING], [refused]):
        found = watch.verdict(probes, FLOOR)
        assert (found.state, found.progress) == ("wedged", ""), probes
        assert watch.decide(False, [], watch.budget_state([], T0, BUDGET), found.progress).restart
    assert watch.verdict([NOTHING, {"ok": True, "ttft_s": 0.3, "tokens": 16, "tps": 20.0}], FLOOR).state == "healthy"


def test_the_engine_counter_advancing_while_the_probe_waits_in_its_queue_is_progress():
    # A saturated lane may queue the probe past its deadline: the engine's generated-token counter, read
    # before and after each probe, still shows it working for its other clients.
    working = [dict(NOTHING, engine_tokens_before=1000.0, engine_tokens_after=4000.0),
               dict(NOTHING, engine_tokens_before=4500.0, engine_tokens_after=9000.0)]
    found = watch.verdict(working, FLOOR)
    assert (found.state, found.progress) == (
        "slow", "the engine generated 8000 tokens for other requests during the probes")
    idle = [dict(NOTHING, engine_tokens_before=1000.0, engine_tokens_after=1000.0),
            dict(NOTHING, engine_tokens_before=1000.0, engine_tokens_after=1000.0)]
    assert watch.verdict(idle, FLOOR).state == "wedged"
    # A counter that went down (an engine restarted by someone) is not progress by itself.
    assert watch.verdict([dict(NOTHING, engine_tokens_before=500.0, engine_tokens_after=20.0)], FLOOR).state == "wedged"
    assert watch.verdict([dict(NOTHING, engine_tokens_before="many", engine_tokens_after=[1])], FLOOR).state == "wedged"


def test_the_counter_must_rise_by_more_than_the_probes_could_have_generated_themselves():
    # A stream that stopped after 3 chunks may have cost the engine up to its max_tokens (a chunk can carry
    # several tokens: speculative decoding): its own tokens are no other client's progress.
    stalled = {"ok": False, "ttft_s": 0.1, "last_token_s": 0.2, "tokens": 3, "tps": 20.0, "total_s": 60.2,
               "deadline_s": 60.0, "max_tokens": 16, "error": "3 tokens, then nothing until the deadline of 60 s",
               "engine_tokens_before": 1000.0, "engine_tokens_after": 1012.0}
    assert watch.verdict([stalled], FLOOR).state == "wedged"
    busy = watch.verdict([dict(stalled, engine_tokens_after=1500.0)], FLOOR)
    assert (busy.state, busy.progress) == ("slow", "the engine generated 484 tokens for other requests during the "
                                                   "probes")


def test_the_engines_generated_token_counter_is_read_from_its_metrics():
    vllm = ("# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
            "# TYPE vllm:generation_tokens_total counter\n"
            'vllm:generation_tokens_total{engine="0",model_name="m"} 1234.0\n'
            'vllm:generation_tokens_total{engine="1",model_name="m"} 66.0\n'
            'vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e9\n'
            'vllm:prompt_tokens_total{engine="0",model_name="m"} 99999.0\n')
    assert engine_generated_tokens(vllm) == 1300.0
    assert engine_generated_tokens('sglang:generation_tokens_total{model_name="m"} 42\n') == 42.0
    assert engine_generated_tokens("up 1\n") is None and engine_generated_tokens("") is None


def test_a_slow_lane_is_reported_once_per_streak():
    slow = rec.new_record("watch", "slow", PLAN, None, T0)
    assert watch.worth_recording([], "slow") and not watch.worth_recording([slow], "slow")
    assert "slow" in watch.WELL and "slow" in watch.OUTCOMES


def test_figures_of_the_wrong_type_in_a_record_or_a_probe_are_no_floor_and_no_crash():
    # Issue 38, item 8: a ready probe whose ttft_s is text sets no floor (the record is kept as built in memory).
    poisoned = rec.LedgerRecord(event="deploy", outcome="ready", lane="l", time="", epoch=T0, boot=1,
                                probe={"ttft_s": "fast"})
    bench = rec.LedgerRecord(event="bench", outcome="valid", lane="l", time="", epoch=T0, boot=2,
                             bench={"valid": True, "tg_tps": "many"})
    floor = watch.floors([poisoned, bench])
    assert (floor.ttft_max_s, floor.tps_min) == (30.0, None)
    assert watch.judge({"ok": True, "ttft_s": "fast", "tps": "many"}, FLOOR)[0] is False
    assert watch.verdict([{"ok": True, "ttft_s": "fast", "tokens": "16"}], FLOOR).state == "wedged"
