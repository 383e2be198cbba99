"""Issue 25: bus bandwidth exactly as nccl-tests computes it (algbw = size / time, busbw = algbw x factor)."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric import _busbw, _probe


def test_all_gather_matches_nccl_tests_on_two_sparks():
    # nccl-tests all_gather_perf on two DGX Sparks, as posted in
    # https://github.com/NVIDIA/dgx-spark-playbooks/issues/25: size 17179869184 B (the gathered buffer,
    # count 2147483648 floats per rank), out-of-place 453650 us -> algbw 37.87, busbw 18.94;
    # in-place 410049 us -> 41.90 / 20.95.
    size = 17179869184
    assert round(_busbw.algbw(size, 453650e-6), 2) == 37.87
    assert round(_busbw.busbw("all_gather", 2, size, 453650e-6), 2) == 18.94
    assert round(_busbw.busbw("all_gather", 2, size, 410049e-6), 2) == 20.95
    # The size column is the gathered buffer: what one rank sends is its n-th.
    assert _busbw.per_rank_count("all_gather", 2, size) == 2147483648


def test_factors_are_nccl_tests_own():
    assert _busbw.bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert _busbw.bus_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert _busbw.bus_factor("sendrecv", 8) == 1.0
    assert _busbw.bus_factor("all_reduce", 1) == 0.0
    # all-reduce of 1 GB in 0.1 s over 4 ranks: algbw 10, busbw 10 x 2 x 3 / 4 = 15
    assert _busbw.busbw("all_reduce", 4, 10**9, 0.1) == pytest.approx(15.0)
    assert _busbw.per_rank_count("all_reduce", 4, 4096) == 1024


def test_the_probe_uses_the_same_factors():
    # The probe runs alone in the image and carries its own copy; both must agree.
    for op in ("all_reduce", "all_gather", "sendrecv"):
        for n in (1, 2, 3, 8):
            assert _probe.bus_factor(op, n) == _busbw.bus_factor(op, n), (op, n)


def test_bad_input_is_a_sentence():
    with pytest.raises(LanekitError, match="not a measurement"):
        _busbw.algbw(1, 0)
    with pytest.raises(LanekitError, match="unknown collective 'broadcast'"):
        _busbw.bus_factor("broadcast", 2)


def test_summarize_averages_the_ranks_like_nccl_tests():
    results = [
        {"rank": 0, "world": 2, "timings": [{"op": "all_gather", "size": 2 * 10**9, "seconds": [1.0, 1.0]},
                                            {"op": "all_reduce", "size": 10**9, "seconds": [0.5]}]},
        {"rank": 1, "world": 2, "timings": [{"op": "all_gather", "size": 2 * 10**9, "seconds": [3.0, 3.0]},
                                            {"op": "all_reduce", "size": 10**9, "seconds": [0.5]}]},
    ]
    rows = _busbw.summarize(results)
    assert [(r["op"], r["size"]) for r in rows] == [("all_reduce", 10**9), ("all_gather", 2 * 10**9)]
    gather = rows[1]
    assert gather["time_s"] == 2.0 and gather["algbw"] == pytest.approx(1.0) and gather["busbw"] == pytest.approx(0.5)
    assert gather["slowest_rank"] == 1
    assert rows[0]["busbw"] == pytest.approx(2.0)  # 1 GB / 0.5 s x 2 x 1 / 2
    assert _busbw.headline(rows, "all_gather") is gather and _busbw.headline(rows, "sendrecv") is None
    assert _busbw.human_bytes(2**30) == "1 GiB" and _busbw.human_bytes(1000) == "1000 B"
