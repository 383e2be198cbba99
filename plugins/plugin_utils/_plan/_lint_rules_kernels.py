# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Lint rules on attention and MoE kernels: the backends an SM12x GPU (GB10, RTX PRO 6000) needs for
DSA attention, sparse MLA, NVFP4 MoE and an FP8 KV cache, from the bring-up report's boot ledger.

One job: these rules (registered with ``_lint_rule.rule``; ``_lint`` runs them). Pure.
"""
from __future__ import annotations

from collections.abc import Iterator

from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._lint_rule import (
    ERROR,
    LintContext,
    _args,
    _is_sm12x,
    rule,
)


@rule("sm12x-dsa-attention", ERROR, "DSA models on SM12x need the DSA attention backend (SGLang)")
def sm12x_dsa_attention(ctx: LintContext) -> Iterator[str]:
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
def flashinfer_sparse_mla(ctx: LintContext) -> Iterator[str]:
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
def nvfp4_moe_runner(ctx: LintContext) -> Iterator[str]:
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
def fp8_kv_dsa_tilelang(ctx: LintContext) -> Iterator[str]:
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
