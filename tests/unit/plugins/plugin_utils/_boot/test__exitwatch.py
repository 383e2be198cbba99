"""Who exited first, from the exits the nodes saw at the event (issue #28 part 3)."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _exitwatch as xw

T = 1764650000.0
RANKS = {"lk-r0": 0, "lk-r1": 1, "lk-r2": 2, "lk-r3": 3}


def die(name, dt, code):
    return {"container": name, "action": "die", "time_ns": int((T + dt) * 1e9), "exit_code": code}


def oom(name, dt):
    return {"container": name, "action": "oom", "time_ns": int((T + dt) * 1e9), "exit_code": None}


def test_exits_are_read_per_rank_with_the_oom_that_came_before_the_die():
    reports = {
        "spark-01": {"exit_events": [die("lk-r0", 0.9, 137), oom("lk-r0", 0.8)]},
        "spark-02": {"exit_events": [die("lk-r1", 1.0, 1), die("other-lane-r0", 0.1, 1)]},
        "spark-03": {},
    }
    got = {e.rank: e for e in xw.exits_from_reports(reports, RANKS)}
    assert set(got) == {0, 1}
    assert got[0].oom and got[0].exit_code == 137 and got[0].host == "spark-01"
    assert got[0].at == pytest.approx(T + 0.9)
    assert not got[1].oom and got[1].exit_code == 1


def test_a_rank_that_restarted_and_died_again_counts_once_with_its_last_exit():
    reports = {"spark-01": {"exit_events": [die("lk-r0", 5.0, 1), die("lk-r0", 1.0, 1)]}}
    (only,) = xw.exits_from_reports(reports, RANKS)
    assert only.at == pytest.approx(T + 5.0)


def test_the_killed_rank_comes_before_the_peers_that_lost_it_even_a_moment_later():
    # r2 was killed (137); r1 and r3 exited with an error 0.3 s "earlier" on their own clocks
    exits = xw.exits_from_reports({
        "spark-02": {"exit_events": [die("lk-r1", 0.2, 1)]},
        "spark-03": {"exit_events": [die("lk-r2", 0.5, 137)]},
        "spark-04": {"exit_events": [die("lk-r3", 0.2, 1)]},
    }, RANKS)
    assert [e.rank for e in xw.first_exits(exits)] == [2, 1, 3]


def test_outside_the_cluster_window_time_order_wins():
    exits = xw.exits_from_reports({
        "spark-02": {"exit_events": [die("lk-r1", 0.0, 1)]},
        "spark-03": {"exit_events": [die("lk-r2", 30.0, 137)]},
    }, RANKS)
    assert [e.rank for e in xw.first_exits(exits)] == [1, 2]


def test_same_time_and_no_cause_of_their_own_the_lower_rank_first():
    exits = xw.exits_from_reports({
        "spark-04": {"exit_events": [die("lk-r3", 0.0, 1)]},
        "spark-01": {"exit_events": [die("lk-r0", 0.0, 1)]},
    }, RANKS)
    assert [e.rank for e in xw.first_exits(exits)] == [0, 3]
    assert xw.first_exits([]) == []


def test_watch_ends_near_the_next_poll_and_is_skipped_when_too_short():
    assert xw.watch_seconds(100.0, 105.0, 0.8) == pytest.approx(4.2)
    assert xw.watch_seconds(100.0, 100.9, 0.5) == 0.0
    assert xw.watch_seconds(100.0, 99.0, 0.5) == 0.0
    assert xw.watch_seconds(100.0, 103.0, -1.0) == pytest.approx(3.0)


def test_named_after_counts_from_the_exit_and_never_goes_negative():
    seen = xw.SeenExit(1, "spark-02", "lk-r1", T + 1.0, 137)
    assert xw.named_after(seen, T + 1.4) == pytest.approx(0.4)
    assert xw.named_after(seen, T + 0.99) == 0.0
    assert seen.to_dict()["rank"] == 1 and seen.own_cause
