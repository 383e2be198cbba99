# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The engine table: everything lanekit knows about each serving engine, in one record per engine.

One job: declare, as data, how each engine is launched, which flags and timeouts the plan owns,
how its logs mark boot progress, and in which order its ranks start and stop. The plan
(``_plan``), the lint rules (``_lint``), the boot tracker (``_ranklog``, ``_boot``) and the roles read
these records; none of them names an engine's flag, variable or default on its own.

Adding an engine (or a process role such as a router) means adding one :class:`Engine` record
and, if its command line has a new shape, one argv builder below. The records follow the
engines' own documentation.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError


@dataclass(frozen=True)
class Timeout:
    """One engine timeout and what carries it to the engine.

    ``budget`` timeouts are filled from the lane's ``boot.budget_s`` when the lane leaves them
    unset; the others keep the engine's ``stock_s`` unless the lane sets them.
    """

    name: str
    carrier: str  # "env" or "flag"
    key: str  # the environment variable or the flag
    stock_s: float
    budget: bool = False
    covers: str = ""  # what the timeout must outlast, for messages


@dataclass(frozen=True)
class Milestone:
    """A log line that moves a rank's boot forward (phase) and records when (event)."""

    pattern: re.Pattern
    phase: str
    event: str


def _m(pattern: str, phase: str, event: str) -> Milestone:
    return Milestone(re.compile(pattern), phase, event)


@dataclass(frozen=True)
class RankArgs:
    """What an argv builder needs to render one rank's engine arguments."""

    model_path: str
    served_name: str
    port: int
    rendezvous_port: int
    rank: int
    nnodes: int
    head_ip: str
    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int
    lane_args: list  # the lane's own serve.args, rendered (plan-owned flags refused before)
    bind_host: str = "0.0.0.0"
    # "tp": one group over the nodes (--nnodes/--node-rank); "dp": one engine per node joined by
    # data parallelism (--data-parallel-*), every rank with its own start rank.
    layout: str = "tp"
    data_parallel_local: int = 1
    data_parallel_start: int = 0
    serves_http: bool = False  # a data-parallel rank above 0 that runs its own API server


@dataclass(frozen=True)
class Engine:
    """One engine (or process role) kind."""

    name: str
    kind: str  # "engine" (a rank of the model) or "router" (a proxy in front of ranks)
    program: tuple[str, ...]  # the default program, when the image gives no entrypoint
    # Flags the plan renders itself, each mapped to the lane key (or source) to use instead.
    plan_owned: Mapping[str, str]
    host_ip_env: str  # the variable through which a rank advertises its fabric address
    timeouts: tuple[Timeout, ...]
    memory_fraction_flag: str
    max_len_flag: str
    argv: Callable[[RankArgs], list]
    # Which ranks answer HTTP: the head always; workers too where the engine runs a health server.
    workers_serve_health: bool
    # Roles started first (workers wait for the head's rendezvous store) and stopped first.
    start_first: tuple[str, ...] = ("head",)
    stop_first: tuple[str, ...] = ("head",)
    milestones: tuple[Milestone, ...] = ()
    # Lines that identify the engine in a log whose engine is not known (failure triage).
    log_hint: re.Pattern | None = None
    # How messages name the engine (e.g. "SGLang").
    display: str = ""
    # Flags a checkpoint in Mistral's consolidated layout (no config.json) needs on this engine.
    consolidated_layout_args: Mapping[str, str] = field(default_factory=dict)
    # A patch the image must bake for a timeout to take effect: {timeout name: patch file stem}.
    timeout_patches: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, object] = field(default_factory=dict)
    # The API key (lanekit_api_key): the flag the engine takes it with, and the environment variable
    # it also reads it from ("" when it has none: the plan then hands the flag over inside the
    # engine's process, _secrets.key_flag_wrap, so the key stays out of argv and plan.json).
    api_key_flag: str = "--api-key"
    api_key_env: str = ""
    # The flag that loads an ASGI middleware by import path, for an engine whose own key check
    # leaves paths open (vLLM: only /v1, /v2, /inference, /cohere): with a key, every rank gets
    # lanekit's KeyGuard (_plan/_keyguard.py) through it. "" when the engine guards every path itself.
    key_guard_flag: str = ""
    # Settings one rank of a group may have on its own (a host's lane_host_overrides): what only
    # changes that process's logging or its local timeouts (the env-carried ones of ``timeouts``). Every other
    # flag or variable must be the same on every rank of the group: ranks that disagree on
    # --max-num-seqs or on NCCL_ALGO schedule or communicate differently, and hang or crash.
    rank_local_args: frozenset = frozenset()
    rank_local_env: re.Pattern = re.compile(r"(?!)")
    # Flags only this engine has (the other engines' parsers refuse them: "unrecognized arguments"),
    # each with the setting it makes; another engine's flag for the same setting is its spelling there.
    # Only flags known to be absent from every other engine's parser belong here.
    distinct_args: Mapping[str, str] = field(default_factory=dict)

    def __deepcopy__(self, memo: dict) -> Engine:
        # A record is immutable data that every lane of one engine shares: a deep copy of a lane
        # (a P/D pool's view, _plan/_layout.pool_lane) keeps pointing at the same record.
        return self

    def may_differ_per_rank(self, kind: str, name: str) -> bool:
        """Whether ``serve.<kind>.<name>`` (kind ``args`` or ``env``) may differ between the ranks of a group."""
        if kind == "args":
            return name in self.rank_local_args
        local = any(t.carrier == "env" and t.key == name for t in self.timeouts)
        return local or bool(RANK_LOCAL_ENV.fullmatch(name) or self.rank_local_env.fullmatch(name))

    def timeout(self, name: str) -> Timeout | None:
        return next((t for t in self.timeouts if t.name == name), None)

    def batches(self, roles: list[str], first: tuple[str, ...]) -> list[list[int]]:
        """Rank batches (node_ranks) for roles listed per rank: the ``first`` roles, then the rest."""
        head = [i for i, role in enumerate(roles) if role in first]
        rest = [i for i, role in enumerate(roles) if role not in first]
        return [batch for batch in (head, rest) if batch]

    def budget_defaults(self, budget_s: float) -> tuple[dict, dict]:
        """(env, flags) the boot budget fills when the lane leaves them unset."""
        env: dict[str, float] = {}
        flags: dict[str, float] = {}
        for timeout in self.timeouts:
            if timeout.budget:
                (env if timeout.carrier == "env" else flags)[timeout.key] = budget_s
        return env, flags


# Variables every engine's ranks may set on their own: what only changes one process's logging.
# (A node's network devices come from its inventory variables, fabric_ifname and friends.)
RANK_LOCAL_ENV = re.compile(
    r"NCCL_DEBUG(?:_SUBSYS|_FILE)?|TORCH_CPP_LOG_LEVEL|TORCH_DISTRIBUTED_DEBUG|PYTHONUNBUFFERED|PYTHONFAULTHANDLER")


def _vllm_argv(a: RankArgs) -> list:
    # vLLM takes the model positionally; headless ranks (above 0) serve no HTTP.
    argv = [a.model_path, "--served-model-name", a.served_name]
    if a.rank == 0 or a.serves_http:
        argv += ["--host", a.bind_host, "--port", str(a.port)]
    argv += list(a.lane_args)
    argv += ["--tensor-parallel-size", str(a.tensor_parallel)]
    if a.layout == "dp":
        # One engine per node: the data-parallel group meets at the head's RPC port (the plan's
        # rendezvous port); each node's first DP rank is its start rank.
        argv += ["--data-parallel-size", str(a.data_parallel), "--data-parallel-size-local",
                 str(a.data_parallel_local), "--data-parallel-address", a.head_ip,
                 "--data-parallel-rpc-port", str(a.rendezvous_port)]
        if a.rank > 0:
            argv += ["--data-parallel-start-rank", str(a.data_parallel_start)]
        return argv
    if a.pipeline_parallel > 1:
        argv += ["--pipeline-parallel-size", str(a.pipeline_parallel)]
    if a.nnodes > 1:
        argv += ["--nnodes", str(a.nnodes), "--node-rank", str(a.rank),
                 "--master-addr", a.head_ip, "--master-port", str(a.rendezvous_port)]
        if a.rank > 0:
            argv.append("--headless")
    return argv


def _sglang_argv(a: RankArgs) -> list:
    # Every SGLang rank gets --host/--port: workers serve their health endpoint there.
    argv = ["--model-path", a.model_path, "--served-model-name", a.served_name,
            "--host", a.bind_host, "--port", str(a.port)]
    argv += list(a.lane_args)
    argv += ["--tp", str(a.tensor_parallel)]
    if a.pipeline_parallel > 1:
        argv += ["--pp-size", str(a.pipeline_parallel)]
    if a.data_parallel > 1:
        argv += ["--dp-size", str(a.data_parallel)]
    if a.nnodes > 1:
        argv += ["--nnodes", str(a.nnodes), "--node-rank", str(a.rank),
                 "--dist-init-addr", f"{a.head_ip}:{a.rendezvous_port}"]
    return argv


VLLM = Engine(
    name="vllm",
    kind="engine",
    program=("vllm", "serve"),
    plan_owned={
        "--tensor-parallel-size": "topology.tensor_parallel", "-tp": "topology.tensor_parallel",
        "--pipeline-parallel-size": "topology.pipeline_parallel", "-pp": "topology.pipeline_parallel",
        "--nnodes": "topology.nodes", "--node-rank": "the inventory order of lane_nodes",
        "--master-addr": "the head host's fabric_ip", "--master-port": "serve.rendezvous_port",
        "--headless": "the plan (ranks above 0)", "--host": "the plan", "--port": "serve.port",
        "--served-model-name": "model.served_name",
        "--api-key": "the variable lanekit_api_key (a secret, never in the lane file)",
    },
    host_ip_env="VLLM_HOST_IP",
    timeouts=(
        Timeout("engine_ready", "env", "VLLM_ENGINE_READY_TIMEOUT_S", 600.0, budget=True,
                covers="loading and warm-up"),
        Timeout("distributed", "flag", "--distributed-timeout-seconds", 600.0, budget=True,
                covers="the slowest rank's rendezvous and load"),
    ),
    memory_fraction_flag="--gpu-memory-utilization",
    max_len_flag="--max-model-len",
    argv=_vllm_argv,
    workers_serve_health=False,
    # Stopping the head first ends the API before the group breaks up; headless workers follow.
    start_first=("head",),
    stop_first=("head",),
    # The headless ranks print no ready line at all (real vLLM): the wait counts them up when they
    # run, have loaded and the head is ready (``_boot.LaneTracker.infer``), never by a line of theirs.
    milestones=(
        # Real vLLM (0.32, tests/fixtures/real_vllm/ok) prints nothing while the group forms: the
        # head's last line is its worker's "distributed_init_method=..."; the first line after the
        # group formed is "rank R in world size W is assigned as DP rank ...".
        _m(r"Launching vLLM .*headless|headless multiproc executor|Initializing a V1 LLM engine"
           r"|distributed_init_method=|vLLM API server version",
           "rendezvous", "rendezvous"),
        _m(r"is assigned as DP rank|vLLM is using nccl|Starting to load model",
           "loading", "load_begin"),
        _m(r"Loading weights took|Model loading took", "barrier", "loaded"),
        # GPU: "Available KV cache memory", "GPU KV cache size: N tokens, Maximum concurrency ...";
        # CPU: "Explicitly set (1.0/23.54) GiB for KV cache on node 0." (every rank, the headless ones
        # too) and "CPU KV cache size: N tokens, Maximum concurrency ..." (the head).
        _m(r"Memory profiling takes|Available KV cache memory|KV cache size: |Maximum concurrency for"
           r"|Explicitly set \([^)]*\) GiB for KV cache|torch\.compile takes|Dynamo bytecode transform",
           "kv_profile", "profile"),
        _m(r"Capturing CUDA graphs", "graph_capture", "capture"),
        _m(r"Graph capturing finished|init engine \(profile, create kv cache, warmup model\) took",
           "warmup", "warmup"),
        _m(r"Starting vLLM (?:API )?server(?: \d+)? on|Application startup complete|Uvicorn running on",
           "ready", "api_up"),
    ),
    log_hint=re.compile(r"\bvLLM\b|vllm\.entrypoints"),
    display="vLLM",
    consolidated_layout_args={"--tokenizer-mode": "mistral", "--config-format": "mistral",
                              "--load-format": "mistral"},
    extra={"default_rendezvous_port": 29501,
           # Flags the plan renders for data-parallel layouts (topology.layout dp, P/D dep pools) only.
           "dp_owned": {
               "--data-parallel-size": "topology.data_parallel", "-dp": "topology.data_parallel",
               "--data-parallel-size-local": "topology.data_parallel_local",
               "--data-parallel-start-rank": "the plan (node rank x topology.data_parallel_rank_step)",
               "--data-parallel-address": "the head host's fabric_ip",
               "--data-parallel-rpc-port": "serve.rendezvous_port"}},
    # vLLM binds --api-key from VLLM_API_KEY when the flag is absent.
    api_key_env="VLLM_API_KEY",
    # vLLM checks the key under /v1, /v2, /inference and /cohere only (0.32.0), not on /tokenize,
    # /pooling, /score, /rerank or /invocations; --middleware adds the check everywhere else.
    key_guard_flag="--middleware",
    # Logging of one process; the head's HTTP server only (headless ranks serve none).
    rank_local_args=frozenset({"--uvicorn-log-level", "--disable-log-stats", "--enable-log-requests",
                               "--disable-log-requests", "--disable-uvicorn-access-log"}),
    rank_local_env=re.compile(r"VLLM_LOGGING_LEVEL|VLLM_LOG_STATS_INTERVAL|VLLM_TRACE_FUNCTION"
                              r"|VLLM_CPU_OMP_THREADS_BIND"),
    distinct_args={
        "--max-model-len": "max_len", "--gpu-memory-utilization": "memory_fraction",
        "--max-num-seqs": "max_running_requests", "--distributed-timeout-seconds": "distributed_timeout",
        "--enforce-eager": "no_cuda_graph", "--speculative-config": "speculative",
        "--max-num-batched-tokens": "max_num_batched_tokens", "--enable-prefix-caching": "enable_prefix_caching",
        "--no-enable-prefix-caching": "no_enable_prefix_caching",
        "--enable-auto-tool-choice": "auto_tool_choice", "--mm-processor-cache-gb": "mm_processor_cache_gb",
        "--config-format": "config_format", "--cuda-graph-sizes": "cuda_graph_sizes",
        "--max-cudagraph-capture-size": "max_cudagraph_capture_size", "--compilation-config": "compilation_config",
        "--kv-transfer-config": "kv_transfer_config", "--async-scheduling": "async_scheduling",
        "--limit-mm-per-prompt": "limit_mm_per_prompt", "--swap-space": "swap_space",
        "--all2all-backend": "all2all_backend",
        "--data-parallel-hybrid-lb": "data_parallel_hybrid_lb", "--uvicorn-log-level": "uvicorn_log_level",
    },
)

SGLANG = Engine(
    name="sglang",
    kind="engine",
    program=("python3", "-m", "sglang.launch_server"),
    plan_owned={
        "--tp": "topology.tensor_parallel", "--tp-size": "topology.tensor_parallel",
        "--tensor-parallel-size": "topology.tensor_parallel", "--pp-size": "topology.pipeline_parallel",
        "--nnodes": "topology.nodes", "--node-rank": "the inventory order of lane_nodes",
        "--dist-init-addr": "the head host's fabric_ip and serve.rendezvous_port", "--host": "the plan",
        "--port": "serve.port", "--model-path": "model.dir under lanekit_weights_root",
        "--served-model-name": "model.served_name",
        "--api-key": "the variable lanekit_api_key (a secret, never in the lane file)",
    },
    host_ip_env="SGLANG_HOST_IP",
    timeouts=(
        Timeout("distributed", "flag", "--dist-timeout", 600.0, budget=True,
                covers="the slowest rank's rendezvous and load"),
        # Stock SGLang hard-codes 480 s for the post-load barrier; the baked patch reads this variable.
        Timeout("barrier", "env", "SGLANG_UNBALANCED_LOAD_TIMEOUT_S", 480.0, budget=True,
                covers="the slowest rank's load"),
        Timeout("watchdog", "flag", "--watchdog-timeout", 300.0, covers="warm-up"),
    ),
    memory_fraction_flag="--mem-fraction-static",
    max_len_flag="--context-length",
    argv=_sglang_argv,
    workers_serve_health=True,
    # SGLang workers ignore SIGTERM until rank 0 broadcasts its shutdown, so rank 0 stops first.
    start_first=("head",),
    stop_first=("head",),
    milestones=(
        _m(r"server_args=ServerArgs|Init torch distributed begin", "rendezvous", "rendezvous"),
        _m(r"Init torch distributed ends|Load weight begin", "loading", "load_begin"),
        _m(r"Load weight end|Post-load barrier", "barrier", "loaded"),
        _m(r"Memory pool end|KV Cache is allocated|max_total_num_tokens=", "kv_profile", "profile"),
        _m(r"Capture cuda graph begin|Capturing batches", "graph_capture", "capture"),
        _m(r"Capture cuda graph end|NCCL/RCCL/HCCL warmup completed|Uvicorn running on"
           r"|Application startup complete", "warmup", "warmup"),
        _m(r"The server is fired up and ready to roll", "ready", "api_up"),
        _m(r"Dummy health check server started", "ready", "worker_ready"),
    ),
    log_hint=re.compile(r"\bsglang\b|SGLang|ServerArgs\("),
    display="SGLang",
    consolidated_layout_args={"--tokenizer-mode": "mistral"},
    # Stock SGLang ignores SGLANG_UNBALANCED_LOAD_TIMEOUT_S; the baked patch makes it read it.
    timeout_patches={"barrier": "patch_barrier_timeout"},
    # Logging of one process (every SGLang rank serves its own health endpoint).
    rank_local_args=frozenset({"--log-level", "--log-level-http", "--log-requests", "--log-requests-level"}),
    rank_local_env=re.compile(r"SGLANG_LOGGING_CONFIG_PATH"),
    distinct_args={
        "--context-length": "max_len", "--mem-fraction-static": "memory_fraction",
        "--max-running-requests": "max_running_requests", "--dist-timeout": "distributed_timeout",
        "--disable-cuda-graph": "no_cuda_graph", "--speculative-algorithm": "speculative",
        "--speculative-num-steps": "speculative_num_steps", "--speculative-eagle-topk": "speculative_eagle_topk",
        "--speculative-num-draft-tokens": "speculative_num_draft_tokens", "--watchdog-timeout": "watchdog_timeout",
        "--chunked-prefill-size": "chunked_prefill_size", "--disable-radix-cache": "disable_radix_cache",
        "--cuda-graph-max-bs": "cuda_graph_max_bs", "--enable-dp-attention": "enable_dp_attention",
        "--moe-runner-backend": "moe_runner_backend", "--dsa-prefill-backend": "dsa_prefill_backend",
        "--dsa-decode-backend": "dsa_decode_backend", "--max-total-tokens": "max_total_tokens",
    },
)

ENGINES: Mapping[str, Engine] = {e.name: e for e in (VLLM, SGLANG)}


@dataclass(frozen=True)
class RouterArgs:
    """What the router's argv builder needs: its pools' endpoints and its own address."""

    prefill: list  # http://address:port of each prefill endpoint
    decode: list
    port: int
    policy: str = "round_robin"
    intra_node_data_parallel_size: int = 1
    lane_args: list = field(default_factory=list)
    bind_host: str = "0.0.0.0"


def _vllm_router_argv(a: RouterArgs) -> list:
    # The recipe site's router command: policy, P/D mode, the endpoints, then its own address.
    argv = ["--policy", a.policy, "--vllm-pd-disaggregation"]
    for url in a.prefill:
        argv += ["--prefill", url]
    for url in a.decode:
        argv += ["--decode", url]
    argv += ["--host", a.bind_host, "--port", str(a.port),
             "--intra-node-data-parallel-size", str(a.intra_node_data_parallel_size)]
    return argv + list(a.lane_args)


@dataclass(frozen=True)
class ProcessRole:
    """A process of a lane that is not a rank of the model (the P/D router)."""

    name: str
    program: tuple[str, ...]
    argv: Callable[[RouterArgs], list]
    plan_owned: Mapping[str, str]
    milestones: tuple[Milestone, ...]


# The P/D router in front of the prefill and decode pools: it starts after the pools (it waits
# for their health) and stops before them (no request is routed into a stopping pool).
VLLM_ROUTER = ProcessRole(
    name="router",
    program=("vllm-router",),
    argv=_vllm_router_argv,
    plan_owned={"--prefill": "pd.prefill", "--decode": "pd.decode", "--host": "the plan", "--port": "serve.port",
                "--policy": "pd.router.policy", "--vllm-pd-disaggregation": "the plan",
                "--intra-node-data-parallel-size": "pd.router.intra_node_data_parallel_size"},
    milestones=(
        _m(r"Router configuration|Waiting for \d+ workers? to become healthy", "rendezvous", "rendezvous"),
        _m(r"Worker .* is healthy", "loading", "load_begin"),
        _m(r"All workers are healthy", "warmup", "warmup"),
        _m(r"Starting router on|Router listening on", "ready", "api_up"),
    ),
)
ROLES: Mapping[str, ProcessRole] = {"router": VLLM_ROUTER}


def layout_owned(engine: Engine, layout: str) -> Mapping[str, str]:
    """The flags the plan renders for a lane of ``layout``: the engine's own, plus the data-parallel ones for dp."""
    if layout in ("dp", "pd"):
        dp_owned = cast("Mapping[str, str]", engine.extra.get("dp_owned") or {})
        return {**engine.plan_owned, **dp_owned}
    return engine.plan_owned


# Start batches and stop batches of a P/D lane, by rank role: the pools' heads (their own
# rendezvous stores), their workers, then the router; stopping runs the other way round.
PD_START_ORDER: tuple[tuple[str, ...], ...] = (("prefill-head", "decode-head"), ("prefill-worker", "decode-worker"),
                                               ("router",))
PD_STOP_ORDER: tuple[tuple[str, ...], ...] = (("router",), ("prefill-head", "decode-head"),
                                              ("prefill-worker", "decode-worker"))
# Roles whose rank answers the lane's API (the readiness probes go there).
API_ROLES = ("head", "router")

# Milestones every engine prints (the weight bar names the phase on its own).
COMMON_MILESTONES: tuple[Milestone, ...] = (
    _m(r"Loading safetensors checkpoint shards", "loading", "load_begin"),
)


def foreign_flag(engine: Engine, flag: str) -> tuple[Engine, str | None] | None:
    """(the engine that has ``flag``, ``engine``'s own flag for that setting or None) when ``flag`` is
    another engine's only; None when it may be ``engine``'s (lanekit does not know every flag)."""
    for other in ENGINES.values():
        setting = other.distinct_args.get(flag)
        if other is engine or setting is None or flag in engine.distinct_args:
            continue
        own = next((f for f, s in engine.distinct_args.items() if s == setting), None)
        return other, own
    return None


def get(name: str | None) -> Engine:
    """The record of engine ``name``; a sentence naming the known engines otherwise."""
    try:
        return ENGINES[str(name)]
    except KeyError:
        raise LanekitError(
            f"engine {name!r} is not one lanekit knows; known engines: {', '.join(sorted(ENGINES))}."
        ) from None


def milestones(name: str | None, role: str | None = None) -> tuple[Milestone, ...]:
    """The milestones to read a log with: the engine's own and the common ones (all when unknown)."""
    if role is not None and role in ROLES:
        return ROLES[role].milestones
    if name is not None and name in ENGINES:
        return ENGINES[name].milestones + COMMON_MILESTONES
    return tuple(m for e in ENGINES.values() for m in e.milestones) + COMMON_MILESTONES


def guess_from_log(text: str) -> str | None:
    """The engine a log line names, for logs whose engine is not known."""
    for engine in ENGINES.values():
        if engine.log_hint is not None and engine.log_hint.search(text):
            return engine.name
    return None
