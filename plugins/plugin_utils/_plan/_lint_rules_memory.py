# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Lint rules on GPU memory: the KV budget of one request of the maximum length, the figures it
needs, and the graph memory of explicit CUDA-graph sizes. They apply where the KV cache is a
fraction of device memory (``_hardware.kv_in_device_memory``).

One job: these rules and the KV assessment the plan also publishes (``kv_assessment``). Pure.
"""
from __future__ import annotations

from collections.abc import Iterator

from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import kv_in_device_memory
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._values import flag_number
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _kvbudget
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._lint_rule import (
    ERROR,
    WARNING,
    LintContext,
    _args,
    _engine,
    rule,
)


@rule("cuda-graph-sizes", WARNING, "explicit CUDA-graph capture sizes cost graph memory")
def cuda_graph_sizes(ctx: LintContext) -> Iterator[str]:
    # Scope: GPUs and NPUs, where graph memory comes out of the KV budget (no CUDA graphs on CPU nodes, nor on TPU,
    # whose XLA programs take no capture sizes).
    if not kv_in_device_memory(ctx.profile) or ctx.profile.get("graphs") == "xla":
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


@rule("kv-budget", ERROR, "one request of the maximum length fits the KV budget")
def kv_budget(ctx: LintContext) -> Iterator[str]:
    # Scope: profiles whose KV cache is a fraction of device memory (GPUs); cpu-kv-space on CPU nodes.
    result = kv_assessment(ctx.lane, ctx.profile)
    if result is None:
        return
    flag = _engine(ctx).memory_fraction_flag
    if not result["fits"] or not result["admitted"]:
        yield _kvbudget.explain(result, flag)


@rule("kv-budget-unchecked", WARNING, "the lane states the figures the KV budget check needs")
def kv_budget_unchecked(ctx: LintContext) -> Iterator[str]:
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


@rule("tpu-max-model-len", WARNING, "a TPU lane bounds the shapes XLA compiles with the maximum model length")
def tpu_max_model_len(ctx: LintContext) -> Iterator[str]:
    # Scope: profiles whose graphs are XLA programs (TPU). There the KV budget is the GPU arithmetic (vLLM TPU
    # claims --gpu-memory-utilization of each chip's HBM, weights and the XLA workspace come out of it: kv-budget
    # reads memory.graph_reserve_gib as that workspace), but every request shape is compiled before the first
    # request, so an unbounded length also decides how long the boot compiles.
    if ctx.profile.get("graphs") != "xla":
        return
    flag = _engine(ctx).max_len_flag
    if _args(ctx).get(flag) is None:
        yield (
            f"{flag} is not set on {ctx.profile['display_name']}: vLLM TPU then compiles its shapes up to the "
            f"checkpoint's full context (131,072 tokens for Llama 3.1), which lengthens the boot and may not fit the "
            f"{ctx.profile['device_memory_gib']} GiB of HBM per chip, and the KV budget is not checked; set it to the "
            f"longest request the lane serves (the recipes' own TPU command uses 2048 for Llama-3.1-8B).")


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
