"""Simulated device memory and KV-cache budget (no GPU here; the figures come from the
environment, with defaults that reproduce the bring-up report on a GB10):

  STANDIN_DEVICE_MEMORY_GIB   total device memory              (120.5)
  STANDIN_DEVICE_FREE_GIB     free at startup (UMA ceiling)     (108.78)
  STANDIN_WEIGHTS_GIB         weights per rank after load       (73.8)
  STANDIN_GRAPH_GIB           CUDA-graph memory, auto sizes     (5.0)
  STANDIN_GRAPH_GIB_PER_SIZE  extra per explicit capture size   (0.124: 29 sizes ~ +3.6 GiB)
  STANDIN_KV_BYTES_PER_TOKEN  KV bytes per token per rank       (51215)

With the defaults, --gpu-memory-utilization 0.85 leaves 23.63 GiB of KV cache and
--max-model-len 524288 is refused with "the estimated maximum model length is 495296";
0.89 fits.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from .common import GiB, env_float, env_int


@dataclass
class Device:
    total_gib: float
    free_gib: float
    weights_gib: float
    graph_gib: float
    graph_per_size_gib: float
    kv_bytes_per_token: int

    @classmethod
    def from_env(cls) -> Device:
        return cls(
            total_gib=env_float("STANDIN_DEVICE_MEMORY_GIB", 120.5),
            free_gib=env_float("STANDIN_DEVICE_FREE_GIB", 108.78),
            weights_gib=env_float("STANDIN_WEIGHTS_GIB", 73.8),
            graph_gib=env_float("STANDIN_GRAPH_GIB", 5.0),
            graph_per_size_gib=env_float("STANDIN_GRAPH_GIB_PER_SIZE", 0.124),
            kv_bytes_per_token=max(1, env_int("STANDIN_KV_BYTES_PER_TOKEN", 51215)),
        )


def gib(x_bytes: float) -> float:
    return x_bytes / GiB


def _d(x) -> Decimal:
    return Decimal(str(x))


def fmt2(x) -> str:
    """Two decimals, half up (23.625 -> 23.63), on the exact decimal value."""
    return str(_d(x).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def vllm_estimated_max_len(available_bytes: float, kv_bpt: int, block: int = 16) -> int:
    tokens = int(available_bytes // kv_bpt)
    return (tokens // block) * block


@dataclass
class VllmBudget:  # noqa: D101
    requested_gib: float
    graph_gib: float
    available_gib: float
    tokens: int
    max_model_len: int
    error: list | None


def vllm_budget(dev: Device, gmu: float, max_model_len: int | None, derived_len: int,
                explicit_graph_sizes: int, eager: bool, kv_cache_memory_bytes: int | None) -> VllmBudget:
    requested = _d(gmu) * _d(dev.total_gib)
    graph = Decimal(0) if eager else _d(dev.graph_gib) + explicit_graph_sizes * _d(dev.graph_per_size_gib)
    if kv_cache_memory_bytes:
        available = Decimal(kv_cache_memory_bytes) / GiB
    else:
        available = requested - _d(dev.weights_gib) - graph
    avail_bytes = int(available * GiB)
    length = max_model_len
    err = None
    if available <= 0:
        err = ["ValueError: No available memory for the cache blocks. Try increasing "
               "`gpu_memory_utilization` when initializing the engine. See "
               "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."]
        tokens = 0
    else:
        tokens = int(avail_bytes // dev.kv_bytes_per_token)
        if length is None:  # --max-model-len auto / -1: the largest that fits
            length = min(derived_len, vllm_estimated_max_len(avail_bytes, dev.kv_bytes_per_token))
        needed = length * dev.kv_bytes_per_token
        if needed > avail_bytes:
            est = vllm_estimated_max_len(avail_bytes, dev.kv_bytes_per_token)
            est_msg = (f"Based on the available memory, the estimated maximum model length is {est}. "
                       if est > 0 else "")
            err = [f"ValueError: To serve at least one request with the model's max seq len ({length}), "
                   f"({needed / GiB:.2f} GiB KV cache is needed, which is larger than the available KV "
                   f"cache memory ({fmt2(available)} GiB). {est_msg}Try increasing `gpu_memory_utilization` "
                   "or decreasing `max_model_len` when initializing the engine. See "
                   "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."]
    return VllmBudget(float(requested), float(graph), float(available), tokens, length or 0, err)
