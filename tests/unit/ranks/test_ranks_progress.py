# Copyright: lanekit developers
# Apache-2.0
"""Phase parsing of vLLM and SGLang logs, the lane tracker (stall, budget, exit, ready) and the status line."""
from __future__ import annotations

import pytest
from ranks_helpers import fixture_lines, lines_until, make_status

from ansible_collections.lanekit.serving.plugins.module_utils import _progress as progress

HOSTS = {r: f"spark-{r + 1:02d}" for r in range(8)}


def parse(lines, engine="vllm", role="head"):
    log = progress.RankLog(engine, role)
    log.feed_docker(lines)
    return log


# --- timestamps ---------------------------------------------------------------------------

def test_docker_timestamps():
    ts, text = progress.split_timestamp("2026-10-30T06:00:01.104233187Z INFO hello")
    assert text == "INFO hello"
    assert ts == pytest.approx(1793340001.104233187, abs=1e-6)
    assert progress.split_timestamp("no stamp") == (None, "no stamp")
    assert progress.parse_docker_time("0001-01-01T00:00:00Z") is None
    assert progress.parse_docker_time("2026-10-30T08:00:01+02:00") == pytest.approx(1793340001.0)
    assert progress.parse_docker_time("2026-10-30T06:00:01.5Z") == pytest.approx(1793340001.5)


# --- vLLM ---------------------------------------------------------------------------------

@pytest.mark.parametrize("marker,phase", [
    ("vLLM API server version", "rendezvous"),
    ("distributed_init_method", "rendezvous"),
    ("is assigned as DP rank", "loading"),
    ("16/64", "loading"),
    ("Loading weights took", "barrier"),
    ("Available KV cache memory", "kv_profile"),
    ("30/67", "graph_capture"),
    ("init engine", "warmup"),
    ("Starting vLLM API server", "ready"),
])
def test_vllm_head_phases(marker, phase):
    assert parse(lines_until("vllm-head.log", marker)).phase == phase


def test_vllm_shards_and_rate():
    log = parse(lines_until("vllm-head.log", "16/64"))
    assert log.shards == (16, 64)
    assert log.shard_pct == 25
    # 16 shards between 06:00:42 (0/64) and 06:10:42
    assert log.load_rate() == pytest.approx(16 / 600.0)
    assert log.tqdm_remaining_s == 30 * 60


def test_vllm_graph_capture_progress():
    log = parse(lines_until("vllm-head.log", "30/67"))
    assert log.capture == (30, 67)


@pytest.mark.parametrize("marker,phase", [
    ("headless multiproc executor", "rendezvous"),
    ("is assigned as DP rank", "loading"),
    ("Model loading took", "barrier"),
    ("Available KV cache memory", "kv_profile"),
    ("Capturing CUDA graphs", "graph_capture"),
    ("Graph capturing finished", "warmup"),
])
def test_vllm_worker_phases(marker, phase):
    assert parse(lines_until("vllm-worker.log", marker), role="worker").phase == phase


# --- SGLang -------------------------------------------------------------------------------

@pytest.mark.parametrize("marker,phase", [
    ("server_args=ServerArgs", "rendezvous"),
    ("Init torch distributed ends", "loading"),
    ("32/64", "loading"),
    ("Load weight end", "barrier"),
    ("KV Cache is allocated", "kv_profile"),
    ("10/23", "graph_capture"),
    ("Capture cuda graph end", "warmup"),
    ("Uvicorn running", "warmup"),          # SGLang answers 503 until warm-up ends
    ("fired up and ready to roll", "ready"),
])
def test_sglang_head_phases(marker, phase):
    assert parse(lines_until("sglang-head.log", marker), engine="sglang").phase == phase


def test_sglang_worker_reaches_ready_on_its_health_server():
    log = parse(fixture_lines("sglang-worker.log"), engine="sglang", role="worker")
    assert log.phase == "ready"
    assert log.events["loaded"] is not None


def test_engine_is_guessed_when_unknown():
    log = parse(lines_until("sglang-head.log", "Uvicorn running"), engine=None)
    assert log.engine == "sglang"
    assert log.phase == "warmup"
    log = parse(fixture_lines("vllm-head.log"), engine=None)
    assert log.engine == "vllm" and log.phase == "ready"


def test_carriage_return_updates_in_one_line():
    line = ("2026-10-30T06:05:00.000000000Z Loading safetensors checkpoint shards:   3% Completed | 2/64 [01:00<31:00]"
            "\rLoading safetensors checkpoint shards:   5% Completed | 3/64 [01:30<30:30]\r")
    log = parse(lines_until("vllm-head.log", "0/64") + [line])
    assert log.shards == (3, 64)


def test_phase_never_goes_back():
    lines = lines_until("sglang-head.log", "Load weight end")
    log = parse(lines + ["2026-10-30T06:41:00.000000000Z [TP0] Init torch distributed begin."], engine="sglang")
    assert log.phase == "barrier"


def test_signatures_are_found_while_parsing():
    log = parse(fixture_lines("sglang-g1-scale-c.log"), engine="sglang", role="worker")
    assert "fusedmoe_g1_scale_c" in log.signatures
    assert log.scanner.last_exception.startswith("AttributeError")


# --- rank_status ------------------------------------------------------------------------------

def test_rank_status_states():
    missing = progress.rank_status({"rank": 2, "host": "spark-03"}, None, None, 0.0)
    assert missing["state"] == "missing" and missing["phase"] == "missing"
    exited = make_status(3, fixture_lines("sglang-g1-scale-c.log"), engine="sglang", state="exited", exit_code=1)
    assert exited["state"] == "exited" and exited["exit_code"] == 1
    assert exited["uptime_s"] is None
    assert progress.rank_label(exited) == "EXITED(1)"
    running = make_status(0, lines_until("vllm-head.log", "16/64"))
    assert running["shards"] == [16, 64]
    assert progress.rank_label(running) == "loading 16/64 (25%)"
    assert running["uptime_s"] > 600


def test_docker_error_is_scanned():
    status = progress.rank_status(
        {"rank": 1, "host": "spark-02"},
        {"State": {"Status": "created", "Error": "exec: stat /usr/local/bin/vllm: no such file or directory"}},
        None, 0.0)
    assert "image_not_unpacked" in status["signatures"]


# --- formatting ----------------------------------------------------------------------------

def test_formatting_helpers():
    assert progress.fmt_ranks([1, 2, 4, 5, 7]) == "r1-2,4-5,7"
    assert progress.fmt_ranks([3]) == "r3"
    assert progress.fmt_duration(45) == "45s"
    assert progress.fmt_duration(725) == "12m05s"
    assert progress.fmt_duration(4800) == "1h20m"


# --- the lane tracker ----------------------------------------------------------------------

def cfg(**kw):
    base = dict(budget_s=4800, stall_s=600, poll_s=15, stability_s=30, expected_load_s=2700, expected_warmup_s=600)
    base.update(kw)
    return progress.BootConfig(**base)


def vllm_loading(node_now=None):
    statuses = {0: make_status(0, lines_until("vllm-head.log", "16/64"), node_now=node_now)}
    for r in range(1, 8):
        statuses[r] = make_status(r, lines_until("vllm-worker.log", "is assigned as DP rank"), node_now=node_now)
    return statuses


def test_status_line_lists_every_rank_with_eta():
    tracker = progress.LaneTracker("mistral-large4-nvfp4-8x-vllm", "vllm", cfg(), HOSTS)
    verdict = tracker.update(0.0, vllm_loading())
    assert verdict.status == progress.WAITING
    line = verdict.line
    assert "mistral-large4-nvfp4-8x-vllm 10m" in line and "/1h20m" in line
    assert "r0 loading 16/64 (25%)" in line
    assert "r1-7 loading" in line
    # 48 shards left at 1.6 shards/min = 30 min, plus the planned 10 min of warm-up
    assert "ETA ~39m55s (load 29m55s at 1.6 shards/min + warm-up 10m00s planned)" in line
    assert verdict.eta_s == pytest.approx(48 * 37.5 - 5 + 600, abs=2)


def test_exit_fails_at_once_with_signature_rank_and_fix():
    statuses = {r: make_status(r, fixture_lines("sglang-worker.log")[:7], engine="sglang") for r in range(8)}
    statuses[3] = make_status(3, fixture_lines("sglang-g1-scale-c.log"), engine="sglang", state="exited", exit_code=1)
    tracker = progress.LaneTracker("mistral-large4-nvfp4-8x-sglang", "sglang", cfg(), HOSTS)
    verdict = tracker.update(0.0, statuses)
    assert verdict.status == progress.FAILED
    assert verdict.culprits == [3]
    assert verdict.matches[0].id == "fusedmoe_g1_scale_c"
    assert "r3 EXITED(1)" in verdict.line
    message = progress.failure_message("mistral-large4-nvfp4-8x-sglang", verdict, HOSTS, "/x/reports/b")
    assert "rank 3 (spark-04)" in message
    assert "--moe-runner-backend flashinfer_cutlass" in message
    assert "the containers were left in place" in message


def test_fatal_line_in_a_running_rank_fails_without_waiting_for_exit():
    statuses = vllm_loading()
    statuses[0] = make_status(0, lines_until("vllm-head.log", "Model loading took") + [
        "2026-10-30T06:43:00.000000000Z ValueError: To serve at least one request with the models's max seq len "
        "(524288), (25.00 GiB KV cache is needed, which is larger than the available KV cache memory (23.63 GiB). "
        "Based on the available memory, the estimated maximum model length is 495296."])
    verdict = progress.LaneTracker("l", "vllm", cfg(), HOSTS).update(0.0, statuses)
    assert verdict.status == progress.FAILED
    assert verdict.matches[0].id == "kv_budget_refused" and verdict.culprits == [0]


def test_unknown_exit_quotes_the_last_exception():
    statuses = vllm_loading()
    statuses[6] = make_status(6, lines_until("vllm-worker.log", "is assigned") + [
        "2026-10-30T06:01:00.000000000Z KeyError: 'model.layers.61.mlp.experts.w13_weight'"], state="exited", exit_code=1)
    tracker = progress.LaneTracker("l", "vllm", cfg(), HOSTS)
    # Polls every 15 s. The rank exited 65 s before the failing poll at 100 s (FinishedAt 06:00:00,
    # node clock 06:01:05), i.e. at 35 s: the polls at 40, 55, 70, 85 and 100 s began after it.
    for t in (10.0, 25.0, 40.0, 55.0, 70.0, 85.0):
        assert tracker.update(t, vllm_loading()).status == progress.WAITING
    verdict = tracker.update(100.0, statuses)
    assert verdict.status == progress.FAILED and verdict.culprits == [6]
    assert verdict.matches[0].id == "container_exited"
    assert "KeyError" in verdict.summary
    assert verdict.noticed_after_s == 65.0 and verdict.polls_after_exit == 5
    message = progress.failure_message("l", verdict, HOSTS, poll_s=15)
    assert "Noticed 65.0 s after the first rank exited, at poll 5 after the exit (one poll every 15 s)." in message
    fresh = progress.LaneTracker("l", "vllm", cfg(), HOSTS).update(0.0, statuses)
    assert fresh.polls_after_exit == 1


def test_missing_container_fails():
    statuses = vllm_loading()
    statuses[7] = progress.rank_status({"rank": 7, "host": "spark-08"}, None, None, 0.0)
    verdict = progress.LaneTracker("l", "vllm", cfg(), HOSTS).update(0.0, statuses)
    assert verdict.status == progress.FAILED and verdict.matches[0].id == "container_missing"
    assert verdict.culprits == [7]


def test_stall_names_the_rank_that_never_joined():
    statuses = {0: make_status(0, lines_until("vllm-head.log", "distributed_init_method"))}
    for r in range(1, 8):
        statuses[r] = make_status(r, lines_until("vllm-worker.log", "distributed_init_method"))
    statuses[5] = make_status(5, [])     # started, never printed its rendezvous line
    tracker = progress.LaneTracker("l", "vllm", cfg(stall_s=600), HOSTS)
    assert tracker.update(0.0, statuses).status == progress.WAITING
    assert tracker.update(300.0, statuses).status == progress.WAITING
    line = tracker.update(450.0, statuses).line
    assert "no progress 7m30s/10m00s" in line
    verdict = tracker.update(600.0, statuses)
    assert verdict.status == progress.FAILED
    assert verdict.culprits == [5]
    ids = [m.id for m in verdict.matches]
    assert ids[:2] == ["rank_never_joined", "stalled"]
    message = progress.failure_message("l", verdict, HOSTS)
    assert "rank 5 (spark-06)" in message


def test_progress_resets_the_stall_clock():
    tracker = progress.LaneTracker("l", "vllm", cfg(stall_s=600), HOSTS)
    assert tracker.update(0.0, vllm_loading()).status == progress.WAITING
    moved = vllm_loading()
    moved[0] = make_status(0, lines_until("vllm-head.log", "64/64"))
    assert tracker.update(500.0, moved).status == progress.WAITING
    assert tracker.update(1000.0, moved).status == progress.WAITING   # 500 s quiet < 600
    assert tracker.update(1100.0, moved).status == progress.FAILED


def test_budget_exhausted():
    statuses = vllm_loading()
    for status in statuses.values():
        status["started_age_s"] = 5000.0
    verdict = progress.LaneTracker("l", "vllm", cfg(budget_s=4800), HOSTS).update(0.0, statuses)
    assert verdict.status == progress.FAILED
    assert any(m.id == "budget_exhausted" for m in verdict.matches)


def test_silent_host_is_named_on_stall():
    statuses = vllm_loading()
    statuses[4] = progress.rank_status({"rank": 4, "host": "spark-05"}, None, None, 0.0,
                                       gather_error="cannot reach spark-05: timed out")
    tracker = progress.LaneTracker("l", "vllm", cfg(stall_s=100), HOSTS)
    tracker.update(0.0, statuses)
    verdict = tracker.update(100.0, statuses)
    assert verdict.status == progress.FAILED and verdict.culprits == [4]
    assert "cannot reach spark-05" in verdict.summary


def test_loaded_ranks_wait_at_the_barrier_until_all_loaded():
    statuses = {r: make_status(r, lines_until("sglang-worker.log", "Load weight begin"), engine="sglang")
                for r in range(8)}
    for r in (0, 1, 2, 3):
        statuses[r] = make_status(r, lines_until("sglang-worker.log", "Load weight end"), engine="sglang")
    tracker = progress.LaneTracker("l", "sglang", cfg(barrier_timeout_s=480), HOSTS)
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
    tracker = progress.LaneTracker("l", "vllm", cfg(stability_s=30), HOSTS)
    assert tracker.update(0.0, ready_vllm(chat=False)).status == progress.WAITING
    first = tracker.update(15.0, ready_vllm())
    assert first.status == progress.WAITING and "healthy 0s/30s" in first.line
    assert "r0 up(api)" in first.line and "r1-7 up" in first.line
    assert tracker.update(30.0, ready_vllm()).status == progress.WAITING
    assert tracker.update(45.0, ready_vllm()).status == progress.READY


def test_sglang_ready_needs_worker_health():
    statuses = {0: make_status(0, fixture_lines("sglang-head.log"), engine="sglang", probes=probes_ok())}
    for r in range(1, 8):
        statuses[r] = make_status(r, fixture_lines("sglang-worker.log"), engine="sglang",
                                  probes={"health": {"status": 200}})
    statuses[6]["probes"] = {"health": {"status": None, "error": "connection refused"}}
    ok, why = progress.readiness("sglang", statuses, True)
    assert not ok and "r6" in why
    statuses[6]["probes"] = {"health": {"status": 200}}
    assert progress.readiness("sglang", statuses, True) == (True, "")


def test_flapping_api_fails():
    tracker = progress.LaneTracker("l", "vllm", cfg(stability_s=60, max_flaps=2), HOSTS)
    bad = ready_vllm()
    bad[0]["probes"]["api"]["health_status"] = 503
    tracker.update(0.0, ready_vllm())
    tracker.update(15.0, bad)
    tracker.update(30.0, ready_vllm())
    verdict = tracker.update(45.0, bad)
    assert verdict.status == progress.FAILED and verdict.matches[-1].id == "api_unhealthy"


def test_boot_config_from_plan():
    plan = {"engine": "sglang", "boot": {"budget_s": 5400, "stall_s": 900, "poll_s": 20, "expected_load_s": 3000},
            "ranks": [{"env": {"SGLANG_UNBALANCED_LOAD_TIMEOUT_S": "7200"}}]}
    config = progress.BootConfig.from_plan(plan, poll_s=5.0)
    assert (config.budget_s, config.stall_s, config.poll_s, config.expected_load_s) == (5400, 900, 5.0, 3000)
    assert config.barrier_timeout_s == 7200
    assert progress.BootConfig.from_plan({"engine": "vllm"}).barrier_timeout_s is None


def test_table():
    statuses = ready_vllm()
    statuses[7] = make_status(7, fixture_lines("vllm-worker.log"), state="exited", exit_code=137)
    table = progress.render_table(progress.LaneTracker("l", "vllm", cfg(), HOSTS).infer(statuses), "l")
    assert table[0] == "lane l"
    assert table[1].split() == ["rank", "host", "container", "state", "phase", "uptime", "restarts", "plan", "image"]
    assert "API up" in table[2]
    assert "exited(137)" in table[9]


def test_a_serving_lane_is_not_failed_by_its_age():
    # A re-run on a lane that has served for hours: the budget and stall clocks do not apply.
    statuses = ready_vllm()
    for status in statuses.values():
        status["started_age_s"] = 86400.0
    tracker = progress.LaneTracker("l", "vllm", cfg(stability_s=30, stall_s=20), HOSTS)
    assert tracker.update(0.0, statuses).status == progress.WAITING
    assert tracker.update(25.0, statuses).status == progress.WAITING
    assert tracker.update(30.0, statuses).status == progress.READY


def test_already_serving_is_told_apart_from_a_boot():
    tracker = progress.LaneTracker("l", "vllm", cfg(stability_s=10), HOSTS)
    tracker.update(0.0, ready_vllm())
    verdict = tracker.update(10.0, ready_vllm())
    assert verdict.status == progress.READY and verdict.already_serving
    booting = progress.LaneTracker("l", "vllm", cfg(stability_s=10), HOSTS)
    booting.update(0.0, vllm_loading())
    booting.update(5.0, ready_vllm())
    verdict = booting.update(15.0, ready_vllm())
    assert verdict.status == progress.READY and not verdict.already_serving


def test_overdue_plan_eta_is_said():
    statuses = {r: make_status(r, []) for r in range(8)}
    for status in statuses.values():
        status["started_age_s"] = 4000.0
    line = progress.LaneTracker("l", "vllm", cfg(expected_load_s=2700, expected_warmup_s=600), HOSTS).update(
        0.0, statuses).line
    assert "ETA overdue by 11m40s (planned)" in line


def test_rendezvous_timeout_blames_the_missing_rank():
    statuses = {r: make_status(r, lines_until("vllm-worker.log", "distributed_init_method")) for r in range(8)}
    statuses[0] = make_status(0, lines_until("vllm-head.log", "distributed_init_method") + [
        "2026-10-30T06:10:06.000000000Z torch.distributed.DistStoreError: Timed out after 600 seconds waiting for "
        "clients. 7/8 clients joined. Missing node ranks: 5."], state="exited", exit_code=1)
    verdict = progress.LaneTracker("l", "vllm", cfg(), HOSTS).update(0.0, statuses)
    assert verdict.status == progress.FAILED
    assert verdict.matches[0].id == "rendezvous_timeout" and verdict.culprits == [5]


def test_the_rank_that_never_joined_is_named_from_the_store_connections():
    ips = {r: f"172.31.213.{11 + r}" for r in range(8)}
    statuses = {r: make_status(r, lines_until("vllm-worker.log", "headless")) for r in range(8)}
    statuses[0] = make_status(0, lines_until("vllm-head.log", "distributed_init_method"))
    for r, status in statuses.items():
        status["fabric_ip"] = ips[r]
    statuses[0]["probes"] = {"rendezvous": {"port": 29501, "peers": [ips[r] for r in range(8) if r != 5]}}
    tracker = progress.LaneTracker("l", "vllm", cfg(stall_s=60), HOSTS)
    line = tracker.update(0.0, statuses).line
    assert "joined 7/8, waiting for r5" in line
    verdict = tracker.update(60.0, statuses)
    assert verdict.status == progress.FAILED and verdict.culprits == [5]
    assert verdict.matches[0].id == "rank_never_joined"
    assert "has no connection to the head's rendezvous port" in verdict.matches[0].detail


def test_joined_is_unknown_when_ranks_share_an_address():
    statuses = {r: make_status(r, lines_until("vllm-worker.log", "headless")) for r in range(2)}
    for status in statuses.values():
        status["fabric_ip"] = "127.0.0.1"
    statuses[0]["probes"] = {"rendezvous": {"port": 29501, "peers": ["127.0.0.1"]}}
    assert progress.LaneTracker.joined(statuses) is None


def test_memory_note_names_the_tightest_node():
    statuses = vllm_loading()
    for status in statuses.values():
        status["mem_free_kb"] = 30 * 1048576
    statuses[5]["mem_free_kb"] = int(1.6 * 1048576)
    assert progress.memory_note(statuses) == "MemFree min 1.6G r5"
    assert "MemFree min 1.6G r5" in progress.LaneTracker("l", "vllm", cfg(), HOSTS).update(0.0, statuses).line


def test_table_tells_whether_a_container_matches_the_plan():
    statuses = ready_vllm()
    statuses[0].update(planned_spec_hash="aaa", labels={"io.lanekit.spec-hash": "aaa"})
    statuses[1].update(planned_spec_hash="bbb", labels={"io.lanekit.spec-hash": "old"})
    table = progress.render_table(statuses, "l")
    assert " current " in table[2] and " differs " in table[3] and " - " in table[4]
