"""The bench's validity gate: before (ranks up on the plan, API answers) and after (no restart)."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _gate as gate

PLAN = {"ranks": [{"node_rank": 0, "host": "n1", "container_name": "c0"},
                  {"node_rank": 1, "host": "n2", "container_name": "c1"}]}
API_OK = {"ok": True, "url": "http://h:8000/v1"}


def _container(name, started="2026-11-30T10:00:00Z", restarts=0, running=True, plan_hash="abc"):
    return {"name": name, "exists": True,
            "inspect": {"State": {"Running": running, "StartedAt": started}, "RestartCount": restarts,
                        "Config": {"Labels": {"io.lanekit.plan-hash": plan_hash}}}}


def snap(**over):
    return gate.rank_snapshot(PLAN, [_container("c0"), _container("c1", **over)])


TOOL_OK = {"rc": 0, "status": "completed", "samples": 4, "failed": 0, "error": ""}


def test_healthy_lane_passes_both_halves():
    before = snap()
    assert gate.check_before("L", "abc", before, API_OK) == []
    assert gate.check_after("L", before, snap(), API_OK, TOOL_OK) == []


def test_before_names_missing_stopped_foreign_plan_and_dead_api():
    missing = gate.rank_snapshot(PLAN, [_container("c0")])
    assert "has no container c1 on n2" in " ".join(gate.check_before("L", "abc", missing, API_OK))
    assert "is not running" in " ".join(gate.check_before("L", "abc", snap(running=False), API_OK))
    assert "runs plan" in " ".join(gate.check_before("L", "abc", snap(plan_hash="zzz"), API_OK))
    dead = gate.check_before("L", "abc", snap(), {"ok": False, "url": "http://h:8000/v1", "error": "refused"})
    assert dead == ["The API of lane L at http://h:8000/v1 did not answer: refused."]


def test_a_restart_during_the_run_makes_it_invalid():
    before = snap()
    by_start = gate.check_after("L", before, snap(started="2026-11-30T10:05:00Z"), API_OK, TOOL_OK)
    by_count = gate.check_after("L", before, snap(restarts=1), API_OK, TOOL_OK)
    assert len(by_start) == 1 and "Rank 1 (c1 on n2) restarted during the run" in by_start[0]
    assert "restarts 0 -> 1" in by_count[0]


def test_tool_status_and_failed_samples_make_it_invalid():
    before = snap()
    bad = dict(TOOL_OK, status="aborted", failed=2)
    problems = gate.check_after("L", before, before, API_OK, bad)
    assert any("status 'aborted'" in p for p in problems) and any("2 of 4" in p for p in problems)
    nothing = {"rc": 1, "status": None, "samples": 0, "failed": 0, "error": "tool-eval-bench wrote no result."}
    assert gate.check_after("L", before, before, API_OK, nothing) == ["tool-eval-bench wrote no result."]


def test_unreachable_node_is_a_problem():
    after = gate.rank_snapshot(PLAN, [_container("c0"), {"name": "c1", "unreachable": True}])
    assert "node n2 did not answer" in " ".join(gate.check_after("L", snap(), after, API_OK, TOOL_OK))
