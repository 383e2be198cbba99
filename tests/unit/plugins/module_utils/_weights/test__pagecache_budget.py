"""Budget math (the engine's claim, the MemFree floor) and the warm order."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache_budget as pcbudget
from ansible_collections.lanekit.serving.plugins.module_utils._weights._pagecache_sys import GIB


def test_budget_math_gb10_example():
    # GB10: ~121.6 GiB unified, GMU 0.89, 4 GiB headroom; MemFree 20 GiB with 80 GiB of page cache
    device = int(121.63 * GIB)
    claim = pcbudget.engine_claim_bytes(0.89, device)
    floor = pcbudget.memfree_floor(0.89, device, 4 * GIB)
    assert abs(claim / GIB - 108.25) < 0.01
    assert floor == claim + 4 * GIB
    assert pcbudget.warm_budget(20 * GIB, floor, 71 * GIB) == 0  # already below the floor: warm nothing
    # a discrete GPU: only the headroom is kept
    assert pcbudget.warm_budget(200 * GIB, pcbudget.memfree_floor(0.9, 0, 4 * GIB), 71 * GIB) == 71 * GIB
    assert pcbudget.warm_budget(50 * GIB, 10 * GIB, 71 * GIB) == 40 * GIB
    assert pcbudget.warm_budget(50 * GIB, 10 * GIB, 71 * GIB, cap=5 * GIB) == 5 * GIB
    with pytest.raises(ValueError):
        pcbudget.engine_claim_bytes(1.5, GIB)


def test_order_puts_this_ranks_files_first():
    files = [f"c-{i}.safetensors" for i in (10, 2, 1, 3, 4, 5, 6, 7, 8, 9)] + ["params.json"]
    order = pcbudget.order_for_rank(files, rank=1, world_size=4, first=["params.json"])
    nat = sorted(files, key=pcbudget.natural_key)
    assert order[0] == "params.json"
    mine = [p for p in nat if p != "params.json"][1::4]
    assert order[1:1 + len(mine)] == mine
    assert sorted(order) == sorted(files) and len(order) == len(files)
    assert pcbudget.order_for_rank(files) == nat
