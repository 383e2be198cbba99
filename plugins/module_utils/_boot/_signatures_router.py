# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Failure signatures, one table of the scanner's (``_signatures.SIGNATURES``): the lines of the P/D
router (vllm-router, Rust; its texts come from vllm-project/router), read only on the router role's
ranks (``roles=("router",)``).

Pure data. The scanner reads the tables in the order ``_signatures`` joins them, and that order
is the order of a report (roots first, then table order), so a signature moves between tables
only on purpose.
"""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._boot._signature import CONSEQUENCE, Signature, _re

ROUTER: tuple[Signature, ...] = (
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
)
