# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Known failure signatures of multi-node engine boots.

Each signature maps what a rank prints (or what docker reports in the container state) to an
id, the cause in one sentence and the fix in one sentence. The table starts with the boot
ledger of the Mistral Large 4 bring-up (every boot that died there has its line here) and adds
the common multi-node failures: a rank that never joined the rendezvous, NCCL timeouts and
errors, engine timeouts, memory.

Signatures are of two kinds:

* ``root``: the line names what went wrong first (a refused KV budget, a missing attribute in a
  kernel path). These are listed first in a report.
* ``consequence``: the line is usually what the *other* ranks print after one rank died or
  stalled (an NCCL watchdog timeout, a broken socket). Still reported, after the roots.

A few signatures are *derived* (no pattern): the wait loop raises them from the ranks' phases
(a rank that never joined, a stall, an exhausted budget, an exit without a known line) and takes
their cause and fix text from this same table, so all the advice lives in one place.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines

ROOT = "root"
CONSEQUENCE = "consequence"

# Evidence lines are quoted in reports; keep them readable.
_EVIDENCE_MAX = 300


@dataclass(frozen=True)
class Signature:
    """One known failure: how to recognise it, what it means, what to do."""

    id: str
    title: str
    cause: str
    fix: str
    pattern: re.Pattern | None = None
    # Optional second pattern that must appear in the same rank's log within
    # ``context_lines`` lines before the matching line (or on it).
    context: re.Pattern | None = None
    context_lines: int = 40
    kind: str = ROOT
    # fatal: once printed the boot is lost, even if the container still runs.
    fatal: bool = True
    # Engines whose logs can print the line (names of the engine table, ``_engines.ENGINES``);
    # empty: any engine.
    engines: tuple[str, ...] = ()
    # Optional pattern whose group "ranks" lists the node ranks the line itself blames
    # (e.g. "Missing node ranks: 5, 7"): those ranks, not the one printing, are at fault.
    blame: re.Pattern | None = None
    # Rank roles whose logs can print the line (``plan["ranks"][*].role``, e.g. "router");
    # empty: any role. A scanner that does not know its role (free text) skips role-scoped ones.
    roles: tuple[str, ...] = ()
    # Ids of more generic signatures that the same line also matches: when this one is found
    # on a line, those are not reported for that line (the specific cause and fix replace them).
    supersedes: tuple[str, ...] = ()
    # Optional pattern whose group "ip" is the address of the peer the line names (gloo's
    # "Connection closed by peer [IP]:PORT"): the rank with that fabric address is blamed, when
    # the caller knows the plan's addresses (``collect(..., ips=...)``).
    blame_ip: re.Pattern | None = None
    # Optional pattern that, once seen in a rank's log, stops this signature from being recorded
    # for the rest of that log (vLLM logs an EngineDeadError during an ordinary SIGTERM shutdown).
    not_after: re.Pattern | None = None
    # Optional pattern whose named groups fill ``detail_text`` (e.g. the refused flag); the
    # sentence becomes the match's detail, quoted before the cause.
    detail: re.Pattern | None = None
    detail_text: str = ""

    @property
    def derived(self) -> bool:
        return self.pattern is None


def _re(text: str, flags: int = re.IGNORECASE) -> re.Pattern:
    return re.compile(text, flags)


SIGNATURES: tuple[Signature, ...] = (
    # --- the boot ledger of the report -------------------------------------------------
    Signature(
        id="image_not_unpacked",
        title="image not fully unpacked on the node",
        pattern=_re(r"\bstat [^\s:]+: no such file"),
        cause=(
            "The container could not exec a file that the image should contain: the image "
            "rootfs on that node is incomplete (a `docker load` that returned before the "
            "snapshotter finished unpacking) or the entrypoint path is wrong."
        ),
        fix=(
            "Prove the image executes on that node (the image role's exec probe runs its "
            "entrypoint once); if it does not, remove the image there and distribute it again; "
            "if the path itself is wrong, fix the lane's entrypoint."
        ),
    ),
    Signature(
        id="kv_budget_refused",
        title="KV cache budget too small for the context length",
        pattern=_re(
            r"estimated maximum model length is \d+"
            r"|KV cache is needed, which is larger than the available KV cache memory"
        ),
        cause=(
            "After weights and graph memory, the KV cache left by the memory fraction cannot "
            "hold one request of the configured maximum length, so the engine refused to start."
        ),
        fix=(
            "Raise `--gpu-memory-utilization` (the report's vLLM lane needed 0.89, not 0.85) "
            "while staying under the hardware's admission ceiling, or lower `--max-model-len`; "
            "the plan's KV-budget check names the smallest fraction that fits. On a CPU lane the "
            "KV cache is `VLLM_CPU_KVCACHE_SPACE` (GiB, the lane's env) instead."
        ),
    ),
    Signature(
        id="kv_budget_refused_cpu",
        title="KV cache space too small for the context length (vLLM CPU backend)",
        # vLLM CPU builds add "(which also controls CPU memory on the CPU backend)" to the sentence
        # (real vllm-cpu 0.32.0, tests/fixtures/real_vllm/kv_too_small): the lane runs on CPU.
        pattern=_re(r"which also controls CPU memory on the CPU backend"),
        supersedes=("kv_budget_refused",),
        engines=("vllm",),
        cause=(
            "On vLLM's CPU backend the KV cache is the fixed space `VLLM_CPU_KVCACHE_SPACE` "
            "reserves per rank; it cannot hold one request of the configured maximum length, so "
            "the engine refused to start (the headless ranks are not told and keep running)."
        ),
        fix=(
            "Raise `VLLM_CPU_KVCACHE_SPACE` (GiB per rank, in the lane's `serve.env`; within the "
            "node's free RAM) or lower `--max-model-len` to the estimated maximum the line names; "
            "`--gpu-memory-utilization` does not size a CPU lane's KV cache."
        ),
    ),
    Signature(
        id="trtllm_fmha_unsupported_arch",
        title="trtllm fmha kernel on an unsupported GPU architecture",
        pattern=_re(r"Unsupported architecture"),
        context=_re(r"trtllm|fmha"),
        cause=(
            "The default FlashInfer MLA route autotunes the TensorRT-LLM `fmha` kernels, which "
            "exist for sm100 only; GB10 (sm_121) refuses them."
        ),
        fix=(
            "Use the DSA attention backend for DSA models: `--attention-backend dsa` with "
            "`--dsa-prefill-backend tilelang --dsa-decode-backend tilelang`."
        ),
    ),
    Signature(
        id="post_load_barrier_timeout",
        title="post-load barrier timed out waiting for a slow rank",
        pattern=_re(
            r"could finish the model loading, but there are other ranks that didn't finish loading"
        ),
        cause=(
            "The ranks that finished loading waited at SGLang's post-load `monitored_barrier` "
            "longer than its timeout for ranks that were still loading (a slow or cold node)."
        ),
        fix=(
            "Set `SGLANG_UNBALANCED_LOAD_TIMEOUT_S` (needs the image's baked barrier patch) "
            "above the slowest rank's load time, keep every node's page cache warm, and never "
            "drop caches during a load; the ranks still loading when the barrier expired are "
            "the slow nodes."
        ),
    ),
    Signature(
        id="flashinfer_sparse_mla_refused",
        title="flashinfer_sparse_mla refused for this model architecture",
        pattern=_re(r"flashinfer_sparse_mla"),
        context=_re(r"model_arch|not supported|only support|unsupported"),
        context_lines=5,
        cause=(
            "`flashinfer_sparse_mla` is implemented for GLM-DSA models only; the backend "
            "validator refuses every other `model_arch`."
        ),
        fix=(
            "Do not select `flashinfer_sparse_mla`; use `--attention-backend dsa` with the "
            "tilelang DSA prefill and decode backends."
        ),
    ),
    Signature(
        id="fusedmoe_g1_scale_c",
        title="NVFP4 MoE routed to the TensorRT-LLM runner on SM12x",
        pattern=_re(r"'FusedMoE' object has no attribute 'g1_scale_c'", 0),
        cause=(
            "The automatic MoE runner rule sent the NVFP4 experts to the TensorRT-LLM runner, "
            "which SM120/121 does not support (the rule compares `--quantization`, unset for "
            "checkpoint-quantized models)."
        ),
        fix="Add `--moe-runner-backend flashinfer_cutlass` (the supported NVFP4 MoE runner on SM120/121).",
    ),
    Signature(
        id="python_headers_missing",
        title="the image lacks Python.h for torch inductor's C++ kernels",
        # Real vllm-cpu 0.32.0, first request of a TP2 CPU lane (tests/fixtures/real_vllm/
        # first_request_no_python_h): "fatal error: Python.h: No such file or directory" inside
        # "torch._inductor.exc.InductorError: CppCompileError: C++ compile error"; the engine dies.
        pattern=_re(r"fatal error: Python\.h: No such file or directory", 0),
        cause=(
            "torch inductor compiles a C++ kernel at the first request (vLLM CPU lanes with tensor "
            "parallelism) and the image has no Python headers, so the compile fails and the engine dies."
        ),
        fix=(
            "Install the Python headers and a C++ compiler in the image (Debian/Ubuntu: `python3-dev` "
            "and `g++` in the image spec's packages), rebuild and redeploy."
        ),
    ),
    Signature(
        id="shm_too_small",
        title="/dev/shm too small for vLLM's shared-memory buffers",
        # Real vllm-cpu 0.32.0, the first deploy of the CPU lane on nodes with a 64 MiB /dev/shm
        # (tests/fixtures/real_vllm/shm_too_small): "RuntimeError: Insufficient space in /dev/shm for
        # shared-memory allocation: 160 MiB required, 64 MiB free. Increase /dev/shm (e.g.
        # --shm-size or --ipc=host)."; the engine core fails to start.
        pattern=_re(r"Insufficient space in /dev/shm", 0),
        cause=(
            "vLLM allocates its shared-memory buffers in /dev/shm and found less free space there than "
            "it needs. lanekit starts ranks with --ipc=host, so that is the node's own /dev/shm (a tmpfs), "
            "not a per-container one."
        ),
        fix=(
            "Give the node a larger /dev/shm (a tmpfs: `mount -o remount,size=<N>G /dev/shm`, or size it "
            "in fstab; a node that is itself a container needs a larger --shm-size), at least what the "
            "line says is required, then redeploy."
        ),
    ),
    Signature(
        id="inductor_cpp_compile_failed",
        title="torch inductor could not compile its C++ kernel",
        pattern=_re(r"CppCompileError: C\+\+ compile error", 0),
        cause="torch inductor failed to compile a C++ kernel in the image (a compiler or header is missing).",
        fix=(
            "Install `g++` and `python3-dev` in the image (the compile error names what is missing), "
            "rebuild and redeploy."
        ),
    ),
    # --- multi-node -------------------------------------------------------------------
    Signature(
        id="rendezvous_timeout",
        title="rendezvous timed out: not every rank joined",
        pattern=_re(
            r"waiting for clients\. \d+/\d+ clients joined"
            r"|client socket has timed out after .* while trying to connect"
            r"|DistNetworkError|DistStoreError"
            r"|Timed out waiting for .*(?:peers|ranks) to (?:join|connect)"
        ),
        blame=_re(r"Missing node ranks: (?P<ranks>\d+(?:, ?\d+)*)"),
        cause=(
            "The distributed rendezvous on the head's address timed out because at least one "
            "rank never connected."
        ),
        fix=(
            "Check that every rank's container runs, that `--master-addr`/`--dist-init-addr` is "
            "the head's fabric IP and its port is reachable from every node, and that "
            "NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME name the fabric interface on every node."
        ),
    ),
    Signature(
        id="engine_ready_timeout",
        title="vLLM front end gave up waiting for the engine cores",
        pattern=_re(r"VLLM_ENGINE_READY_TIMEOUT_S|Timed out waiting for engine"),
        cause="The API front end waited longer than VLLM_ENGINE_READY_TIMEOUT_S for the engine cores (slow weight loading).",
        fix="Raise the lane's `boot.budget_s`, which the plan renders into VLLM_ENGINE_READY_TIMEOUT_S, above load plus warm-up.",
    ),
    Signature(
        id="sglang_watchdog_timeout",
        title="SGLang scheduler watchdog fired",
        pattern=_re(r"watchdog timeout \(self\.watchdog_timeout|Scheduler watchdog timeout"),
        cause="A forward batch (often the first warm-up forward) ran longer than `--watchdog-timeout`.",
        fix="Raise `--watchdog-timeout` (the plan renders it from the boot budget) or shorten the warm-up (JIT caches).",
    ),
    Signature(
        id="memory_unbalanced",
        title="SGLang refused unbalanced free memory across ranks",
        pattern=_re(r"memory capacity is unbalanced"),
        cause="SGLang compares free GPU memory across TP ranks before loading; unified-memory nodes differ by more than 10%.",
        fix="Set SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0 in the lane env (DGX Spark unified memory).",
    ),
    Signature(
        id="sglang_kv_pool_too_small",
        title="SGLang memory pool too small",
        pattern=_re(r"Not enough memory\. Please try to increase --mem-fraction-static"),
        cause="After the weights, `--mem-fraction-static` leaves too little memory for the KV pool.",
        fix="Raise `--mem-fraction-static` within the admission ceiling, or lower `--context-length`.",
    ),
    Signature(
        id="cuda_out_of_memory",
        title="CUDA out of memory",
        pattern=_re(r"CUDA out of memory|torch\.OutOfMemoryError|OutOfMemoryError: "),
        cause="A rank ran out of device memory (on unified memory, page cache and other processes count against it).",
        fix=(
            "Lower the memory fraction or the graph capture sizes, make sure no other process "
            "holds memory on that node, and do not let a page-cache drop race the load."
        ),
    ),
    Signature(
        id="tokenizer_needs_mistral_mode",
        title="tokenizer looked for config.json in a consolidated checkpoint",
        pattern=_re(r"couldn't find them in the cached files|does not appear to have a file named config\.json"),
        cause="The checkpoint has no config.json (Mistral consolidated format), so the Hugging Face tokenizer path fails.",
        fix="Add `--tokenizer-mode mistral` (mistral-common reads tekken.json).",
    ),
    Signature(
        id="unknown_engine_flag",
        title="the engine refused a flag",
        # vLLM 0.32 reports it from its top-level parser, after the `usage: vllm [-h] [-v]` lines:
        # "vllm: error: unrecognized arguments: --lanekit-bogus 1" (exit 2); older ones as "vllm serve".
        pattern=_re(r"error: unrecognized arguments:|error: argument \S+: invalid|error: argument \S+: expected"),
        detail=_re(r"(?:error: unrecognized arguments:|error: argument) (?P<flags>[^:]+?)\s*(?::|$)"),
        detail_text="The engine refused `{flags}`, which comes from the lane's `serve.args` (or a layer that set it)",
        cause="The engine in the image does not accept one of the lane's flags or values.",
        fix=(
            "Remove or correct the refused flag (named in the line) in the lane's `serve.args` (or the "
            "layer that set it) for this engine version."
        ),
    ),
    Signature(
        id="address_in_use",
        title="a port is already taken on the node",
        pattern=_re(r"Address already in use|\[Errno 98\]|EADDRINUSE"),
        cause="Another process (often a previous lane's rank) holds the API, rendezvous or health port on that node.",
        fix=("Tear down the previous lane (`ansible-playbook lanekit.serving.teardown_lane -i <inventory> "
             "-e lane=<previous lane>`) or move this lane's ports."),
    ),
    Signature(
        id="image_missing",
        title="the pinned image is not on the node",
        pattern=_re(r"Cannot find image with name .*pull=never|No such image"),
        cause="The rank's pinned image is not present on that node's Docker daemon (ranks never pull).",
        fix="Run the image role for this lane so the pinned image is distributed to every node.",
    ),
    Signature(
        id="ulimit_refused",
        title="the node refused the container's ulimits",
        pattern=_re(r"error setting rlimit type \d+: operation not permitted"),
        cause=(
            "The node's Docker daemon may not raise a resource limit (memlock, nofile, stack) as "
            "high as the rank asks: the daemon itself runs with a lower hard limit or without "
            "CAP_SYS_RESOURCE."
        ),
        fix=(
            "Raise the daemon's limits on that node (for example LimitMEMLOCK=infinity and "
            "LimitNOFILE in docker.service) or lower `lanekit_rank_ulimits` in the inventory."
        ),
    ),
    Signature(
        id="image_wrong_arch",
        title="image built for another CPU architecture",
        pattern=_re(r"exec format error"),
        cause="The image's binaries are for another architecture than the node (e.g. amd64 on arm64).",
        fix="Build or pull the image for the nodes' architecture (`lanekit_node_arch`) and pin that digest.",
    ),
    Signature(
        id="entrypoint_not_found",
        title="container program not found",
        pattern=_re(r"executable file not found in \$PATH"),
        cause="The container command does not lead with a program that exists in the image.",
        fix="Give the lane an explicit entrypoint that leads with the engine program (e.g. `vllm serve`).",
    ),
    Signature(
        id="nccl_watchdog_timeout",
        title="NCCL collective timed out",
        pattern=_re(
            r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*timed? ?out"
            r"|Timeout at NCCL work|NCCL.*operation timed out"
        ),
        blame=_re(r"Missing node ranks: (?P<ranks>\d+(?:, ?\d+)*)"),
        kind=CONSEQUENCE,
        cause=(
            "A collective waited longer than the distributed timeout: usually another rank "
            "died or stalled first; otherwise the timeout is shorter than a phase that is "
            "legitimately slow."
        ),
        fix=(
            "Find the rank that stopped first (the root cause or the stalled rank named here); "
            "if the phase is legitimately slow, raise the lane's boot budget, which the plan "
            "renders into `--distributed-timeout-seconds` / `--dist-timeout`."
        ),
    ),
    Signature(
        id="nccl_error",
        title="NCCL communication error",
        pattern=_re(
            r"ncclSystemError|ncclRemoteError|ncclInternalError|ncclUnhandledCudaError"
            r"|NCCL error|NCCL WARN .*(?:fail|error|closed)"
        ),
        kind=CONSEQUENCE,
        fatal=False,
        cause="NCCL lost or could not set up a connection between ranks (a peer died, or the fabric settings disagree).",
        fix=(
            "If another rank failed first, fix that; otherwise check the fabric: NCCL_IB_HCA "
            "listing both RoCE twins, NCCL_IB_GID_INDEX unset or detected per host, MTU 9000, "
            "and add NCCL_DEBUG=INFO to the lane env to see the transport."
        ),
    ),
    Signature(
        id="peer_rank_went_away",
        title="a peer rank went away (its connection closed)",
        # gloo (vLLM CPU, and torch's CPU groups): "RuntimeError: [.../gloo/transport/tcp/pair.cc:553]
        # Connection closed by peer [172.31.222.11]:32989. This is typically caused by a remote worker
        # crashing." (tests/fixtures/real_vllm/rank1_killed_boot, rank1_killed_ready): printed by the
        # rank that survived, naming the address of the rank that died.
        pattern=_re(r"Connection closed by peer \[[^\]]+\]:\d+"),
        blame_ip=_re(r"Connection closed by peer \[(?P<ip>[^\]]+)\]"),
        supersedes=("peer_connection_lost",),
        kind=CONSEQUENCE,
        cause=(
            "A collective or barrier of this rank lost its connection to the peer whose address the "
            "line names: that rank's process died (killed, OOM, crashed) or its node went away. The "
            "tensor-parallel group is broken; the engine cannot recover."
        ),
        fix=(
            "Look at the rank the line blames (the one with that fabric address): its exit code, its "
            "log and its node's memory; fix that, then redeploy the whole lane (a rank cannot rejoin)."
        ),
    ),
    Signature(
        id="engine_core_dead",
        title="the vLLM engine core died",
        # Real vllm-cpu 0.32.0 (tests/fixtures/real_vllm): "EngineCore failed to start." / "Engine core
        # initialization failed. See root cause above." at boot; "EngineCore encountered a fatal
        # error." and "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."
        # at a request, after which the API server exits with code 0. An ordinary SIGTERM shutdown
        # logs an EngineDeadError too, after "[shutdown] API server: shutdown triggered": not a failure.
        pattern=_re(r"EngineDeadError|EngineCore encountered a fatal error|Engine core initialization failed"
                    r"|EngineCore failed to start", 0),
        not_after=_re(r"\[shutdown\] API server: shutdown triggered", 0),
        engines=("vllm",),
        kind=CONSEQUENCE,
        cause=(
            "vLLM's engine core process died: a worker hit an exception (printed above it in the same "
            "log, or a peer rank went away). The API server then stops, possibly with exit code 0, "
            "which is still a failure, not a clean stop."
        ),
        fix=(
            "Read the worker exception above the line (and the rank a `Connection closed by peer` line "
            "blames); fix that cause, then redeploy the lane."
        ),
    ),
    Signature(
        id="peer_connection_lost",
        title="a peer connection was lost",
        pattern=_re(r"Connection reset by peer|Broken pipe|Connection closed by peer|RuntimeError: Connection"
                    r"|the TP group is broken"),
        kind=CONSEQUENCE,
        fatal=False,
        cause="A rank lost its connection to a peer, usually because that peer exited.",
        fix="Look at the rank that exited or failed first; this line is its echo on the others.",
    ),
    # --- the P/D router (vllm-router, Rust; its texts come from vllm-project/router) -------
    Signature(
        id="router_workers_unreachable",
        title="the P/D router could not reach its prefill/decode endpoints",
        # src/routers/http/router.rs (vllm-project/router), wait_for_healthy_workers_async:
        #   "Timeout {}s waiting for hosts {:?} to become healthy. Please set
        #    --router-worker-startup-timeout-secs ..." (older versions: "Timeout waiting for workers
        #   to become healthy"); src/routers/http/pd_types.rs, PDRouterError: "Health check failed for
        #   worker: {url}", "Timeout waiting for worker: {url}".
        pattern=_re(
            r"Timeout \d+s waiting for hosts .* to become healthy"
            r"|Timeout waiting for workers? to become healthy"
            r"|Health check failed for worker: |Timeout waiting for worker: "
        ),
        roles=("router",),
        cause=(
            "The router gave up on the prefill/decode URLs it was given: their `/health` never "
            "answered (connection refused or timed out), because a pool is down or still loading, "
            "or the URL's address or port is not reachable from the router's node."
        ),
        fix=(
            "Make sure both pools' heads are up first (their own findings come before this one), "
            "that the planned pool endpoints (the router's `--prefill`/`--decode`, from the pools' "
            "fabric addresses and ports) answer `/health` from the router's node, and, if the pools "
            "only load slowly, raise `--worker-startup-timeout-secs` in `pd.router.args`."
        ),
    ),
    Signature(
        id="router_port_in_use",
        title="the P/D router's port is already taken",
        # src/server.rs (vllm-project/router), startup(): `TcpListener::bind(&addr).await?` returns
        # the io error to main(), which Rust prints as
        #   Error: Os { code: 98, kind: AddrInUse, message: "Address already in use" }
        pattern=_re(r"kind: AddrInUse|Address already in use|EADDRINUSE"),
        roles=("router",),
        supersedes=("address_in_use",),
        cause=(
            "The router could not bind the lane's API port on the prefill head's node: another "
            "process (a previous lane's router or head, or a pool's own API) already listens there."
        ),
        fix=(
            "Tear down the previous lane (`ansible-playbook lanekit.serving.teardown_lane -i <inventory> "
            "-e lane=<previous lane>`), or give this lane another "
            "`serve.port` (the router's `--port`) that no pool endpoint on that node uses."
        ),
    ),
    Signature(
        id="router_bad_argument",
        title="the P/D router refused its command line",
        # clap 4 (the router's argument parser, src/main.rs CliArgs): "error: unexpected argument
        # '--x' found", "error: invalid value 'v' for '--policy <POLICY>'", "error: a value is
        # required for '--port <PORT>' but none was supplied"; src/main.rs
        # split_prefill_args_from_others: "--prefill requires a URL immediately after",
        # "Invalid url {url}"; src/main.rs to_router_config: "vLLM PD disaggregation mode requires
        # one of: --vllm-discovery-address, --prefill/--decode URLs, ...".
        pattern=_re(
            r"error: unexpected argument '[^']*' found"
            r"|error: invalid value '[^']*' for '--"
            r"|error: a value is required for '--"
            r"|--prefill requires a URL immediately after|\bInvalid url -"
            r"|PD disaggregation mode requires one of"
        ),
        roles=("router",),
        supersedes=("unknown_engine_flag",),
        cause=(
            "The vllm-router in the image does not accept one of the router's flags or values "
            "(an unknown flag, a policy it does not offer, a flag without its value)."
        ),
        fix=(
            "Fix or remove the flag in the lane's `pd.router.args` (or `pd.router.policy`) for "
            "this router version; `vllm-router --help` in the image lists what it takes."
        ),
    ),
    Signature(
        id="router_endpoint_request_failed",
        title="the P/D router could not send a request to a pool endpoint",
        # reqwest's error text, as the router logs a failed upstream call (src/routers/http/pd_router.rs
        # logs "Failed to proxy request server: {e}" etc.): "error sending request for url (URL)",
        # with hyper-util's cause "tcp connect error: Connection refused (os error 111)".
        pattern=_re(r"error sending request for url \(|tcp connect error"),
        roles=("router",),
        kind=CONSEQUENCE,
        # The router retries and keeps serving through the other endpoints: not a lost boot.
        fatal=False,
        cause="A prefill or decode endpoint refused or dropped the router's connection while it routed a request.",
        fix="Look at the pool rank behind that URL (it usually exited or restarted first); the router recovers once it answers again.",
    ),
    # --- derived by the wait loop (no pattern) ---------------------------------------------
    Signature(
        id="rank_never_joined",
        title="a rank never joined the rendezvous",
        cause="The named ranks never reached the distributed rendezvous while the others waited there.",
        fix=(
            "On the named node: check the container runs and its log, that the head's fabric "
            "IP and rendezvous port are reachable from it, and that its fabric interface "
            "variables (fabric_ip, fabric_ifname) are right in the inventory."
        ),
    ),
    Signature(
        id="stalled",
        title="lane stalled",
        cause="No rank made progress (phase, shards, graph capture, API) for longer than the lane's stall time.",
        fix=(
            "Read the named ranks' log tails in the bundle; a hung node, a cold page cache "
            "(loads crawl) or a wedged collective are the usual causes; raise `boot.stall_s` "
            "only if the silence is expected."
        ),
        kind=CONSEQUENCE,
    ),
    Signature(
        id="budget_exhausted",
        title="boot budget exhausted",
        cause="The lane did not become ready within its boot budget.",
        fix=(
            "If the ranks were still progressing, raise `boot.budget_s` (it also raises the "
            "engine timeouts); otherwise fix the slowest phase first (warm the page cache)."
        ),
        kind=CONSEQUENCE,
    ),
    Signature(
        id="container_exited",
        title="a rank container exited",
        cause="A rank's container exited without a known failure line.",
        fix="Read the rank's log tail in the bundle; the last exception line is quoted above.",
    ),
    Signature(
        id="container_missing",
        title="a rank container does not exist",
        cause="The planned container of a rank is not on its node (never started, or removed).",
        fix="Run the ranks role (`ansible-playbook lanekit.serving.deploy_lane`) so every rank of the plan is started.",
    ),
    Signature(
        id="api_unhealthy",
        title="the API did not stay healthy",
        cause="The head's API answered and then failed a readiness probe within the stability window.",
        fix="Read the head's log tail in the bundle; a crash during the first requests usually names its kernel path.",
    ),
    Signature(
        id="oom_killed",
        title="the kernel OOM killer stopped a rank",
        cause="The rank's container was killed by the kernel for using too much host memory.",
        fix=(
            "Lower the memory fraction, check the host memory figures in the bundle (unified "
            "memory counts page cache), and keep other processes off the node."
        ),
    ),
)

BY_ID: dict[str, Signature] = {sig.id: sig for sig in SIGNATURES}
_ORDER: dict[str, int] = {sig.id: i for i, sig in enumerate(SIGNATURES)}
_PATTERNED: tuple[Signature, ...] = tuple(sig for sig in SIGNATURES if not sig.derived)

# A python exception line, used to quote the last error of an unknown exit.
_EXCEPTION_LINE = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Interrupt)|AssertionError)\b: \S")


def unknown_engine_scopes(signatures: Iterable[Signature] = SIGNATURES) -> list[str]:
    """'<id>: <engine>' for each engine a signature is scoped to that the engine table does not know."""
    return [f"{sig.id}: {name}" for sig in signatures for name in sig.engines if name not in _engines.ENGINES]


def get(signature_id: str) -> Signature:
    """The signature with this id (KeyError for an unknown id: a programming error)."""
    return BY_ID[signature_id]


def _evidence(line: str) -> str:
    line = line.strip()
    if len(line) > _EVIDENCE_MAX:
        return line[: _EVIDENCE_MAX - 1] + "…"
    return line


class LineScanner:
    """Incremental matcher for one rank's log: feed lines as they arrive, keep what matched.

    Each signature is recorded once per rank, with its first evidence line. The scanner keeps a
    small window of previous lines for signatures that need context (the same failure spread
    over a traceback).
    """

    def __init__(self, engine: str | None = None, role: str | None = None) -> None:
        self.engine = engine
        self.role = role
        self.found: dict[str, str] = {}
        self.last_exception: str = ""
        self._window: list[str] = []
        # Signatures no longer recorded in this log (their ``not_after`` line was seen).
        self._stopped: set[str] = set()
        self._window_max = max((s.context_lines for s in _PATTERNED if s.context), default=0) + 1
        self._active = tuple(
            s for s in _PATTERNED
            if (not s.engines or engine is None or engine in s.engines)
            and (not s.roles or role in s.roles)
        )

    def feed(self, lines: Iterable[str]) -> list[str]:
        """Scan new lines; return the ids of signatures found for the first time."""
        new: list[str] = []
        for line in lines:
            self._window.append(line)
            if len(self._window) > self._window_max:
                del self._window[0]
            if _EXCEPTION_LINE.search(line):
                self.last_exception = _evidence(line)
            on_line: list[Signature] = []
            for sig in self._active:
                if sig.not_after is not None and sig.id not in self._stopped and sig.not_after.search(line):
                    self._stopped.add(sig.id)
                if sig.pattern is None or sig.id in self._stopped or not sig.pattern.search(line):
                    continue
                if sig.context is not None:
                    window = self._window[-(sig.context_lines + 1):]
                    if not any(sig.context.search(prev) for prev in window):
                        continue
                on_line.append(sig)
            superseded = {other for sig in on_line for other in sig.supersedes}
            for sig in on_line:
                if sig.id in self.found or sig.id in superseded:
                    continue
                self.found[sig.id] = _evidence(line)
                new.append(sig.id)
        return new


def scan_text(text: str, engine: str | None = None, role: str | None = None) -> dict[str, str]:
    """Signature id -> first evidence line for one blob of text (one rank's log, an error)."""
    scanner = LineScanner(engine, role)
    scanner.feed(text.splitlines())
    return dict(scanner.found)


@dataclass
class SignatureMatch:
    """One signature seen on one or more ranks."""

    signature: Signature
    ranks: list[int] = field(default_factory=list)
    evidence: str = ""
    detail: str = ""
    blamed: list[int] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.signature.id

    def to_dict(self) -> dict:
        return {
            "id": self.signature.id,
            "title": self.signature.title,
            "kind": self.signature.kind,
            "ranks": list(self.ranks),
            "blamed": list(self.blamed),
            "evidence": self.evidence,
            "detail": self.detail,
            "cause": self.signature.cause,
            "fix": self.signature.fix,
        }


def collect(found_by_rank: Mapping[int, Mapping[str, str]],
            ips: Mapping[str, int] | None = None) -> list[SignatureMatch]:
    """Group per-rank findings ({rank: {sig id: evidence}}) into matches, roots first.

    ``ips`` maps the plan's fabric addresses to node ranks: a line that names a peer's address
    (``Signature.blame_ip``) then blames that rank.
    """
    matches: dict[str, SignatureMatch] = {}
    for rank in sorted(found_by_rank):
        for sig_id, evidence in found_by_rank[rank].items():
            match = matches.get(sig_id)
            if match is None:
                match = matches[sig_id] = SignatureMatch(get(sig_id), [], evidence, detail_of(get(sig_id), evidence))
            match.ranks.append(rank)
            for blamed in blamed_ranks(match.signature, evidence, ips):
                if blamed not in match.blamed:
                    match.blamed.append(blamed)
    for match in matches.values():
        match.blamed.sort()
    return sort_matches(matches.values())


def blamed_ranks(sig: Signature, evidence: str, ips: Mapping[str, int] | None = None) -> list[int]:
    """Node ranks a line blames: its 'Missing node ranks: ...', or the rank whose fabric address
    (``ips``: address -> node rank) it names as a peer, if the signature reads any."""
    if not evidence:
        return []
    if sig.blame is not None:
        found = sig.blame.search(evidence)
        if found:
            return [int(x) for x in re.findall(r"\d+", found.group("ranks"))]
    if sig.blame_ip is not None and ips:
        found = sig.blame_ip.search(evidence)
        if found and found.group("ip") in ips:
            return [int(ips[found.group("ip")])]
    return []


def detail_of(sig: Signature, evidence: str) -> str:
    """The signature's detail sentence filled from its evidence line ('' without one)."""
    if sig.detail is None or not evidence:
        return ""
    found = sig.detail.search(evidence)
    if not found:
        return ""
    return sig.detail_text.format(**{k: (v or "").strip() for k, v in found.groupdict().items()})


def sort_matches(matches: Iterable[SignatureMatch]) -> list[SignatureMatch]:
    """Roots before consequences, then table order, then lowest rank."""
    return sorted(
        matches,
        key=lambda m: (m.signature.kind != ROOT, _ORDER[m.signature.id], m.ranks[:1] or [1 << 30]),
    )


def derived(signature_id: str, ranks: Sequence[int], detail: str = "") -> SignatureMatch:
    """A match raised by the wait loop itself (stall, budget, never joined, exit)."""
    return SignatureMatch(get(signature_id), sorted(ranks), "", detail)


def rank_names(ranks: Sequence[int], hosts: Mapping[int, str] | None = None) -> str:
    """'rank 3 (spark-04)' / 'ranks 2 (spark-03), 5 (spark-06)'."""
    hosts = hosts or {}
    parts = [f"{r} ({hosts[r]})" if r in hosts else str(r) for r in ranks]
    if not parts:
        return "no rank"
    return ("rank " if len(parts) == 1 else "ranks ") + ", ".join(parts)


def describe(match: SignatureMatch, hosts: Mapping[int, str] | None = None) -> str:
    """One paragraph: which ranks, what they printed, why, and the fix."""
    sig = match.signature
    head = f"[{sig.id}] {sig.title}"
    if match.ranks:
        head += f": {rank_names(match.ranks, hosts)}"
    parts = [head + "."]
    if match.blamed:
        parts.append(f"The line blames {rank_names(match.blamed, hosts)}.")
    if match.detail:
        parts.append(match.detail.rstrip(".") + ".")
    if match.evidence:
        parts.append(f'Log: "{match.evidence}".')
    parts.append("Cause: " + sig.cause)
    parts.append("Fix: " + sig.fix)
    return " ".join(parts)


def explain_text(text: str, engine: str | None = None) -> list[SignatureMatch]:
    """Matches for a free text (e.g. a docker error message), roots first."""
    found = scan_text(text, engine)
    matches = collect({0: found}) if found else []
    for match in matches:
        match.ranks = []
    return matches
