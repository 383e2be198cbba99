"""Issue 26: one ledger record per deploy, failure, teardown, bench and watch step (_ledger/_record.py)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._bootconfig import BootConfig
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._tracker import LaneTracker
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _record as rec
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._types import BadRecord
from tests.unit.helpers.plans import plan
from tests.unit.helpers.ranklogs import fixture_lines, make_status

NOW = 1_796_000_000.0  # 2026-11-30


def _plan(**kwargs):
    built, findings = plan(purpose="plan", **kwargs)
    assert built is not None, findings
    return json.loads(json.dumps(built))


def test_changed_keys_name_what_moved_not_just_two_hashes():
    old = _plan()
    new = _plan(group_overrides={"serve": {"args": {"--max-num-seqs": 64}}},
                host_overrides={"spark-03": {"serve": {"env": {"NCCL_DEBUG": "INFO"}}}})
    keys, lines = rec.changes_since(old, new)
    assert keys == ["argv --max-num-seqs", "env NCCL_DEBUG"]
    assert lines == ["ranks 0-7 argv --max-num-seqs: 128 -> 64", "rank 2 env NCCL_DEBUG: unset -> INFO"]


def test_no_previous_plan_the_same_plan_and_a_record_without_a_plan():
    same = _plan()
    assert rec.changes_since(None, same) == ([], ["no previous plan in the ledger"])
    assert rec.changes_since(same, same) == ([], [])
    assert rec.changes_since(same, {"lane": same["lane"]}) == ([], [])


def test_a_ready_deploy_keeps_phases_milestones_images_weights_and_the_ready_probe():
    the_plan = _plan()
    head = make_status(0, fixture_lines("vllm-head.log"))
    wait = {"status": "ready", "boot_s": 754.2, "ranks": [head.to_dict()], "ended_at": rec.epoch_of("2026-11-30T00:19:00Z"),
            "api": {"url": "http://10.100.0.11:8000", "ttft_s": 0.31}}
    marks = {"image": "2026-11-30T00:00:00Z", "weights": "2026-11-30T00:01:00.5Z", "ready": "2026-11-30T00:05:00Z"}
    record = rec.deploy_record(the_plan, None, rec.epoch_of("2026-11-30T00:20:00Z"), marks=marks, wait=wait)
    assert (record.event, record.outcome, record.boot_s, record.cause) == ("deploy", "ready", 754.2, None)
    assert record.phases == {"image": 60.5, "weights": 239.5, "ready": 900.0}
    assert record.images == {f"spark-{i:02d}": the_plan["image"]["ref"] for i in range(1, 9)}
    assert record.weights["manifest"] == f"{the_plan['weights']['model_id']}@unpinned"
    assert record.probe == {"ttft_s": 0.31, "url": "http://10.100.0.11:8000"}
    (rank,) = record.ranks
    # Milestones in the order the log showed them, seconds after the container started.
    assert list(rank.milestones) == sorted(rank.milestones, key=rank.milestones.get)
    assert {"rendezvous", "loading", "ready"} <= set(rank.milestones)
    assert rank.milestones["loading"] < rank.milestones["ready"] <= rank.end_s
    assert rank.failed is False and rank.exit_code is None
    # Placed on the deploy's clock: the wait's last poll (19 min after the image phase began) less its age.
    assert rank.start_s == round(19 * 60 - head.started_age_s, 1)
    # A line of JSON and back.
    assert rec.LedgerRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record


def test_a_failed_boot_keeps_the_signature_the_evidence_line_the_fix_and_the_bundle():
    head = fixture_lines("vllm-head.log")[:40]
    kv = (head[-1][:31] + "ValueError: To serve at least one request with the model's max seq len (524288), "
          "(25.01 GiB KV cache is needed, which is larger than the available KV cache memory (23.63 GiB). Based on "
          "the available memory, the estimated maximum model length is 495296.")
    statuses = {0: make_status(0, [*head, kv], state="exited", exit_code=1),
                1: make_status(1, fixture_lines("vllm-worker.log")[:30])}
    tracker = LaneTracker("lane", "vllm", rec_config(), {0: "spark-01", 1: "spark-02"})
    verdict = tracker.update(1.0, statuses)
    verdict = verdict if verdict.done else tracker.update(2.0, statuses)
    failed = {"failed": True, "status": "failed", "bundle": "/r/lane/20261130T000000Z", "culprits": verdict.culprits,
              "signatures": [m.to_dict() for m in verdict.matches], "ranks": [s.to_dict() for s in statuses.values()],
              "msg": "Lane lane failed to boot"}
    record = rec.deploy_record(_plan(), None, NOW, wait=failed, failed=failed, failed_task="ready: Wait until the lane serves")
    first = verdict.matches[0].to_dict()
    assert record.outcome == "failed"
    assert (record.cause.signature, record.cause.fix) == (first["id"], first["fix"])
    assert first["id"] == "kv_budget_refused"
    assert record.cause.evidence == first["evidence"] and "estimated maximum model length is 495296" in first["evidence"]
    assert record.cause.ranks == verdict.culprits
    assert record.bundle == "/r/lane/20261130T000000Z" and record.note == "failed at: ready: Wait until the lane serves"
    assert [r.failed for r in record.ranks] == [r in verdict.culprits for r in (0, 1)]
    assert record.ranks[0].exit_code == 1 and record.ranks[0].failed


def rec_config():
    return BootConfig(poll_s=1.0)


def test_a_phase_that_failed_without_signatures_keeps_its_task_and_first_line():
    record = rec.deploy_record(_plan(), None, NOW, failed_task="image: Prove the image runs",
                               failed={"failed": True, "msg": "docker load returned 1\nmore"})
    assert record.outcome == "failed"
    assert record.cause == rec.Cause(title="image: Prove the image runs: docker load returned 1")


def test_an_already_serving_deploy_ran_no_phase_and_one_without_the_ready_phase_is_done():
    record = rec.deploy_record(_plan(), None, NOW, serving=True)
    assert (record.outcome, record.phases, record.ranks) == ("serving", {}, [])
    tagged = rec.deploy_record(_plan(), None, NOW, marks={"image": rec.iso(NOW - 60)})
    assert (tagged.outcome, tagged.phases) == ("done", {"image": 60.0})


def test_a_record_of_an_unknown_event_is_refused():
    with pytest.raises(ValueError, match="ledger event 'boot' is not one of deploy, teardown, bench, watch"):
        rec.new_record("boot", "ready", _plan(), None, NOW)


def test_the_bench_summary_is_the_single_stream_row_at_the_lowest_depth():
    report = {"valid": True, "problems": [], "throughput": [
        {"depth": 4096, "concurrency": 1, "tg_tps": 20.0, "pp_tps": 900},
        {"depth": 0, "concurrency": 2, "tg_tps": 33.0, "pp_tps": 837},
        {"depth": 0, "concurrency": 1, "tg_tps": 24.8, "pp_tps": 1069, "ttft_ms": None}]}
    summary = rec.bench_summary(report)
    assert (summary["tg_tps"], summary["pp_tps"], summary["depth"], summary["valid"]) == (24.8, 1069, 0, True)
    assert rec.bench_summary(None) is None


def test_iso_times_round_trip_and_bad_ones_are_none():
    assert rec.epoch_of(rec.iso(NOW)) == NOW
    assert rec.epoch_of("2026-11-30T00:00:00.25Z") == rec.epoch_of("2026-11-30T00:00:00Z") + 0.25
    assert rec.epoch_of("yesterday") is None and rec.epoch_of(None) is None


def test_a_deploy_keeps_the_fabric_result_and_says_whether_it_was_measured_for_this_plan():
    spark = _plan()
    report = {"plan_hash": spark["plan_hash"], "image": "img@sha256:1", "nccl_version": "2.27.7",
              "measured_at": "2026-12-02T05:00:00Z",
              "verdict": {"status": "below_floor", "gate": "strict", "headline": {"op": "all_gather", "busbw": 9.1},
                          "transport": "", "transport_used": "NET/IB"}}
    record = rec.deploy_record(spark, None, NOW, serving=True, fabric=report)
    assert record.fabric == {"status": "below_floor", "gate": "strict", "headline": {"op": "all_gather", "busbw": 9.1},
                             "transport": "NET/IB", "image": "img@sha256:1", "nccl_version": "2.27.7",
                             "measured_at": "2026-12-02T05:00:00Z", "this_plan": True}
    older = rec.deploy_record(spark, None, NOW, serving=True, fabric=dict(report, plan_hash="other"))
    assert older.fabric is not None and older.fabric["this_plan"] is False
    assert rec.deploy_record(spark, None, NOW, serving=True, fabric={"no": "verdict"}).fabric is None


# --- issue 38, item 11: key-like values are never shown in the ledger's changes -----------------------------

HF = "hf_" + "Q7w" * 12


def test_key_like_values_are_redacted_in_changes_and_still_say_they_changed():
    old = _plan()
    new = _plan(group_overrides={"serve": {"args": {"--hf-token": HF, "--max-num-batched-tokens": 16384},
                                           "env": {"DB_PASSWORD": "hunter2", "NCCL_DEBUG": "INFO"}}})
    newer = _plan(group_overrides={"serve": {"args": {"--hf-token": HF + "b"}, "env": {"DB_PASSWORD": "hunter3"}}})
    keys, came = rec.changes_since(old, new)
    _keys, moved = rec.changes_since(new, newer)
    text = json.dumps([came, moved])
    assert HF not in text and "hunter" not in text
    assert "argv --hf-token" in keys and "env DB_PASSWORD" in keys
    assert "ranks 0-7 argv --hf-token: unset -> ********" in came
    assert "ranks 0-7 env DB_PASSWORD: ******** -> ******** (changed)" in moved
    # Tuning is no secret: a person sees what it became.
    assert "ranks 0-7 argv --max-num-batched-tokens: 8192 -> 16384" in came
    assert "ranks 0-7 env NCCL_DEBUG: INFO -> unset" in moved


def test_a_ledger_written_before_redaction_is_read_back_redacted():
    record = rec.new_record("deploy", "ready", _plan(), None, NOW).to_dict()
    record["changes"] = ["rank 2 env HF_TOKEN: unset -> secret-value", "ranks 0-7 argv --api-key: k1 -> k2",
                         f"ranks 0-7 argv --model-loader-extra-config: a -> {HF}", "rank 1 env NCCL_DEBUG: WARN -> INFO"]
    back = rec.LedgerRecord.from_dict(json.loads(json.dumps(record)))
    assert back.changes == ["rank 2 env HF_TOKEN: unset -> ********",
                            "ranks 0-7 argv --api-key: ******** -> ******** (changed)",
                            "ranks 0-7 argv --model-loader-extra-config: ******** -> ******** (changed)",
                            "rank 1 env NCCL_DEBUG: WARN -> INFO"]
    assert rec.LedgerRecord.from_dict(back.to_dict()) == back


# --- issue 38, item 8: what a node returns is type-checked; a bad line is refused on reading ----------------

def test_what_a_node_returns_is_type_checked_before_it_is_recorded():
    # A head (or a node posing as one) returns text where numbers belong: the record leaves those values out and
    # says so, and the line reads back, so no later render or watch trips on it.
    wait = {"status": "ready", "boot_s": "fast", "ended_at": "now", "culprits": "0",
            "api": {"url": "http://10.0.0.1:8000", "ttft_s": "fast"},
            "ranks": [{"rank": "zero", "host": "a"}, {"rank": 1, "host": "b", "started_age_s": "x",
                                                      "phases_age_s": ["loading"], "exit_code": "1"}]}
    record = rec.deploy_record(_plan(), None, NOW, wait=wait, marks={"ready": rec.iso(NOW - 5)})
    assert record.probe == {"ttft_s": None, "url": "http://10.0.0.1:8000"} and record.boot_s is None
    assert [r.rank for r in record.ranks] == [1] and record.ranks[0].milestones == {}
    assert "probe.ttft_s is 'fast' (text), not a number" in record.note
    assert "boot_s is 'fast' (text), not a number" in record.note
    back = rec.LedgerRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert back == record
    bench = rec.bench_summary({"valid": True, "problems": "many", "throughput": [
        {"depth": "deep", "concurrency": "one", "tg_tps": "fast"}]})
    benched = rec.new_record("bench", "valid", _plan(), None, NOW, bench=bench)
    assert benched.bench["tg_tps"] is None and benched.bench["problems"] == []
    watched = rec.new_record("watch", "restarted", _plan(), None, NOW, probe={"ok": "yes", "tokens": [1], "tps": 2.5})
    assert (watched.probe["ok"], watched.probe["tokens"], watched.probe["tps"]) == (None, None, 2.5)
    # The engine's counter a head returned goes into the ledger as numbers, or not at all (issue 38, item 5).
    counted = rec.new_record("watch", "slow", _plan(), None, NOW, probe={
        "engine_tokens_before": "lots", "engine_tokens_after": 1600.0, "last_token_s": [2], "max_tokens": 16.5})
    assert counted.probe == {"engine_tokens_before": None, "engine_tokens_after": 1600.0, "last_token_s": None,
                             "max_tokens": None}
    assert "probe.engine_tokens_before is 'lots' (text), not a number" in counted.note
    assert rec.cause_of({"signatures": [{"id": "x"}], "culprits": ["r1", 2]}).ranks == [2]


@pytest.mark.parametrize("field, value, words", [
    ("epoch", "yesterday", "epoch is 'yesterday' (text), not a number"),
    ("probe", {"ttft_s": "fast"}, "probe.ttft_s is 'fast' (text), not a number"),
    ("bench", {"tg_tps": [24.8]}, "bench.tg_tps is [24.8] (a list), not a number"),
    ("images", ["spark-01"], "images is [\"spark-01\"] (a list), not a mapping of text"),
    ("changes", "argv --x: 1 -> 2", "changes is 'argv --x: 1 -> 2' (text), not a list of text"),
    ("cause", ["kv"], "cause is [\"kv\"] (a list), not a mapping"),
    ("ranks", [{"host": "a"}], "ranks[0] is {\"host\": \"a\"} (a mapping), not a rank"),
    ("ranks", [{"rank": 0, "milestones": {"ready": "late"}}], "ranks[0].milestones is"),
    ("boot", "7", "boot is '7' (text), not a whole number"),
    ("boot_s", True, "boot_s is true (true/false), not a number"),
    ("outcome", 3, "outcome is 3 (a number), not text"),
])
def test_a_line_whose_field_is_of_the_wrong_type_is_refused_in_a_sentence(field, value, words):
    line = dict(rec.new_record("deploy", "ready", _plan(), None, NOW).to_dict(), **{field: value})
    with pytest.raises(BadRecord) as err:
        rec.LedgerRecord.from_dict(json.loads(json.dumps(line)))
    assert words in str(err.value)


def test_a_line_that_is_not_a_mapping_is_refused():
    with pytest.raises(BadRecord, match=r"the line holds \[1, 2\] \(a list\), not a record"):
        rec.LedgerRecord.from_dict([1, 2])
