"""Flag tables of the real engines and the argparse parsers built from them.

vLLM (0.33-era `vllm serve`): FlexibleArgumentParser semantics - `--flag=value`, underscores
accepted in flag names, `--json-flag.key value` dotted JSON keys, boolean config fields as
`--x/--no-x`, no prefix abbreviations, human-readable integers (`128k`, `1M`, `auto`).
SGLang (0.5.23 `sglang serve` / `python3 -m sglang.launch_server`): plain argparse, store_true
booleans, prefix abbreviations allowed (so `--tp` is `--tp-size`).

An unknown flag or a bad value exits 2 with argparse's message under the engine's prog name
(`vllm serve: error: argument --x: invalid int value`); `vllm serve`'s unrecognized arguments are
reported by the top-level `vllm` parser (`vllm: error: unrecognized arguments: --foo`), as argparse
and real vLLM do. JSON-valued flags must parse as JSON.
"""
from __future__ import annotations

import argparse
import json
import re
import sys

# ---------------------------------------------------------------------------------------------
# value types (their __name__ shows in argparse's "invalid <type> value" messages)


def human_readable_int(value: str) -> int:
    """vLLM: `1k` = 1000, `1K` = 1024 (likewise m/M, g/G); plain ints as is."""
    text = str(value).strip()
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)([kKmMgGtT]?)", text)
    if not m:
        raise ValueError(text)
    number, suffix = m.groups()
    mult = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
            "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
    if "." in number and not suffix:
        raise ValueError(text)
    return int(float(number) * mult)


def human_readable_int_or_auto(value: str):
    if str(value).strip().lower() == "auto":
        return -1
    return human_readable_int(value)


def loads(value: str):
    """JSON-valued flags: must parse as JSON."""
    return json.loads(value)


loads.__name__ = "loads"


def optional_int(value: str):
    if str(value).lower() in ("none", "null"):
        return None
    return int(value)


def upper_choice(choices):
    def conv(value: str) -> str:
        up = str(value).upper()
        if up not in choices:
            raise argparse.ArgumentTypeError(
                f"invalid choice: {value!r} (choose from {', '.join(repr(c) for c in choices)})")
        return up
    conv.__name__ = "str"
    return conv


# ---------------------------------------------------------------------------------------------
# vLLM flag table: (names, kind[, choices])

VLLM_TOKENIZER_MODES = ["auto", "hf", "slow", "mistral", "custom", "deepseek_v32"]
VLLM_DTYPES = ["auto", "half", "float16", "bfloat16", "float", "float32"]
VLLM_KV_DTYPES = ["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
                  "fp8_ds_mla_v2", "nvfp4", "fp4_e2m1", "mxfp4"]
VLLM_REASONING_PARSERS = ["deepseek_r1", "deepseek_v3", "ernie45", "glm45", "gpt_oss", "granite", "holo2",
                          "hunyuan_a13b", "kimi_k2", "minimax_m2", "minimax_m2_append_think", "mistral",
                          "olmo3", "qwen3", "seed_oss", "step3", "step3p5"]
VLLM_TOOL_PARSERS = ["deepseek_v3", "deepseek_v31", "deepseek_v32", "ernie45", "gigachat3", "glm45", "glm47",
                     "granite", "granite-20b-fc", "hermes", "hunyuan_a13b", "internlm", "jamba", "kimi_k2",
                     "llama3_json", "llama4_json", "llama4_pythonic", "longcat", "minimax", "minimax_m2",
                     "mistral", "olmo3", "openai", "phi4_mini_json", "pythonic", "qwen3_coder", "qwen3_xml",
                     "seed_oss", "step3", "xlam"]

VLLM_FLAGS = [
    # frontend (entrypoints/openai/cli_args.py)
    (("--host",), "str"), (("--port",), "int"), (("--uds",), "str"),
    (("--uvicorn-log-level",), "choice", ["critical", "debug", "error", "info", "trace", "warning"]),
    (("--disable-uvicorn-access-log",), "bool"), (("--allow-credentials",), "bool"),
    (("--allowed-origins",), "json"), (("--allowed-methods",), "json"), (("--allowed-headers",), "json"),
    (("--api-key",), "strs"), (("--lora-modules",), "strs"), (("--chat-template",), "str"),
    (("--chat-template-content-format",), "choice", ["auto", "openai", "string"]),
    (("--trust-request-chat-template",), "bool"), (("--default-chat-template-kwargs",), "json"),
    (("--response-role",), "str"), (("--ssl-keyfile",), "str"), (("--ssl-certfile",), "str"),
    (("--ssl-ca-certs",), "str"), (("--enable-ssl-refresh",), "bool"), (("--ssl-cert-reqs",), "int"),
    (("--ssl-ciphers",), "str"), (("--root-path",), "str"), (("--middleware",), "strs"),
    (("--return-tokens-as-token-ids",), "bool"), (("--disable-frontend-multiprocessing",), "bool"),
    (("--enable-request-id-headers",), "bool"), (("--enable-auto-tool-choice",), "bool"),
    (("--exclude-tools-when-tool-choice-none",), "bool"), (("--tool-call-parser",), "str"),
    (("--tool-parser-plugin",), "str"), (("--tool-server",), "str"), (("--log-config-file",), "str"),
    (("--max-log-len",), "int"), (("--disable-fastapi-docs",), "bool"),
    (("--enable-prompt-tokens-details",), "bool"), (("--enable-server-load-tracking",), "bool"),
    (("--enable-force-include-usage",), "bool"), (("--enable-tokenizer-info-endpoint",), "bool"),
    (("--enable-log-outputs",), "bool"), (("--enable-log-deltas",), "bool"),
    (("--h11-max-incomplete-event-size",), "int"), (("--h11-max-header-count",), "int"),
    (("--log-error-stack",), "bool"), (("--tokens-only",), "bool"), (("--enable-offline-docs",), "bool"),
    (("--headless",), "flag"), (("--api-server-count", "-asc"), "int"), (("--config",), "str"),
    (("--grpc",), "flag"), (("--disable-log-stats",), "bool"), (("--aggregate-engine-logging",), "bool"),
    (("--enable-log-requests",), "bool"), (("--disable-log-requests",), "bool"),
    # model (config/model.py)
    (("--model",), "str"), (("--runner",), "choice", ["auto", "draft", "generate", "pooling"]),
    (("--convert",), "choice", ["auto", "classify", "embed", "none", "reward", "mm_encoder_only"]),
    (("--task",), "str"), (("--tokenizer",), "str"),
    (("--tokenizer-mode",), "choice", VLLM_TOKENIZER_MODES), (("--trust-remote-code",), "bool"),
    (("--dtype",), "choice", VLLM_DTYPES), (("--seed",), "int"), (("--hf-config-path",), "str"),
    (("--allowed-local-media-path",), "str"), (("--allowed-media-domains",), "strs"),
    (("--revision",), "str"), (("--code-revision",), "str"), (("--tokenizer-revision",), "str"),
    (("--max-model-len",), "hint_auto"), (("--quantization", "-q"), "str"), (("--enforce-eager",), "bool"),
    (("--max-logprobs",), "int"),
    (("--logprobs-mode",), "choice", ["raw_logits", "raw_logprobs", "processed_logits", "processed_logprobs"]),
    (("--disable-sliding-window",), "bool"), (("--disable-cascade-attn",), "bool"),
    (("--skip-tokenizer-init",), "bool"), (("--enable-prompt-embeds",), "bool"),
    (("--served-model-name",), "strs"), (("--config-format",), "choice", ["auto", "hf", "mistral"]),
    (("--hf-token",), "optstr"), (("--hf-overrides",), "json"), (("--pooler-config",), "json"),
    (("--logits-processor-pattern",), "str"), (("--generation-config",), "str"),
    (("--override-generation-config",), "json"), (("--enable-sleep-mode",), "bool"),
    (("--model-impl",), "choice", ["auto", "vllm", "transformers", "terratorch"]),
    (("--override-attention-dtype",), "str"), (("--logits-processors",), "strs"),
    (("--io-processor-plugin",), "str"), (("--language-model-only",), "bool"),
    # load (config/load.py)
    (("--load-format",), "str"), (("--download-dir",), "str"),
    (("--safetensors-load-strategy",), "choice", ["lazy", "eager", "prefetch", "torchao"]),
    (("--safetensors-prefetch-num-threads",), "int"), (("--safetensors-prefetch-block-size",), "hint"),
    (("--model-loader-extra-config",), "json"), (("--ignore-patterns",), "strs"),
    (("--use-tqdm-on-load",), "bool"), (("--pt-load-map-location",), "str"),
    # attention / kernels
    (("--attention-backend",), "str"), (("--attention-config", "-ac"), "json"), (("--kernel-config",), "json"),
    # structured outputs / reasoning
    (("--reasoning-parser",), "choice", VLLM_REASONING_PARSERS), (("--reasoning-parser-plugin",), "str"),
    (("--structured-outputs-config",), "json"),
    # parallel (config/parallel.py)
    (("--distributed-executor-backend",), "choice", ["ray", "mp", "uni", "external_launcher"]),
    (("--pipeline-parallel-size", "-pp"), "int"), (("--master-addr",), "str"), (("--master-port",), "int"),
    (("--nnodes", "-n"), "int"), (("--node-rank", "-r"), "int"),
    (("--distributed-timeout-seconds",), "int"), (("--cpu-distributed-timeout-seconds",), "int"),
    (("--tensor-parallel-size", "-tp"), "int"),
    (("--decode-context-parallel-size", "-dcp"), "int"),
    (("--prefill-context-parallel-size", "-pcp"), "int"),
    (("--dcp-kv-cache-interleave-size",), "int"), (("--cp-kv-cache-interleave-size",), "int"),
    (("--data-parallel-size", "-dp"), "int"), (("--data-parallel-rank", "-dpn"), "int"),
    (("--data-parallel-start-rank", "-dpr"), "int"), (("--data-parallel-size-local", "-dpl"), "int"),
    (("--data-parallel-address", "-dpa"), "str"), (("--data-parallel-rpc-port", "-dpp"), "int"),
    (("--data-parallel-backend", "-dpb"), "choice", ["mp", "ray"]),
    (("--data-parallel-hybrid-lb", "-dph"), "bool"), (("--data-parallel-external-lb", "-dpe"), "bool"),
    (("--data-parallel-multi-port-external-lb", "-dpm"), "bool"),
    (("--enable-expert-parallel", "-ep"), "bool"), (("--enable-ep-weight-filter",), "bool"),
    (("--all2all-backend",), "choice", ["allgather_reducescatter", "deepep_high_throughput",
                                        "deepep_low_latency", "nixl_ep", "flashinfer_nvlink_one_sided",
                                        "flashinfer_nvlink_two_sided", "mori_high_throughput",
                                        "mori_low_latency", "pplx", "naive", "flashinfer_all2allv"]),
    (("--enable-dbo",), "bool"), (("--ubatch-size",), "int"), (("--dbo-decode-token-threshold",), "int"),
    (("--dbo-prefill-token-threshold",), "int"), (("--disable-nccl-for-dp-synchronization",), "bool"),
    (("--enable-eplb",), "bool"), (("--eplb-config",), "json"),
    (("--expert-placement-strategy",), "choice", ["linear", "round_robin"]),
    (("--max-parallel-loading-workers",), "int"), (("--ray-workers-use-nsight",), "bool"),
    (("--disable-custom-all-reduce",), "bool"), (("--worker-cls",), "str"),
    (("--worker-extension-cls",), "str"), (("--device-ids",), "str"), (("--enable-elastic-ep",), "bool"),
    # cache (config/cache.py)
    (("--block-size",), "int"), (("--gpu-memory-utilization",), "float"),
    (("--kv-cache-memory-bytes",), "hint"), (("--swap-space",), "float"),
    (("--kv-cache-dtype",), "choice", VLLM_KV_DTYPES), (("--num-gpu-blocks-override",), "int"),
    (("--enable-prefix-caching",), "bool"),
    (("--prefix-caching-hash-algo",), "choice", ["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"]),
    (("--cpu-offload-gb",), "float"), (("--calculate-kv-scales",), "bool"),
    (("--kv-sharing-fast-prefill",), "bool"), (("--mamba-cache-dtype",), "str"),
    (("--mamba-ssm-cache-dtype",), "str"), (("--mamba-block-size",), "int"),
    (("--kv-offloading-size",), "float"), (("--kv-offloading-backend",), "choice", ["native", "lmcache"]),
    # multimodal
    (("--limit-mm-per-prompt",), "json"), (("--enable-mm-embeds",), "bool"), (("--media-io-kwargs",), "json"),
    (("--mm-processor-kwargs",), "json"), (("--mm-processor-cache-gb",), "float"),
    (("--mm-processor-cache-type",), "choice", ["lru", "shm"]), (("--mm-shm-cache-max-object-size-mb",), "int"),
    (("--mm-encoder-tp-mode",), "choice", ["data", "weights"]), (("--mm-encoder-attn-backend",), "str"),
    (("--interleave-mm-strings",), "bool"), (("--skip-mm-profiling",), "bool"),
    (("--video-pruning-rate",), "float"),
    # LoRA
    (("--enable-lora",), "bool"), (("--max-loras",), "int"), (("--max-lora-rank",), "int"),
    (("--lora-dtype",), "str"), (("--max-cpu-loras",), "int"), (("--fully-sharded-loras",), "bool"),
    (("--default-mm-loras",), "json"),
    # observability
    (("--show-hidden-metrics-for-version",), "str"), (("--otlp-traces-endpoint",), "str"),
    (("--collect-detailed-traces",), "strs"), (("--kv-cache-metrics",), "bool"),
    (("--enable-mfu-metrics",), "bool"), (("--enable-layerwise-nvtx-tracing",), "bool"),
    # scheduler
    (("--max-num-batched-tokens",), "hint"), (("--max-num-seqs",), "int"),
    (("--max-num-partial-prefills",), "int"), (("--max-long-partial-prefills",), "int"),
    (("--long-prefill-token-threshold",), "int"), (("--scheduling-policy",), "choice", ["fcfs", "priority"]),
    (("--enable-chunked-prefill",), "bool"), (("--disable-chunked-mm-input",), "bool"),
    (("--scheduler-cls",), "str"), (("--disable-hybrid-kv-cache-manager",), "bool"),
    (("--async-scheduling",), "bool"), (("--stream-interval",), "int"),
    # compilation / speculative / transfer / misc
    (("--compilation-config", "-cc"), "json"), (("--cuda-graph-sizes",), "ints"),
    (("--optimization-level", "-O"), "int"),
    (("--speculative-config",), "json"), (("--kv-transfer-config",), "json"),
    (("--kv-events-config",), "json"), (("--ec-transfer-config",), "json"),
    (("--additional-config",), "json"), (("--profiler-config",), "json"),
    (("--enable-flashinfer-autotune",), "bool"), (("--weight-transfer-config",), "json"),
]

VLLM_JSON_FLAGS = {names[0] for names, kind, *_rest in VLLM_FLAGS if kind == "json"}


# ---------------------------------------------------------------------------------------------
# SGLang flag table

SGLANG_ATTENTION = ["aiter", "ascend", "cutlass_mla", "dsa", "dual_chunk_flash_attn", "fa3", "fa4",
                    "flashinfer", "flashinfer_sparse_mla", "flashmla", "flex_attention", "hybrid_linear_attn",
                    "intel_amx", "intel_xpu", "nsa", "torch_native", "trtllm_mha", "trtllm_mla", "triton", "wave"]
SGLANG_DSA = ["flashmla_sparse", "flashmla_kv", "flashmla_auto", "fa3", "tilelang", "aiter", "trtllm", "triton"]
SGLANG_MOE_RUNNER = ["auto", "deep_gemm", "triton", "triton_kernel", "flashinfer_trtllm", "flashinfer_cutlass",
                     "flashinfer_mxfp4", "flashinfer_cutedsl", "cutlass", "aiter"]
SGLANG_SPEC_ALGOS = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DSPARK", "MTP"]
SGLANG_TOOL_PARSERS = ["deepseekv3", "deepseekv31", "deepseekv32", "glm", "glm45", "glm47", "gpt-oss", "kimi_k2",
                       "llama3", "mistral", "pythonic", "qwen", "qwen25", "qwen3_coder", "step3", "minimax-m2",
                       "interns1", "hermes", "longcat", "seed_oss"]
SGLANG_REASONING_PARSERS = ["deepseek-r1", "deepseek-v3", "glm45", "gpt-oss", "kimi", "kimi_k2", "minimax",
                            "minimax-append-think", "mistral", "qwen3", "qwen3-thinking", "step3", "nano_v3",
                            "interns1"]

SGLANG_FLAGS = [
    # model and tokenizer
    (("--model-path", "--model"), "str"), (("--tokenizer-path",), "str"), (("--tokenizer-worker-num",), "int"),
    (("--tokenizer-mode",), "choice", ["auto", "slow", "mistral"]), (("--skip-tokenizer-init",), "flag"),
    (("--load-format",), "choice", ["auto", "pt", "safetensors", "npcache", "dummy", "sharded_state", "gguf",
                                    "bitsandbytes", "layered", "mistral", "remote", "remote_instance",
                                    "fastsafetensors", "private"]),
    (("--model-loader-extra-config",), "json"), (("--trust-remote-code",), "flag"),
    (("--context-length",), "int"), (("--is-embedding",), "flag"), (("--enable-multimodal",), "flag"),
    (("--revision",), "str"), (("--model-impl",), "str"), (("--weight-loader-disable-mmap",), "flag"),
    # HTTP server
    (("--host",), "str"), (("--port",), "int"), (("--skip-server-warmup",), "flag"), (("--warmups",), "str"),
    (("--nccl-port",), "int"), (("--fastapi-root-path",), "str"), (("--grpc-mode",), "flag"),
    (("--gated-launch-port",), "int"), (("--checkpoint-engine-wait-weights-before-ready",), "flag"),
    # quantization and data type
    (("--dtype",), "choice", ["auto", "half", "float16", "bfloat16", "float", "float32"]),
    (("--quantization",), "str"), (("--quantization-param-path",), "str"),
    (("--kv-cache-dtype",), "choice", ["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1", "fp8"]),
    (("--enable-fp32-lm-head",), "flag"), (("--modelopt-quant",), "str"),
    # memory and scheduling
    (("--mem-fraction-static",), "float"), (("--max-running-requests",), "int"),
    (("--max-queued-requests",), "int"), (("--max-total-tokens",), "int"), (("--chunked-prefill-size",), "int"),
    (("--max-prefill-tokens",), "int"),
    (("--schedule-policy",), "choice", ["lpm", "random", "fcfs", "dfs-weight", "lof", "priority"]),
    (("--enable-priority-scheduling",), "flag"), (("--schedule-conservativeness",), "float"),
    (("--page-size",), "int"), (("--hybrid-kvcache-ratio",), "float"), (("--swa-full-tokens-ratio",), "float"),
    (("--disable-hybrid-swa-memory",), "flag"), (("--radix-eviction-policy",), "choice", ["lru", "lfu"]),
    # runtime
    (("--device",), "str"), (("--tp-size", "--tensor-parallel-size", "--tp"), "int"),
    (("--pp-size", "--pipeline-parallel-size"), "int"), (("--pp-max-micro-batch-size",), "int"),
    (("--stream-interval",), "int"), (("--stream-output",), "flag"), (("--random-seed",), "int"),
    (("--constrained-json-whitespace-pattern",), "str"), (("--watchdog-timeout",), "float"),
    (("--soft-watchdog-timeout",), "float"), (("--dist-timeout",), "int"), (("--download-dir",), "str"),
    (("--base-gpu-id",), "int"), (("--gpu-id-step",), "int"), (("--sleep-on-idle",), "flag"),
    # logging
    (("--log-level",), "str"), (("--log-level-http",), "str"), (("--log-requests",), "flag"),
    (("--log-requests-level",), "int"), (("--crash-dump-folder",), "str"), (("--show-time-cost",), "flag"),
    (("--enable-metrics",), "flag"), (("--enable-metrics-for-all-schedulers",), "flag"),
    (("--collect-tokens-histogram",), "flag"), (("--decode-log-interval",), "int"),
    (("--enable-request-time-stats-logging",), "flag"), (("--kv-events-config",), "json"),
    (("--enable-trace",), "flag"), (("--otlp-traces-endpoint",), "str"),
    # API
    (("--api-key",), "str"), (("--served-model-name",), "str"), (("--weight-version",), "str"),
    (("--chat-template",), "str"), (("--completion-template",), "str"), (("--file-storage-path",), "str"),
    (("--enable-cache-report",), "flag"), (("--reasoning-parser",), "choice", SGLANG_REASONING_PARSERS),
    (("--tool-call-parser",), "choice", SGLANG_TOOL_PARSERS), (("--tool-server",), "str"),
    (("--sampling-defaults",), "choice", ["openai", "model"]),
    # data parallelism
    (("--dp-size", "--data-parallel-size"), "int"),
    (("--load-balance-method",), "choice", ["round_robin", "shortest_queue", "minimum_tokens",
                                            "total_requests", "total_tokens", "follow_bootstrap_room"]),
    (("--enable-dp-attention",), "flag"), (("--enable-dp-lm-head",), "flag"),
    # multi-node
    (("--dist-init-addr", "--nccl-init-addr"), "str"), (("--nnodes",), "int"), (("--node-rank",), "int"),
    # model override
    (("--json-model-override-args",), "json"), (("--preferred-sampling-params",), "json"),
    # LoRA
    (("--enable-lora",), "flag"), (("--max-lora-rank",), "int"), (("--lora-target-modules",), "strs"),
    (("--lora-paths",), "strs"), (("--max-loras-per-batch",), "int"), (("--lora-backend",), "str"),
    # kernel backends
    (("--attention-backend",), "choice", SGLANG_ATTENTION),
    (("--prefill-attention-backend",), "choice", SGLANG_ATTENTION),
    (("--decode-attention-backend",), "choice", SGLANG_ATTENTION),
    (("--mm-attention-backend",), "str"),
    (("--sampling-backend",), "choice", ["flashinfer", "pytorch"]),
    (("--grammar-backend",), "choice", ["xgrammar", "outlines", "llguidance", "none"]),
    (("--nsa-prefill-backend",), "choice", SGLANG_DSA), (("--nsa-decode-backend",), "choice", SGLANG_DSA),
    (("--dsa-prefill-backend",), "choice", SGLANG_DSA), (("--dsa-decode-backend",), "choice", SGLANG_DSA),
    (("--fp8-gemm-backend",), "str"), (("--fp4-gemm-backend",), "str"),
    (("--disable-flashinfer-autotune",), "flag"),
    # speculative decoding
    (("--speculative-algorithm",), "upper", SGLANG_SPEC_ALGOS),
    (("--speculative-draft-model-path", "--speculative-draft-model"), "str"),
    (("--speculative-draft-model-revision",), "str"), (("--speculative-num-steps",), "int"),
    (("--speculative-eagle-topk",), "int"), (("--speculative-num-draft-tokens",), "int"),
    (("--speculative-accept-threshold-single",), "float"), (("--speculative-accept-threshold-acc",), "float"),
    (("--speculative-token-map",), "str"),
    (("--speculative-attention-mode",), "choice", ["prefill", "decode"]),
    (("--speculative-moe-runner-backend",), "choice", SGLANG_MOE_RUNNER),
    (("--speculative-draft-load-format",), "str"),
    # expert parallelism
    (("--ep-size", "--expert-parallel-size", "--ep"), "int"),
    (("--moe-a2a-backend",), "choice", ["none", "deepep", "mooncake", "ascend_fuseep", "flashinfer", "mori"]),
    (("--moe-runner-backend",), "choice", SGLANG_MOE_RUNNER),
    (("--flashinfer-mxfp4-moe-precision",), "choice", ["default", "bf16"]),
    (("--enable-flashinfer-allreduce-fusion",), "flag"),
    (("--deepep-mode",), "choice", ["normal", "low_latency", "auto"]),
    (("--ep-num-redundant-experts",), "int"), (("--ep-dispatch-algorithm",), "str"),
    (("--init-expert-location",), "str"), (("--enable-eplb",), "flag"), (("--eplb-algorithm",), "str"),
    (("--eplb-rebalance-num-iterations",), "int"), (("--expert-distribution-recorder-mode",), "str"),
    (("--enable-expert-distribution-metrics",), "flag"), (("--deepep-config",), "str"),
    (("--moe-dense-tp-size",), "int"),
    # hierarchical cache
    (("--enable-hierarchical-cache",), "flag"), (("--hicache-ratio",), "float"), (("--hicache-size",), "int"),
    (("--hicache-write-policy",), "choice", ["write_back", "write_through", "write_through_selective"]),
    (("--hicache-io-backend",), "str"), (("--hicache-storage-backend",), "str"),
    # optimization / debug
    (("--disable-radix-cache",), "flag"), (("--cuda-graph-max-bs",), "int"), (("--cuda-graph-bs",), "ints"),
    (("--disable-cuda-graph",), "flag"), (("--disable-cuda-graph-padding",), "flag"),
    (("--enable-profile-cuda-graph",), "flag"), (("--enable-cudagraph-gc",), "flag"),
    (("--enable-nccl-nvls",), "flag"), (("--enable-symm-mem",), "flag"),
    (("--disable-flashinfer-cutlass-moe-fp4-allgather",), "flag"), (("--enable-tokenizer-batch-encode",), "flag"),
    (("--disable-outlines-disk-cache",), "flag"), (("--disable-custom-all-reduce",), "flag"),
    (("--enable-mscclpp",), "flag"), (("--disable-overlap-schedule",), "flag"), (("--enable-mixed-chunk",), "flag"),
    (("--enable-two-batch-overlap",), "flag"), (("--enable-torch-compile",), "flag"),
    (("--torch-compile-max-bs",), "int"), (("--torchao-config",), "str"), (("--enable-nan-detection",), "flag"),
    (("--enable-p2p-check",), "flag"), (("--triton-attention-reduce-in-fp32",), "flag"),
    (("--triton-attention-num-kv-splits",), "int"), (("--num-continuous-decode-steps",), "int"),
    (("--delete-ckpt-after-loading",), "flag"), (("--enable-memory-saver",), "flag"),
    (("--enable-weights-cpu-backup",), "flag"), (("--allow-auto-truncate",), "flag"),
    (("--enable-custom-logit-processor",), "flag"), (("--flashinfer-mla-disable-ragged",), "flag"),
    (("--disable-shared-experts-fusion",), "flag"), (("--disable-chunked-prefix-cache",), "flag"),
    (("--disable-fast-image-processor",), "flag"), (("--enable-return-hidden-states",), "flag"),
    (("--enable-deterministic-inference",), "flag"), (("--mm-max-concurrent-calls",), "int"),
    (("--startup-weight-load-mode",), "choice", ["default", "overlap"]),
    # disaggregation
    (("--disaggregation-mode",), "choice", ["null", "prefill", "decode"]),
    (("--disaggregation-transfer-backend",), "choice", ["mooncake", "nixl", "ascend", "fake", "mori"]),
    (("--disaggregation-bootstrap-port",), "int"), (("--disaggregation-ib-device",), "str"),
    (("--disaggregation-decode-tp",), "int"), (("--disaggregation-decode-dp",), "int"),
    (("--disaggregation-prefill-pp",), "int"), (("--num-reserved-decode-tokens",), "int"),
]


# ---------------------------------------------------------------------------------------------
# parser construction


class _Parser(argparse.ArgumentParser):
    # (prog, usage) of the top-level parser a subcommand's parser belongs to (vLLM's `vllm`): argparse
    # reports the arguments no subparser took from there (real vLLM 0.32.0:
    # "usage: vllm [-h] [-v] ..." then "vllm: error: unrecognized arguments: --lanekit-bogus 1").
    top: tuple[str, str] | None = None

    def error(self, message):  # argparse's format, the engine's prog, exit 2
        if self.top is not None and message.startswith("unrecognized arguments:"):
            top_prog, top_usage = self.top
            sys.stderr.write(top_usage)
            sys.stderr.write(f"{top_prog}: error: {message}\n")
        else:
            self.print_usage(sys.stderr)
            sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.stderr.flush()
        raise SystemExit(2)


def _add(parser, names, kind, extra, boolean_optional):
    dest = names[0].lstrip("-").replace("-", "_")
    kw = {"dest": dest, "default": None}
    if kind == "str":
        kw["type"] = str
    elif kind == "int":
        kw["type"] = int
    elif kind == "float":
        kw["type"] = float
    elif kind == "json":
        kw["type"] = loads
    elif kind == "hint":
        kw["type"] = human_readable_int
    elif kind == "hint_auto":
        kw["type"] = human_readable_int_or_auto
    elif kind == "choice":
        kw["type"] = str
        kw["choices"] = extra
    elif kind == "upper":
        kw["type"] = upper_choice(extra)
    elif kind == "strs":
        kw["nargs"] = "+"
        kw["type"] = str
    elif kind == "ints":
        kw["nargs"] = "+"
        kw["type"] = int
    elif kind == "optstr":
        kw["nargs"] = "?"
        kw["const"] = True
        kw["type"] = str
    elif kind == "flag":
        kw["action"] = "store_true"
        kw["default"] = False
    elif kind == "bool":
        if boolean_optional:
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw["action"] = "store_true"
            kw["default"] = False
    else:  # pragma: no cover - table error
        raise ValueError(f"unknown kind {kind}")
    parser.add_argument(*names, **kw)


def vllm_parser(prog: str = "vllm serve", model_positional: bool = True,
                top: tuple[str, str] | None = None) -> argparse.ArgumentParser:
    p = _Parser(prog=prog, allow_abbrev=False, usage=f"{prog} [model_tag] [options]" if model_positional else None,
                description="lanekit STAND-IN for vLLM's OpenAI-compatible server (a test instrument: "
                            "it runs no model).")
    p.top = top
    if model_positional:
        p.add_argument("model_tag", nargs="?", default=None, help="The model tag to serve")
    for names, kind, *extra in VLLM_FLAGS:
        _add(p, names, kind, extra[0] if extra else None, boolean_optional=True)
    return p


def sglang_parser(prog: str, model_positional: bool) -> argparse.ArgumentParser:
    usage = f"{prog} [-h] [model] [--model-path MODEL_PATH] [options]" if model_positional else \
        f"{prog} [-h] --model-path MODEL_PATH [options]"
    p = _Parser(prog=prog, allow_abbrev=True, usage=usage,
                description="lanekit STAND-IN for SGLang's server (a test instrument: it runs no model).")
    if model_positional:
        p.add_argument("model_positional", nargs="?", default=None, metavar="model")
    for names, kind, *extra in SGLANG_FLAGS:
        _add(p, names, kind, extra[0] if extra else None, boolean_optional=False)
    return p


# ---------------------------------------------------------------------------------------------
# vLLM FlexibleArgumentParser preprocessing

_VLLM_KNOWN = {n for names, *_rest in VLLM_FLAGS for n in names}


def vllm_preprocess(argv: list[str], prog: str = "vllm serve") -> list[str]:
    """`--max_model_len` -> `--max-model-len`; `-O3` -> `-O 3`; `--json-flag.a.b v` dotted keys
    merged into one JSON object per flag (errors exit 2 like argparse)."""
    out: list[str] = []
    dotted: dict[str, dict] = {}
    order: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            out.extend(argv[i:])
            break
        if tok.startswith("--") and len(tok) > 2:
            key, eq, val = tok.partition("=")
            base, dot, path = key.partition(".")
            base = "--" + base[2:].replace("_", "-")
            key = base + dot + path
            if dot and base in VLLM_JSON_FLAGS:
                if eq:
                    value = val
                elif i + 1 < len(argv):
                    i += 1
                    value = argv[i]
                else:
                    _die(prog, f"argument {base}: expected one argument")
                try:
                    parsed = json.loads(value)
                except ValueError:
                    parsed = value
                node = dotted.setdefault(base, {})
                if base not in order:
                    order.append(base)
                parts = path.split(".")
                for part in parts[:-1]:
                    node = node.setdefault(part, {})
                node[parts[-1]] = parsed
                i += 1
                continue
            out.append(key + (eq + val if eq else ""))
        elif re.fullmatch(r"-O\d", tok):
            out.extend(["-O", tok[2:]])
        else:
            out.append(tok)
        i += 1
    for base in order:
        out.extend([base, json.dumps(dotted[base])])
    return out


def _die(prog: str, message: str):
    sys.stderr.write(f"usage: {prog} [model_tag] [options]\n{prog}: error: {message}\n")
    raise SystemExit(2)


def non_default(args: argparse.Namespace) -> dict:
    return {k: v for k, v in vars(args).items() if v not in (None, False)}
