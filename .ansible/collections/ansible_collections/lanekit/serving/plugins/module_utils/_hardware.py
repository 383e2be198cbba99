# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Hardware profiles a lane can target.

Figures are those the engines see, not marketing numbers. For the GB10 (DGX Spark) they are
derived from the bring-up report's live boot: at ``--gpu-memory-utilization 0.85`` vLLM left
23.63 GiB of KV after 73.8 GiB of weights and 5.0 GiB of graph profiling, so the device memory
it divides is (23.63 + 73.8 + 5.0) / 0.85 = 120.51 GiB; and 108.78 GiB were free at startup,
which is the most an engine can claim (the admission ceiling).
"""
from __future__ import annotations

PROFILES = {
    "dgx_spark_gb10": {
        "display_name": "NVIDIA DGX Spark (GB10)",
        "gpu_name": "NVIDIA GB10",
        "compute_capability": "12.1",
        "gpus_per_node": 1,
        "device_memory_gib": 120.506,
        "admission_free_gib": 108.78,
        "unified_memory": True,
        # Cluster environment every rank gets on this hardware (launch.md §4/§7: NVL4-only
        # NCCL settings are wrong here; CPU affinity and cuMem must be off on Spark).
        "env": {
            "NCCL_CUMEM_ENABLE": "0",
            "NCCL_IGNORE_CPU_AFFINITY": "1",
            "NCCL_IB_DISABLE": "0",
        },
        "engine_env": {
            # Unified memory differs per node; SGLang's balance check would refuse to start.
            "sglang": {"SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK": "0"},
            "vllm": {},
        },
    },
}


def sm_major(profile: dict) -> int:
    return int(str(profile["compute_capability"]).split(".", 1)[0])
