"""Page math, budget math, residency measurement (cachestat/mincore/unknown), warm and evict."""
from __future__ import annotations

import errno
import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache as pc

GIB = pc.GIB
MIB = pc.MIB

MEMINFO = """MemTotal:       127535104 kB
MemFree:        20971520 kB
MemAvailable:   104857600 kB
Buffers:            1024 kB
Cached:         83886080 kB
HugePages_Total:       0
"""


def test_page_math():
    assert pc.pages_for(0, 4096) == 0
    assert pc.pages_for(1, 4096) == 1
    assert pc.pages_for(4096, 4096) == 1
    assert pc.pages_for(4097, 4096) == 2
    assert pc.pages_for(5 * GIB, 65536) == 5 * GIB // 65536
    assert pc.resident_bytes(2, 4097, 4096) == 4097  # the partial last page never counts past the end
    assert pc.resident_bytes(1, 4097, 4096) == 4096
    assert pc.pct(1, 4) == 25.0 and pc.pct(None, 4) is None and pc.pct(0, 0) == 100.0


def test_meminfo_parse_and_report():
    mi = pc.parse_meminfo(MEMINFO)
    assert mi["MemTotal"] == 127535104 * 1024 and mi["HugePages_Total"] == 0
    rep = pc.meminfo_report(mi)
    assert rep["memfree_gib"] == 20.0 and rep["memavailable_gib"] == 100.0
    assert rep["available_minus_free_gib"] == 80.0


def test_budget_math_gb10_example():
    # GB10: ~121.6 GiB unified, GMU 0.89, 4 GiB headroom; MemFree 20 GiB with 80 GiB of page cache
    device = int(121.63 * GIB)
    claim = pc.engine_claim_bytes(0.89, device)
    floor = pc.memfree_floor(0.89, device, 4 * GIB)
    assert abs(claim / GIB - 108.25) < 0.01
    assert floor == claim + 4 * GIB
    assert pc.warm_budget(20 * GIB, floor, 71 * GIB) == 0  # already below the floor: warm nothing
    # a discrete GPU: only the headroom is kept
    assert pc.warm_budget(200 * GIB, pc.memfree_floor(0.9, 0, 4 * GIB), 71 * GIB) == 71 * GIB
    assert pc.warm_budget(50 * GIB, 10 * GIB, 71 * GIB) == 40 * GIB
    assert pc.warm_budget(50 * GIB, 10 * GIB, 71 * GIB, cap=5 * GIB) == 5 * GIB
    with pytest.raises(ValueError):
        pc.engine_claim_bytes(1.5, GIB)


def test_order_puts_this_ranks_files_first():
    files = [f"c-{i}.safetensors" for i in (10, 2, 1, 3, 4, 5, 6, 7, 8, 9)] + ["params.json"]
    order = pc.order_for_rank(files, rank=1, world_size=4, first=["params.json"])
    nat = sorted(files, key=pc.natural_key)
    assert order[0] == "params.json"
    mine = [p for p in nat if p != "params.json"][1::4]
    assert order[1:1 + len(mine)] == mine
    assert sorted(order) == sorted(files) and len(order) == len(files)
    assert pc.order_for_rank(files) == nat


@pytest.fixture
def datafile(tmp_path):
    p = tmp_path / "shard.safetensors"
    with open(p, "wb") as fh:
        fh.write(os.urandom(8 * MIB + 123))
        fh.flush()
        os.fsync(fh.fileno())
    return str(p)


def evict(path):
    pc.evict_files([path])


def read_all(path):
    with open(path, "rb") as fh:
        while fh.read(1 << 20):
            pass


def test_measure_cold_and_warm_with_both_methods(datafile):
    psize = pc.page_size()
    evict(datafile)
    methods = ["mincore"] + (["cachestat"] if pc.measure_file(datafile).method == "cachestat" else [])
    for method in methods:
        evict(datafile)
        cold = pc.measure_file(datafile, method=method)
        assert cold.method == method and cold.resident_pages <= cold.pages // 10
        read_all(datafile)
        warm = pc.measure_file(datafile, method=method)
        assert warm.resident_pages == warm.pages == pc.pages_for(os.path.getsize(datafile), psize)
        assert warm.as_dict(psize)["resident_pct"] == 100.0


def test_unknown_instead_of_fake_residency(datafile, monkeypatch):
    evict(datafile)
    # cachestat's EPERM means mincore would lie: unknown, not 100 %
    monkeypatch.setattr(pc, "cachestat", lambda *a, **k: (_never for _never in ()).throw(OSError(errno.EPERM, "EPERM")))
    r = pc.measure_file(datafile)
    assert r.resident_pages is None and r.method == "unknown" and "EPERM" in r.reason
    # no cachestat, and a caller that neither owns nor may write the file
    monkeypatch.setattr(pc, "cachestat", lambda *a, **k: (_never for _never in ()).throw(OSError(errno.ENOSYS, "ENOSYS")))
    monkeypatch.setattr(pc.os, "geteuid", lambda: 65534)
    monkeypatch.setattr(pc.os, "access", lambda *a, **k: False)
    r = pc.measure_file(datafile)
    assert r.resident_pages is None and "fake" in r.reason
    s = pc.summarize([r], pc.page_size())
    assert s["pct"] is None and s["bytes_resident"] is None and s["unknown_files"] == [datafile]


def test_warm_reads_everything_and_skips_resident(datafile):
    evict(datafile)
    size = os.path.getsize(datafile)
    w = pc.warm_files([(datafile, size)], threads=2, block_size=1 * MIB, segment_bytes=2 * MIB)
    # kernel readahead may cache blocks before a worker reaches them: those are skipped, not read
    assert w.limited_by == "done" and w.bytes_read + w.bytes_skipped_resident == size and not w.errors
    assert w.bytes_read > 0
    assert pc.measure_file(datafile).resident_pages == pc.pages_for(size, pc.page_size())
    again = pc.warm_files([(datafile, size)], threads=2, block_size=1 * MIB)
    if pc.measure_file(datafile).method == "cachestat":
        assert again.bytes_read == 0 and again.bytes_skipped_resident == size


def test_warm_stops_before_memfree_floor(datafile):
    evict(datafile)
    size = os.path.getsize(datafile)
    state = {"free": 100 * MIB}
    reads = []

    def fake_meminfo():
        reads.append(1)
        return {"MemFree": state["free"] - 1 * MIB * len(reads)}  # falls 1 MiB per block

    w = pc.warm_files([(datafile, size)], threads=1, block_size=1 * MIB, floor_bytes=95 * MIB,
                      meminfo=fake_meminfo, skip_resident=False)
    assert w.limited_by == "budget"
    assert 0 < w.bytes_read < size
    assert w.min_mem_free is not None and w.min_mem_free >= 95 * MIB


def test_warm_budget_cap_and_time_limit(datafile):
    evict(datafile)
    size = os.path.getsize(datafile)
    w = pc.warm_files([(datafile, size)], threads=1, block_size=1 * MIB, budget_bytes=3 * MIB,
                      skip_resident=False)
    assert w.limited_by == "budget" and w.bytes_read == 3 * MIB
    evict(datafile)
    w = pc.warm_files([(datafile, size)], threads=1, block_size=1 * MIB, max_seconds=0)
    assert w.limited_by == "time" and w.bytes_read == 0


def test_evict_only_named_files(datafile, tmp_path):
    other = tmp_path / "other.bin"
    other.write_bytes(os.urandom(2 * MIB))
    read_all(datafile)
    read_all(str(other))
    pc.evict_files([datafile])
    assert pc.measure_file(datafile).resident_pages <= 2
    assert pc.measure_file(str(other)).resident_pages == pc.pages_for(2 * MIB, pc.page_size())


def test_detect_uma_from_driver_files(tmp_path):
    gpu = tmp_path / "0000:01:00.0"
    gpu.mkdir()
    (gpu / "information").write_text("Model: \t\t NVIDIA GB10\nIRQ: 1\n")
    assert pc.detect_uma(str(tmp_path)) == (True, "NVIDIA GB10")
    (gpu / "information").write_text("Model: \t\t NVIDIA H100 80GB HBM3\n")
    assert pc.detect_uma(str(tmp_path))[0] is False
    assert pc.detect_uma(str(tmp_path / "none")) == (False, None)


def test_warm_with_pread_fallback(datafile):
    evict(datafile)
    size = os.path.getsize(datafile)
    w = pc.warm_files([(datafile, size)], threads=2, block_size=1 * MIB, use_sendfile=False, skip_resident=False)
    assert w.limited_by == "done" and w.bytes_read == size
    assert pc.measure_file(datafile).resident_pages == pc.pages_for(size, pc.page_size())
