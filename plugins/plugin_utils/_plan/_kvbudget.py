# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""KV-cache budget per rank, before anything boots.

One job: the budget's arithmetic (lint's kv-budget rules and the plan's ``memory`` read it).

The engine claims ``fraction x device memory``; weights and graph capture come out of that
claim, the rest is KV cache. If one request of the lane's maximum length does not fit, vLLM
refuses after the whole weight load (the bring-up lost ~21 minutes this way). On
unified-memory devices (GB10) the engine also refuses a claim larger than the memory free at
startup (the admission ceiling), so the fraction is bounded from both sides.
"""
from __future__ import annotations

import math

GIB = 1 << 30
# Keys of ``assess`` that only feed ``explain``'s advice (the published plan leaves them out).
ADVICE_KEYS = ("most_fraction", "max_tokens_at_most", "possible")


def kv_budget_gib(fraction: float, device_memory_gib: float, weights_gib: float, graph_reserve_gib: float) -> float:
    """KV cache memory left per rank after weights and graph capture."""
    return fraction * device_memory_gib - weights_gib - graph_reserve_gib


def max_tokens(kv_gib: float, kv_bytes_per_token: int, block_tokens: int = 64) -> int:
    """Longest single request the budget holds, rounded down to whole KV blocks."""
    if kv_gib <= 0:
        return 0
    tokens = int(kv_gib * GIB // kv_bytes_per_token)
    return tokens - tokens % block_tokens


def request_gib(tokens: int, kv_bytes_per_token: int) -> float:
    """KV memory one request of ``tokens`` tokens needs."""
    return tokens * kv_bytes_per_token / GIB


def smallest_fraction(tokens: int, kv_bytes_per_token: int, device_memory_gib: float,
                      weights_gib: float, graph_reserve_gib: float, step: float = 0.01) -> float:
    """Smallest fraction (rounded up to ``step``) whose KV budget holds one ``tokens`` request."""
    need = request_gib(tokens, kv_bytes_per_token) + weights_gib + graph_reserve_gib
    raw = need / device_memory_gib
    # Round up to the step, guarding against float noise such as 0.87000000001.
    return round(math.ceil(round(raw / step, 6)) * step, 4)


def ceiling_fraction(admission_free_gib: float, device_memory_gib: float) -> float:
    """Largest fraction the device admits at startup (claim must fit in memory free then)."""
    return admission_free_gib / device_memory_gib


def assess(fraction: float, max_model_len: int, kv_bytes_per_token: int, device_memory_gib: float,
           weights_gib: float, graph_reserve_gib: float, admission_free_gib: float | None,
           block_tokens: int = 64) -> dict:
    """Everything the preflight reports about one lane's memory, with a verdict.

    ``fits`` is False when the longest request does not fit; ``admitted`` is False when the
    claim exceeds the admission ceiling. ``smallest_fraction`` and ``ceiling_fraction`` say
    where the usable range is.
    """
    kv = kv_budget_gib(fraction, device_memory_gib, weights_gib, graph_reserve_gib)
    tokens = max_tokens(kv, kv_bytes_per_token, block_tokens)
    need = request_gib(max_model_len, kv_bytes_per_token)
    claim = fraction * device_memory_gib
    ceiling = ceiling_fraction(admission_free_gib, device_memory_gib) if admission_free_gib else None
    # The most any setting can claim: the admission ceiling (rounded down as advised), else all of it.
    most = min(1.0, math.floor(ceiling * 100) / 100) if ceiling is not None else 1.0
    smallest = smallest_fraction(max_model_len, kv_bytes_per_token, device_memory_gib, weights_gib, graph_reserve_gib)
    return {
        "fraction": fraction,
        "device_memory_gib": round(device_memory_gib, 3),
        "claim_gib": round(claim, 2),
        "weights_gib": weights_gib,
        "graph_reserve_gib": graph_reserve_gib,
        "kv_budget_gib": round(kv, 2),
        "max_tokens": tokens,
        "max_model_len": max_model_len,
        "request_gib": round(need, 2),
        "fits": tokens >= max_model_len,
        "smallest_fraction": smallest,
        "most_fraction": most,
        "max_tokens_at_most": max_tokens(kv_budget_gib(most, device_memory_gib, weights_gib, graph_reserve_gib),
                                         kv_bytes_per_token, block_tokens),
        # False when no fraction the device admits holds one request of the maximum length.
        "possible": smallest <= most,
        "admission_free_gib": admission_free_gib,
        "ceiling_fraction": None if ceiling is None else round(ceiling, 4),
        "admitted": True if ceiling is None or admission_free_gib is None else claim <= admission_free_gib,
    }


def explain(result: dict, flag: str) -> str:
    """One paragraph a person can act on, for a refused budget."""
    head = (
        f"at {flag} {result['fraction']} the KV budget per rank is {result['kv_budget_gib']:.2f} GiB "
        f"({result['fraction']} x {result['device_memory_gib']:.2f} GiB device memory - "
        f"{result['weights_gib']} GiB weights - {result['graph_reserve_gib']} GiB graph reserve), "
        f"room for {result['max_tokens']:,} tokens, but one {result['max_model_len']:,}-token request "
        f"needs {result['request_gib']:.2f} GiB"
    )
    ceiling = result["ceiling_fraction"]
    ceiling_text = (
        f"; the device admits at most {math.floor(ceiling * 100) / 100:.2f} "
        f"({result['admission_free_gib']} GiB free at startup)" if ceiling else ""
    )
    if not result.get("possible", True):
        most, room = result["most_fraction"], result["max_tokens_at_most"]
        if room <= 0:
            return (
                f"{head}. No {flag} can work: even at {most:.2f} (the most the device admits) the weights and the "
                f"graph reserve alone fill the claim, leaving no KV cache. Spread the model over more ranks (a larger "
                f"tensor_parallel on more nodes), use a smaller checkpoint, or correct memory.weights_per_rank_gib / "
                f"memory.graph_reserve_gib if they are overstated."
            )
        return (
            f"{head}. No {flag} can hold one such request: even at {most:.2f} (the most the device admits) the "
            f"budget holds {room:,} tokens. Lower the maximum model length to at most {room:,} and set {flag} to "
            f"{most:.2f}, or spread the model over more ranks to free memory for KV cache."
        )
    if not result["fits"]:
        shorter = (f", or lower the maximum model length to {result['max_tokens']:,}"
                   if result["max_tokens"] > 0 else "")
        return (
            f"{head}. The engine would refuse after loading the weights ('estimated maximum model length is "
            f"{result['max_tokens']}'). Set {flag} to at least {result['smallest_fraction']:.2f}{ceiling_text}"
            f"{shorter}."
        )
    return (
        f"{flag} {result['fraction']} claims {result['claim_gib']:.2f} GiB, more than the "
        f"{result['admission_free_gib']} GiB the device has free at startup, so the engine would refuse to start. "
        f"Use a fraction between {result['smallest_fraction']:.2f} and {math.floor(ceiling * 100) / 100:.2f}."
    )
