# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Lint rules: the bring-up report's boot ledger, checked before anything boots.

Each rule has an id, a severity (``error`` stops the plan, ``warning`` is printed) and a message
that says what would go wrong on hardware and the fix. Rules read a LintContext: the validated
lane, its hardware profile, the resolved image and the inventory hosts. They never touch a host.

Each rule says how it scopes (which engines, which hardware). The GPU memory rules (kv-budget,
kv-budget-unchecked, cuda-graph-sizes) apply where the KV cache is a fraction of device memory
(``_hardware.kv_in_device_memory``); the SM12x rules where the profile has CUDA compute capability 12.x;
the ``cpu-*`` rules where the profile declares the engine's CPU backend (``_hardware.cpu_backend``).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import (
    cpu_backend,
    kv_in_device_memory,
    requires_gpu,
    sm_major,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import effective_env, timeout_value
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._values import flag_number
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _kvbudget

ERROR = "error"
WARNING = "warning"


@dataclass
class LintContext:
    lane: dict
    profile: dict
    image: dict | None = None
    hosts: list = field(default_factory=list)
    node_ranks: dict = field(default_factory=dict)  # host -> explicit node_rank host var, if any
    purpose: str = "plan"  # plan | deploy
    rank_container: dict = field(default_factory=dict)  # how ranks reach the GPUs (_hardware.rank_container)
    host_env: dict = field(default_factory=dict)  # host -> rank env from its inventory variables (_hardware.host_env)


@dataclass
class Finding:
    rule: str
    severity: str
    message: str

    def as_dict(self) -> dict:
        return {"id": self.rule, "severity": self.severity, "message": self.message}


RULES: list = []


def rule(rule_id: str, severity: str, summary: str, skippable: bool = True):
    def register(func):
        func.rule_id = rule_id
        func.severity = severity
        func.summary = summary
        # A rule that states what deploy refuses cannot be skipped: plan and deploy must agree.
        func.skippable = skippable
        RULES.append(func)
        return func
    return register


def _args(ctx: LintContext) -> dict:
    return {k: v for k, v in ctx.lane["serve"]["args"].items() if v is not None and v is not False}


def _env(ctx: LintContext) -> dict:
    return effective_env(ctx.lane)


def _engine(ctx: LintContext) -> _engines.Engine:
    return _engines.get(ctx.lane["engine"])


def _is_sm12x(ctx: LintContext) -> bool:
    return sm_major(ctx.profile) == 12


# A lane note starting with this is a known failure and its fix: the plan shows it as a warning.
TROUBLESHOOTING_PREFIX = "Troubleshooting: "


# --- the rules ----------------------------------------------------------------------------

@rule("explicit-entrypoint", ERROR, "the container command leads with the program")
def explicit_entrypoint(ctx):
    entry = ctx.lane["serve"].get("entrypoint") or []
    model = ctx.lane["model"]["id"]
    if not entry:
        yield (
            f"serve.entrypoint is not set: the rank container would run the image's entrypoint with the model as "
            f"its first word, and a launcher that takes --entrypoint from the command's first word composes "
            f"'--entrypoint {model}' (the latent launcher bug of the report). Set serve.entrypoint to the program, "
            f"e.g. [vllm, serve] or [/opt/nvidia/nvidia_entrypoint.sh, sglang, serve]."
        )
        return
    first = entry[0]
    if first == model or ("/" in first and not first.startswith("/")):
        yield (
            f"serve.entrypoint starts with {first!r}, which looks like a model id, not a program: docker would run "
            f"'--entrypoint {first}' and fail. Lead serve.entrypoint with the program (e.g. vllm)."
        )


@rule("no-rm", ERROR, "rank containers keep their logs")
def no_rm(ctx):
    bad = [a for a in ctx.lane["serve"].get("docker_args") or [] if a == "--rm" or a.startswith("--rm=")]
    if bad:
        yield (
            "serve.docker_args contains --rm: a rank that dies would take its logs with it (a bring-up "
            "lost the head's logs this way). Remove --rm; lanekit.serving.teardown_lane archives logs and removes "
            "containers when asked."
        )


@rule("docker-args-unsupported", ERROR, "deploy can apply every docker argument the plan prints", skippable=False)
def docker_args_unsupported(ctx):
    extra = [str(a) for a in ctx.lane["serve"].get("docker_args") or []]
    if extra:
        yield (
            f"serve.docker_args is {' '.join(extra)!r}: the plan would print them in docker_argv, but the ranks role "
            f"starts containers through community.docker.docker_container, which cannot pass raw docker arguments, "
            f"so deploy would refuse the lane. Remove serve.docker_args; devices, capabilities, ulimits, shm size "
            f"and mounts come from the inventory (lanekit_rank_devices, lanekit_rank_cap_add, lanekit_rank_ulimits, "
            f"lanekit_rank_shm_size)."
        )


@rule("sm12x-dsa-attention", ERROR, "DSA models on SM12x need the DSA attention backend (SGLang)")
def sm12x_dsa_attention(ctx):
    # Scope: SGLang lanes on a profile with compute capability 12.x (none on AMD or CPU profiles).
    if ctx.lane["engine"] != "sglang" or not _is_sm12x(ctx) or ctx.lane["model"].get("attention") != "dsa_mla":
        return
    backend = _args(ctx).get("--attention-backend")
    if backend != "dsa":
        yield (
            f"--attention-backend is {backend or 'unset'}: on {ctx.profile['gpu_name']} (sm_"
            f"{ctx.profile['compute_capability'].replace('.', '')}) SGLang's default FlashInfer MLA route autotunes "
            f"'trtllm fmha', which is sm100-only and crashes after the weights load "
            f"('Unsupported architecture'). Set --attention-backend: dsa."
        )


@rule("flashinfer-sparse-mla-glm-only", ERROR, "flashinfer_sparse_mla is GLM-DSA only")
def flashinfer_sparse_mla(ctx):
    # Scope: any lane that names the backend in its flags (only SGLang has it); hardware plays no part.
    arch = ctx.lane["model"].get("arch") or ""
    if arch.startswith("glm"):
        return
    for flag in ("--attention-backend", "--dsa-prefill-backend", "--dsa-decode-backend"):
        if _args(ctx).get(flag) == "flashinfer_sparse_mla":
            yield (
                f"{flag} is flashinfer_sparse_mla, which SGLang's validator accepts only for GLM-DSA models; "
                f"model.arch is {arch or 'unset'}, so the backend init would refuse after an 80-minute load. "
                f"Use --attention-backend dsa with tilelang DSA backends."
            )


@rule("nvfp4-moe-runner", ERROR, "NVFP4 MoE on SM120/121 needs flashinfer_cutlass (SGLang)")
def nvfp4_moe_runner(ctx):
    # Scope: SGLang lanes of an NVFP4 MoE checkpoint on a profile with compute capability 12.x.
    model = ctx.lane["model"]
    if ctx.lane["engine"] != "sglang" or not _is_sm12x(ctx) or not model.get("moe"):
        return
    if (model.get("quantization") or "").lower() != "nvfp4":
        return
    runner = _args(ctx).get("--moe-runner-backend")
    if runner != "flashinfer_cutlass":
        yield (
            f"--moe-runner-backend is {runner or 'unset (auto)'}: for a checkpoint-quantized NVFP4 MoE the auto rule "
            f"picks the TensorRT-LLM runner on SM12x, which crashes in the first warmup forward with "
            f"\"'FusedMoE' object has no attribute 'g1_scale_c'\" . Set --moe-runner-backend: flashinfer_cutlass."
        )


@rule("fp8-kv-dsa-tilelang", ERROR, "an FP8 KV cache with DSA needs both DSA backends on tilelang (SGLang)")
def fp8_kv_dsa_tilelang(ctx):
    # Scope: SGLang lanes with the DSA attention backend and an FP8 KV cache, on any hardware.
    args = _args(ctx)
    if ctx.lane["engine"] != "sglang" or args.get("--attention-backend") != "dsa":
        return
    if not str(args.get("--kv-cache-dtype", "")).startswith("fp8"):
        return
    prefill, decode = args.get("--dsa-prefill-backend"), args.get("--dsa-decode-backend")
    if prefill != "tilelang" or decode != "tilelang":
        yield (
            f"--kv-cache-dtype {args['--kv-cache-dtype']} with the DSA backend needs --dsa-prefill-backend and "
            f"--dsa-decode-backend both tilelang (found {prefill or 'unset'} / {decode or 'unset'}): their KV layouts "
            f"cannot be mixed. Set both to tilelang."
        )


@rule("mistral-tokenizer", ERROR, "a checkpoint without config.json needs the Mistral tokenizer and formats")
def mistral_tokenizer(ctx):
    if ctx.lane["model"].get("layout") != "mistral_consolidated":
        return
    args = _args(ctx)
    needed = dict(_engine(ctx).consolidated_layout_args)
    wrong = {flag: args.get(flag) for flag, value in needed.items() if args.get(flag) != value}
    if wrong:
        listing = ", ".join(f"{flag} {value or 'unset'}" for flag, value in wrong.items())
        fix = ", ".join(f"{flag}: {value}" for flag, value in needed.items() if flag in wrong)
        yield (
            f"the checkpoint is in Mistral's consolidated layout (no config.json) but {listing}: AutoTokenizer falls "
            f"back to AutoConfig and dies (\"couldn't find them in the cached files\"). Set {fix}."
        )


@rule("barrier-timeout", ERROR, "the post-load barrier outlasts the slowest rank's load, via the baked patch")
def barrier_timeout(ctx):
    lane, engine = ctx.lane, _engine(ctx)
    barrier = engine.timeout("barrier")
    if barrier is None or lane["topology"]["nodes"] < 2:
        return
    expected = lane["boot"]["expected_load_s"]
    value = timeout_value(lane, "barrier")
    if value is None or value < expected:
        yield (
            f"{barrier.key} is {int(value) if value is not None else f'unset ({int(barrier.stock_s)} s stock)'}, "
            f"shorter than the expected load of {expected} s (boot.expected_load_s): when one rank crawls, the "
            f"post-load monitored_barrier kills the ranks that finished. Set it to at least {expected} in "
            f"serve.{'env' if barrier.carrier == 'env' else 'args'}."
        )
    patch = engine.timeout_patches.get("barrier")
    patches = [p["file"] for p in (ctx.image or {}).get("patches", [])]
    if patch and ctx.image is not None and not any(patch in p for p in patches):
        yield (
            f"image {ctx.image['name']} does not bake {patch}.py: stock {engine.display} hard-codes the "
            f"{int(barrier.stock_s)} s barrier and ignores {barrier.key}. Add the patch to "
            f"images/{ctx.image['name']}/image.yml."
        )


@rule("watchdog-covers-warmup", ERROR, "SGLang's watchdog covers the warmup phase")
def watchdog_covers_warmup(ctx):
    watchdog = _engine(ctx).timeout("watchdog")
    if watchdog is None:
        return
    warmup = ctx.lane["boot"]["expected_warmup_s"]
    value = timeout_value(ctx.lane, "watchdog")
    if value is None or value < warmup:
        yield (
            f"{watchdog.key} is {value if value is not None else 'not a number'} s, shorter than the expected warmup "
            f"of {warmup} s (boot.expected_warmup_s: autotune and JIT forwards on sm_121): the watchdog would kill the "
            f"server mid-warmup. Set {watchdog.key} to at least {warmup}."
        )


@rule("engine-ready-timeout", ERROR, "vLLM's engine-ready timeout covers load and warmup")
def engine_ready_timeout(ctx):
    ready = _engine(ctx).timeout("engine_ready")
    if ready is None:
        return
    boot = ctx.lane["boot"]
    need = boot["expected_load_s"] + boot["expected_warmup_s"]
    value = timeout_value(ctx.lane, "engine_ready")
    if value is None or value < need:
        yield (
            f"{ready.key} is {value} s but loading and warmup are expected to take {need} s "
            f"(boot.expected_load_s + boot.expected_warmup_s): the API server would give up on the engine mid-load. "
            f"Set it to at least {need} in serve.{'env' if ready.carrier == 'env' else 'args'}."
        )


@rule("boot-budget", ERROR, "the collection's own wait covers the expected boot")
def boot_budget(ctx):
    boot = ctx.lane["boot"]
    need = boot["expected_load_s"] + boot["expected_warmup_s"]
    if boot["budget_s"] < need:
        yield (
            f"boot.budget_s is {boot['budget_s']} s, shorter than the expected load plus warmup ({need} s): the wait "
            f"would give up on a healthy boot. Raise boot.budget_s to at least {need}."
        )
    if boot["stall_s"] >= boot["budget_s"]:
        yield (
            f"boot.stall_s ({boot['stall_s']} s) is not shorter than boot.budget_s ({boot['budget_s']} s), so stall "
            f"detection can never fire before the budget. Lower boot.stall_s."
        )


@rule("cuda-graph-sizes", WARNING, "explicit CUDA-graph capture sizes cost graph memory")
def cuda_graph_sizes(ctx):
    # Scope: GPUs, where graph memory comes out of the KV budget (no CUDA graphs on CPU nodes).
    if not kv_in_device_memory(ctx.profile):
        return
    args = _args(ctx)
    explicit = "--cuda-graph-sizes" in args
    config = args.get("--compilation-config")
    if isinstance(config, dict) and ("cudagraph_capture_sizes" in config or "cuda_graph_sizes" in config):
        explicit = True
    if explicit:
        yield (
            "explicit CUDA-graph capture sizes are set: in the report 29 exact sizes ate +3.6 GiB of graph memory, "
            "which comes out of the KV budget. Prefer the automatic sizes (remove --cuda-graph-sizes)."
        )


_DROP_RE = re.compile(r"drop.caches|vm\.drop|echo\s+[123]\s*>\s*/proc/sys/vm", re.IGNORECASE)


@rule("no-cache-drop", ERROR, "nothing drops the page cache during a load")
def no_cache_drop(ctx):
    serve = ctx.lane["serve"]
    texts = [str(v) for v in serve["args"].values()] + [f"{k}={v}" for k, v in serve["env"].items()]
    texts += list(serve.get("docker_args") or [])
    hits = [t for t in texts if _DROP_RE.search(t)]
    if hits:
        yield (
            f"the lane drops the page cache ({hits[0]!r}): on GB10 a mid-load drop forced a cold NFS re-read of 71 GB "
            f"and rank 0's load went from 40 minutes to 3.5 hours. Remove it; the cache role warms within "
            f"the memory budget instead."
        )


@rule("topology", ERROR, "world size, node count and node ranks agree")
def topology(ctx):
    # Scope: every lane. The per-node cap is the profile's GPU count on GPU profiles only: a CPU node runs
    # as many workers as its thread binding gives them (cpu-threads-bind).
    topo = ctx.lane["topology"]
    world = topo["tensor_parallel"] * topo["pipeline_parallel"] * topo["data_parallel"]
    if world % topo["nodes"]:
        yield (
            f"the world size tensor_parallel x pipeline_parallel x data_parallel = {world} is not divisible by "
            f"topology.nodes = {topo['nodes']}; every node must run the same number of ranks. Fix topology."
        )
    elif world != topo["nodes"] * topo["gpus_per_node"]:
        yield (
            f"the world size {world} does not match topology.nodes x gpus_per_node = "
            f"{topo['nodes'] * topo['gpus_per_node']}; some {'GPUs' if requires_gpu(ctx.profile) else 'CPU workers'} "
            f"would idle or be oversubscribed. Fix topology."
        )
    if requires_gpu(ctx.profile) and ctx.profile.get("gpus_per_node") and \
            topo["gpus_per_node"] > ctx.profile["gpus_per_node"]:
        yield (
            f"topology.gpus_per_node is {topo['gpus_per_node']} but a {ctx.profile['display_name']} has "
            f"{ctx.profile['gpus_per_node']}. Fix topology.gpus_per_node or the hardware profile."
        )
    if ctx.hosts and len(ctx.hosts) != topo["nodes"]:
        yield (
            f"the inventory group lane_nodes has {len(ctx.hosts)} hosts ({', '.join(ctx.hosts)}) but the lane needs "
            f"topology.nodes = {topo['nodes']}. Add or remove hosts, or use a lane for this many nodes."
        )
    if ctx.node_ranks:
        ranks = sorted(ctx.node_ranks.values())
        if ranks != list(range(len(ctx.hosts))):
            pairs = ", ".join(f"{h}={r}" for h, r in sorted(ctx.node_ranks.items(), key=lambda i: str(i[1])))
            yield (
                f"the node_rank host variables ({pairs}) are not unique and complete 0..{len(ctx.hosts) - 1}; "
                f"two ranks with one number hang the rendezvous. Fix node_rank, or remove it to use inventory order."
            )


@rule("image-pin", ERROR, "the image base is pinned by a full digest")
def image_pin(ctx):
    if ctx.image is not None and not ctx.image["pinned"]:
        yield ctx.image["pin_problem"]


@rule("kv-budget", ERROR, "one request of the maximum length fits the KV budget")
def kv_budget(ctx):
    # Scope: profiles whose KV cache is a fraction of device memory (GPUs); cpu-kv-space on CPU nodes.
    result = kv_assessment(ctx.lane, ctx.profile)
    if result is None:
        return
    flag = _engine(ctx).memory_fraction_flag
    if not result["fits"] or not result["admitted"]:
        yield _kvbudget.explain(result, flag)


@rule("kv-budget-unchecked", WARNING, "the lane states the figures the KV budget check needs")
def kv_budget_unchecked(ctx):
    # Scope: as kv-budget; on CPU nodes cpu-kv-space-unchecked says what the CPU check lacks.
    if not kv_in_device_memory(ctx.profile):
        return
    lane = ctx.lane
    flag = _engine(ctx).memory_fraction_flag
    if not lane.get("memory"):
        yield (
            "the lane has no memory section (weights_per_rank_gib, graph_reserve_gib, kv_bytes_per_token), so the KV "
            "budget is not checked before boot; a too-small budget would surface only after the weights load."
        )
    elif _args(ctx).get(flag) is None:
        yield f"{flag} is not set, so the engine picks the memory fraction itself and the KV budget is not checked."
    elif _args(ctx).get(_engine(ctx).max_len_flag) is None:
        yield (
            f"{_engine(ctx).max_len_flag} is not set, so the engine derives the maximum model length from the "
            f"checkpoint and the KV budget is not checked; set it to check that one request of that length fits."
        )


@rule("rank-gpu-access", ERROR,
      "AMD rank containers get /dev/kfd, /dev/dri and the video group, no NVIDIA request; CPU ranks ask for no GPU")
def rank_gpu_access(ctx):
    # Scope: AMD profiles (ROCm devices) and profiles without a GPU (no GPU request); NVIDIA needs nothing here.
    access, profile = ctx.rank_container, ctx.profile
    if not access:
        return
    if not requires_gpu(profile) and access.get("gpus"):
        yield (
            f"lanekit_rank_gpus is {access['gpus']!r} on {profile['display_name']}: that asks docker for NVIDIA GPUs "
            f"(--gpus, an nvidia device request), which a node without GPUs cannot grant, so docker would refuse to "
            f"start the rank. Set lanekit_rank_gpus: '' (or leave it unset) for these nodes.")
    devices = [str(d).split(":", 1)[0] for d in access.get("devices") or []]
    if profile.get("vendor") == "amd":
        if access.get("gpus"):
            yield (
                f"lanekit_rank_gpus is {access['gpus']!r} on {profile['display_name']}: that asks docker for NVIDIA "
                f"GPUs (--gpus, an nvidia device request), which an AMD node cannot grant. Set lanekit_rank_gpus: ''.")
        missing = [d for d in ("/dev/kfd", "/dev/dri") if d not in devices]
        if missing:
            yield (
                f"lanekit_rank_devices lacks {', '.join(missing)}: ROCm ranks on {profile['display_name']} see no GPU "
                f"without /dev/kfd and /dev/dri. Add them to lanekit_rank_devices.")
        if "video" not in [str(g) for g in access.get("group_add") or []]:
            yield (
                f"lanekit_rank_group_add lacks video: on {profile['display_name']} the GPU device files belong to the "
                f"video group, so the rank could not open them. Add video to lanekit_rank_group_add.")


def _where(ctx: LintContext) -> str:
    return ctx.lane.get("_source") or f"lanes/{ctx.lane['lane']}.yml"


@rule("cpu-engine", ERROR, "a CPU hardware profile runs an engine whose CPU backend lanekit knows")
def cpu_engine(ctx):
    # Scope: profiles without a GPU (cpu_x86); the engines they know are their cpu_backend entries.
    if requires_gpu(ctx.profile) or cpu_backend(ctx.profile, ctx.lane["engine"]) is not None:
        return
    known = ", ".join(sorted(ctx.profile.get("cpu_backend") or {})) or "none"
    yield (
        f"{_where(ctx)}: key 'engine' is {ctx.lane['engine']} on hardware {ctx.lane['hardware']} "
        f"({ctx.profile['display_name']}), but lanekit knows no CPU backend of {_engine(ctx).display} (SGLang's is a "
        f"source build for AMX Xeons), so its ranks would look for a GPU; use engine {known} on these nodes, or a GPU "
        f"hardware profile.")


def cpu_kv_assessment(lane: dict, profile: dict) -> dict | None:
    """The CPU KV space of the lane (``cpu_backend``'s ``kv_space_env`` GiB per rank), or None when the hardware
    has no CPU backend for the engine, or the lane lacks the figures (cpu-kv-space-unchecked says which)."""
    backend = cpu_backend(profile, lane["engine"])
    memory = lane.get("memory")
    if backend is None or not memory:
        return None
    engine = _engines.get(lane["engine"])
    args = {k: v for k, v in lane["serve"]["args"].items() if v is not None and v is not False}
    max_len = flag_number(args.get(engine.max_len_flag), integer=True)
    space = effective_env(lane).get(backend["kv_space_env"])
    if max_len is None or space is None or _whole_gib(space) is None:
        return None
    space_gib = _whole_gib(space)
    per_token, block = memory["kv_bytes_per_token"], memory.get("kv_block_tokens", 64)
    tokens = _kvbudget.max_tokens(space_gib, per_token, block)
    need = _kvbudget.request_gib(int(max_len), per_token)
    return {"kv_space_env": backend["kv_space_env"], "kv_space_gib": space_gib, "kv_bytes_per_token": per_token,
            "max_model_len": int(max_len), "request_gib": round(need, 4), "max_tokens": tokens,
            "fits": tokens >= int(max_len)}


def _whole_gib(value) -> int | None:
    """vLLM reads the CPU KV space with int(): a whole number of GiB, else None."""
    if isinstance(value, bool):
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


@rule("cpu-kv-space", ERROR, "one request of the maximum length fits the CPU KV cache space")
def cpu_kv_space(ctx):
    # Scope: profiles that declare the engine's CPU backend (cpu_x86 with vLLM): the KV cache is host RAM of
    # VLLM_CPU_KVCACHE_SPACE GiB per rank, not a fraction of device memory (kv-budget on GPUs).
    backend = cpu_backend(ctx.profile, ctx.lane["engine"])
    if backend is None:
        return
    env = backend["kv_space_env"]
    value = _env(ctx).get(env)
    if value is not None and _whole_gib(value) is None:
        yield (
            f"{_where(ctx)}: key 'serve.env.{env}' is {value!r}, but vLLM reads it as a whole number of GiB with int(), "
            f"so the engine would refuse to start (\"invalid literal for int()\"); set it to a whole number such as 1.")
        return
    result = cpu_kv_assessment(ctx.lane, ctx.profile)
    if result is None or result["fits"]:
        return
    flag = _engine(ctx).max_len_flag
    need_gib = max(1, math.ceil(result["request_gib"]))
    shorter = f", or lower serve.args.{flag} to {result['max_tokens']:,}" if result["max_tokens"] > 0 else ""
    yield (
        f"{_where(ctx)}: key 'serve.env.{env}' is {result['kv_space_gib']} GiB of KV cache per rank, room for "
        f"{result['max_tokens']:,} tokens at {result['kv_bytes_per_token']:,} bytes per token "
        f"(memory.kv_bytes_per_token), but one {result['max_model_len']:,}-token request (serve.args.{flag}) needs "
        f"{result['request_gib']:.2f} GiB, so the engine would refuse after loading the weights: \"To serve at least "
        f"one request with the model's max seq len ({result['max_model_len']}), ({result['request_gib']:.2f} GiB KV "
        f"cache is needed, which is larger than the available KV cache memory ({result['kv_space_gib']:.2f} GiB)\"; "
        f"set {env} to at least {need_gib}{shorter}.")


@rule("cpu-kv-space-unchecked", WARNING, "the lane states the figures the CPU KV space check needs")
def cpu_kv_space_unchecked(ctx):
    # Scope: as cpu-kv-space.
    backend = cpu_backend(ctx.profile, ctx.lane["engine"])
    if backend is None:
        return
    env, flag = backend["kv_space_env"], _engine(ctx).max_len_flag
    if not ctx.lane.get("memory"):
        yield (
            f"{_where(ctx)}: the lane has no memory section (memory.kv_bytes_per_token), so whether one request fits "
            f"the CPU KV space ({env}) is not checked before boot; a too-small space would surface only after the "
            f"weights load. Add the memory figures.")
    elif _env(ctx).get(env) is None:
        yield (
            f"{_where(ctx)}: key 'serve.env.{env}' is not set, so vLLM sizes the CPU KV cache itself (4 GiB in the "
            f"releases that document a default; newer releases size it from the node's memory) and the KV check is "
            f"skipped; set it to the whole GiB of host RAM each rank's KV cache may take.")
    elif _args(ctx).get(flag) is None:
        yield (
            f"{_where(ctx)}: key 'serve.args.{flag}' is not set, so the engine derives the maximum model length from "
            f"the checkpoint and the CPU KV check is skipped; set it to check that one request of that length fits.")


@rule("cpu-threads-bind", ERROR, "several CPU workers on one node get their threads bound explicitly")
def cpu_threads_bind(ctx):
    # Scope: profiles that declare the engine's CPU backend. The value a rank gets is its host's inventory
    # variable when set (cpu_backend's host_env), else the lane's serve.env, else the engine's auto.
    backend = cpu_backend(ctx.profile, ctx.lane["engine"])
    if backend is None:
        return
    topo = ctx.lane["topology"]
    workers = max(1, topo["tensor_parallel"] * topo["pipeline_parallel"] * topo["data_parallel"] // topo["nodes"])
    env, auto = backend["threads_bind_env"], backend["threads_bind_auto"]
    variable = backend["host_env"].get(env, "")
    lane_value = _env(ctx).get(env)
    by_value: dict = {}
    for host in ctx.hosts or [None]:
        value = (ctx.host_env.get(host) or {}).get(env) if host else None
        value = str(value if value is not None else (lane_value if lane_value is not None else auto))
        by_value.setdefault(value, []).append(host)
    for value, hosts in by_value.items():
        where = f"on {', '.join(h for h in hosts if h)}" if any(hosts) else "on every node"
        source = (f"{variable} for those hosts" if any((ctx.host_env.get(h) or {}).get(env) is not None for h in hosts if h)
                  else f"serve.env.{env}" + (" unset: vLLM's default" if lane_value is None else ""))
        if value == auto and workers > 1:
            yield (
                f"{_where(ctx)}: {env} is {auto} ({source}) {where}, where each node runs {workers} CPU workers "
                f"(topology: tensor_parallel {topo['tensor_parallel']} x pipeline_parallel {topo['pipeline_parallel']} "
                f"x data_parallel {topo['data_parallel']} over {topo['nodes']} nodes); auto binds each local worker to "
                f"a NUMA node of its own, so on a node with fewer NUMA nodes (a one-socket machine) vLLM refuses: "
                f"\"Not enough allowed NUMA nodes to bind threads of {workers} local CPUWorkers\". Set {variable} in "
                f"those hosts' host_vars (or serve.env.{env}) to one "
                f"CPU list per worker separated by '|' (e.g. '0|1'), or run one worker per node.")
        elif value not in (auto, "nobind") and len(value.split("|")) < workers:
            yield (
                f"{_where(ctx)}: {env} is {value!r} ({source}) {where}, {len(value.split('|'))} CPU list(s) for the "
                f"{workers} CPU workers each node runs; vLLM takes worker i's CPUs from the i-th '|'-separated list, "
                f"so a worker would have none. Give one list per worker (e.g. '0|1').")


@rule("cpu-head-dim", ERROR, "the model's head size is one the CPU attention kernels support")
def cpu_head_dim(ctx):
    # Scope: lanes that state model.head_dim, on profiles that declare the engine's CPU backend.
    backend = cpu_backend(ctx.profile, ctx.lane["engine"])
    head_dim = ctx.lane["model"].get("head_dim")
    if backend is None or head_dim is None or head_dim in backend["head_sizes"]:
        return
    sizes = ", ".join(str(s) for s in backend["head_sizes"])
    yield (
        f"{_where(ctx)}: key 'model.head_dim' is {head_dim}, but vLLM's CPU attention supports head sizes {sizes}: "
        f"the engine boots, then dies on the first request (\"RuntimeError: Unsupported CPU attention configuration: "
        f"head_dim={head_dim}\"); serve a checkpoint whose head size is one of those (or correct model.head_dim).")


@rule("recipe-troubleshooting", WARNING, "the recipe's known failures and their fixes, shown with the plan")
def recipe_troubleshooting(ctx):
    for note in ctx.lane.get("notes") or []:
        if note.startswith(TROUBLESHOOTING_PREFIX):
            yield f"if you meet {note[len(TROUBLESHOOTING_PREFIX):]}"


def kv_assessment(lane: dict, profile: dict) -> dict | None:
    """The KV budget of the lane, or None when the lane lacks the figures or its KV cache is not in device memory."""
    if not kv_in_device_memory(profile):
        return None
    memory = lane.get("memory")
    args = {k: v for k, v in lane["serve"]["args"].items() if v is not None}
    engine = _engines.get(lane["engine"])
    fraction = flag_number(args.get(engine.memory_fraction_flag))
    max_len = flag_number(args.get(engine.max_len_flag), integer=True)
    if not memory or fraction is None or max_len is None:
        return None
    return _kvbudget.assess(
        fraction=fraction,
        max_model_len=int(max_len),
        kv_bytes_per_token=memory["kv_bytes_per_token"],
        device_memory_gib=profile["device_memory_gib"],
        weights_gib=memory["weights_per_rank_gib"],
        graph_reserve_gib=memory["graph_reserve_gib"],
        admission_free_gib=profile.get("admission_free_gib"),
        block_tokens=memory.get("kv_block_tokens", 64),
    )


def run(ctx: LintContext, skip: list[str] | None = None) -> dict:
    """Run every rule; return {'errors', 'warnings', 'skipped'} as lists of dicts."""
    skip = [s.strip() for s in (skip or []) if s and s.strip()]
    known = {r.rule_id for r in RULES}
    fixed = {r.rule_id for r in RULES if not r.skippable}
    unknown = [s for s in skip if s not in known]
    errors, warnings = [], []
    for func in RULES:
        if func.rule_id in skip and func.skippable:
            continue
        severity = func.severity
        if func.rule_id == "image-pin" and ctx.purpose == "plan":
            # Planning shows what a deploy would run; only a build or deploy needs the real pin.
            severity = WARNING
        for message in func(ctx):
            finding = Finding(func.rule_id, severity, message).as_dict()
            (errors if severity == ERROR else warnings).append(finding)
    return {"errors": errors, "warnings": warnings, "skipped": [s for s in skip if s in known and s not in fixed],
            "unknown_skips": unknown, "unskippable": [s for s in skip if s in fixed]}
