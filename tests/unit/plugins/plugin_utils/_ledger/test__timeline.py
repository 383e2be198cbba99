"""Issue 26: the timeline charts' data: a row per rank with its phases on the deploy's clock, the failure
marked, and the ledger's history (_ledger/_timeline.py); the drawing (_draw.py) only draws it."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _record as rec
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _timeline as timeline

PLAN = {"lane": "l", "engine": "vllm", "plan_hash": "a" * 64, "ranks": []}


def boot(outcome="ready", failed_rank=None):
    record = rec.new_record("deploy", outcome, PLAN, None, 1_796_000_000.0,
                            phases={"image": 10.0, "weights": 20.0, "ranks": 5.0, "ready": 100.0})
    record.boot = 7
    # Rank 0 started 100 s before the wait ended, rank 1 90 s before (the end is at 135 s).
    record.ranks = [
        rec.RankBoot(0, "spark-01", "running", None, {"rendezvous": 2.0, "loading": 10.0, "ready": 95.0}, 100.0, 100.0),
        rec.RankBoot(1, "spark-02", "exited", 1, {"rendezvous": 1.0, "loading": 5.0}, 40.0, 90.0,
                     failed=failed_rank == 1),
    ]
    return record


def test_one_row_for_the_deploy_then_one_per_rank_on_the_deploys_clock():
    chart = timeline.boot_chart(boot())
    assert [r["label"] for r in chart["rows"]] == ["deploy", "r0 spark-01", "r1 spark-02"]
    assert chart["rows"][0]["bars"] == [{"phase": "image", "start": 0.0, "end": 10.0},
                                        {"phase": "weights", "start": 10.0, "end": 30.0},
                                        {"phase": "ranks", "start": 30.0, "end": 35.0},
                                        {"phase": "ready", "start": 35.0, "end": 135.0}]
    r0 = chart["rows"][1]["bars"]
    assert r0 == [{"phase": "started", "start": 35.0, "end": 37.0}, {"phase": "rendezvous", "start": 37.0, "end": 45.0},
                  {"phase": "loading", "start": 45.0, "end": 130.0}, {"phase": "ready", "start": 130.0, "end": 135.0}]
    r1 = chart["rows"][2]
    assert r1["bars"][-1] == {"phase": "loading", "start": 50.0, "end": 85.0}
    assert r1["failed_at"] == 85.0  # it exited with code 1 there
    assert chart["end"] == 135.0
    assert chart["legend"] == ["image", "weights", "ranks", "ready", "started", "rendezvous", "loading"]


def test_a_failure_no_rank_shows_is_marked_on_the_deploy_row():
    record = boot("failed")
    record.ranks = []
    record.cause = rec.Cause(signature="stalled")
    chart = timeline.boot_chart(record)
    assert chart["rows"][0]["failed_at"] == 135.0
    assert chart["title"].endswith(": failed — stalled")


def test_the_history_keeps_deploys_restarts_and_give_ups_not_every_probe():
    records = [boot(), boot("failed"), rec.new_record("watch", "probe-failed", PLAN, None, 1.0),
               rec.new_record("watch", "healed", PLAN, None, 2.0, boot_s=300.0),
               rec.new_record("watch", "gave-up", PLAN, None, 3.0), rec.new_record("teardown", "stopped", PLAN, None, 4.0)]
    records[1].cause = rec.Cause(signature="kv_budget_refused")
    for i, r in enumerate(records, 1):
        r.boot = i
    points = timeline.history_chart(records)["points"]
    assert [(p["boot"], p["outcome"], p["duration_s"], p["color"], p["label"]) for p in points] == [
        (1, "ready", 100.0, "#2ca02c", ""), (2, "failed", 100.0, "#d62728", "kv_budget_refused"),
        (4, "healed", 300.0, "#2ca02c", ""), (5, "gave-up", None, "#d62728", "")]
    assert not any(p["before_boot"] for p in points)  # a watch's heal or give-up is not a deploy's early failure


def test_every_history_bar_is_the_boot_whatever_the_outcome():
    ready, failed_in_boot, failed_before = boot(), boot("failed"), boot("failed")
    ready.boot_s = 95.0  # the wait's own figure wins over the ready phase's
    failed_before.phases = {"image": 10.0, "weights": 20.0}  # refused before any rank started
    points = timeline.history_chart([ready, failed_in_boot, failed_before])["points"]
    # The failed boot's bar is its wait until the failure was named, not image + weights + ranks + wait.
    assert [p["duration_s"] for p in points] == [95.0, 100.0, 30.0]
    # ... and the one that never booted says so, so its bar is not read as a boot.
    assert [p["before_boot"] for p in points] == [False, False, True]


def test_the_blamed_rank_is_marked_failed_and_its_echoes_stopped():
    record = boot("failed", failed_rank=1)
    record.ranks[0].state, record.ranks[0].exit_code = "exited", 1
    rows = timeline.boot_chart(record)["rows"]
    assert [(r["failed_at"], r["stopped_at"]) for r in rows] == [(None, None), (None, 135.0), (85.0, None)]


def test_a_rank_placed_by_its_start_on_the_deploys_clock():
    record = boot()
    record.ranks[0].start_s = 30.0
    assert timeline.boot_chart(record)["rows"][1]["bars"][0] == {"phase": "started", "start": 30.0, "end": 32.0}
