# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Lint rules on CPU lanes: the engine's CPU backend, its KV cache space, thread binding and the
head sizes its attention kernels support. They apply where the profile declares the engine's CPU
backend (``_hardware.cpu_backend``).

One job: these rules and the CPU KV assessment the plan also publishes (``cpu_kv_assessment``). Pure.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import cast

from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import cpu_backend, requires_gpu
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import Lane, effective_env
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._values import flag_number
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _kvbudget
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._lint_rule import (
    ERROR,
    WARNING,
    LintContext,
    _args,
    _engine,
    _env,
    rule,
)


def _where(ctx: LintContext) -> str:
    return ctx.lane.get("_source") or f"lanes/{ctx.lane['lane']}.yml"


@rule("cpu-engine", ERROR, "a CPU hardware profile runs an engine whose CPU backend lanekit knows")
def cpu_engine(ctx: LintContext) -> Iterator[str]:
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
    space = effective_env(cast(Lane, lane)).get(backend["kv_space_env"])
    space_gib = None if space is None else _whole_gib(space)
    if max_len is None or space_gib is None:
        return None
    per_token, block = memory["kv_bytes_per_token"], memory.get("kv_block_tokens", 64)
    tokens = _kvbudget.max_tokens(space_gib, per_token, block)
    need = _kvbudget.request_gib(int(max_len), per_token)
    return {"kv_space_env": backend["kv_space_env"], "kv_space_gib": space_gib, "kv_bytes_per_token": per_token,
            "max_model_len": int(max_len), "request_gib": round(need, 4), "max_tokens": tokens,
            "fits": tokens >= int(max_len)}


def _whole_gib(value: object) -> int | None:
    """vLLM reads the CPU KV space with int(): a whole number of GiB, else None."""
    if isinstance(value, bool):
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


@rule("cpu-kv-space", ERROR, "one request of the maximum length fits the CPU KV cache space")
def cpu_kv_space(ctx: LintContext) -> Iterator[str]:
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
def cpu_kv_space_unchecked(ctx: LintContext) -> Iterator[str]:
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
def cpu_threads_bind(ctx: LintContext) -> Iterator[str]:
    # Scope: profiles that declare the engine's CPU backend. The value a rank gets is its host's inventory
    # variable when set (cpu_backend's host_env), else the lane's serve.env, else the engine's auto, which is
    # fine for as many workers as the profile's numa_nodes (unknown on cpu_x86: one).
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
        numa = ctx.profile.get("numa_nodes")
        if value == auto and workers > 1 and not (numa and workers <= numa):
            # A profile that says how many NUMA nodes its nodes have (xeon6: ESTIMATE 4) lets auto bind that many.
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
def cpu_head_dim(ctx: LintContext) -> Iterator[str]:
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
