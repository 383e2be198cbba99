# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Failure signatures, one table of the scanner's (``_signatures.SIGNATURES``): the boot ledger of the
Mistral Large 4 bring-up: every boot that died there has its line here (a half-unpacked image, a
refused KV budget, missing kernels, a compiler missing from the image).

Pure data. The scanner reads the tables in the order ``_signatures`` joins them, and that order
is the order of a report (roots first, then table order), so a signature moves between tables
only on purpose.
"""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._boot._signature import Signature, _re

LEDGER: tuple[Signature, ...] = (
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
)
