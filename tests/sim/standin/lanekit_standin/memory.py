"""Simulated device memory and KV-cache budget (no GPU here; the figures come from the
environment, with defaults that reproduce the bring-up report on a GB10):

  STANDIN_DEVICE_MEMORY_GIB   total device memory              (120.5)
  STANDIN_DEVICE_FREE_GIB     free at startup (UMA ceiling)     (108.78)
  STANDIN_WEIGHTS_GIB         weights per rank after load       (73.8)
  STANDIN_GRAPH_GIB           CUDA-graph memory, auto sizes     (5.0)
  STANDIN_GRAPH_GIB_PER_SIZE  extra per explicit capture size   (0.124: 29 sizes ~ +3.6 GiB)
  STANDIN_KV_BYTES_PER_TOKEN  KV bytes per token per rank       (51215)
  STANDIN_DEVICE_CLAIMS       1: engines on one node share its device (the sim's images set it)

With device claims on, an engine that has sized its memory holds a claim for as long as its
process lives: an abstract unix socket named ``lksim-device-claim:<token>:<GiB>``. Rank containers
use the node's network namespace (--network host), so every engine on the node sees the others'
claims in /proc/net/unix and starts with that much less free memory; a second lane on a node then
fails there as it would on a GB10 ("Free memory on device ... is less than desired GPU memory
utilization"). The kernel drops a claim when its process exits, however it exits.

With the defaults, --gpu-memory-utilization 0.85 leaves 23.63 GiB of KV cache and
--max-model-len 524288 is refused with "the estimated maximum model length is 495296";
0.89 fits.
"""
from __future__ import annotations

import os
import socket
import uuid
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
            free_gib=max(0.0, env_float("STANDIN_DEVICE_FREE_GIB", 108.78) - claimed_by_others_gib()),
            weights_gib=env_float("STANDIN_WEIGHTS_GIB", 73.8),
            graph_gib=env_float("STANDIN_GRAPH_GIB", 5.0),
            graph_per_size_gib=env_float("STANDIN_GRAPH_GIB_PER_SIZE", 0.124),
            kv_bytes_per_token=max(1, env_int("STANDIN_KV_BYTES_PER_TOKEN", 51215)),
        )


CLAIM_TAG = "lksim-device-claim"
_HELD: list[socket.socket] = []


def _claims_on() -> bool:
    return os.environ.get("STANDIN_DEVICE_CLAIMS") == "1"


def claimed_by_others_gib(proc_net_unix: str = "/proc/net/unix") -> float:
    """GiB of device memory the other engines on this node hold (their live claims)."""
    if not _claims_on():
        return 0.0
    try:
        with open(proc_net_unix, encoding="utf-8", errors="replace") as fh:
            rows = fh.read().splitlines()[1:]
    except OSError:
        return 0.0
    held = (sock.getsockname() for sock in _HELD)
    mine = {name.decode(errors="replace") if isinstance(name, bytes) else name for name in held}
    total = 0.0
    for row in rows:
        fields = row.split()
        name = fields[-1] if len(fields) >= 8 else ""
        if not name.startswith(f"@{CLAIM_TAG}:") or "\0" + name[1:] in mine:
            continue
        try:
            total += float(name.rsplit(":", 1)[1])
        except ValueError:
            continue
    return total


def claim(gib_held: float) -> None:
    """Hold ``gib_held`` GiB of the node's device for the life of this process."""
    if not _claims_on() or gib_held <= 0:
        return
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(f"\0{CLAIM_TAG}:{uuid.uuid4().hex[:12]}:{gib_held:.3f}")
    _HELD.append(sock)


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
