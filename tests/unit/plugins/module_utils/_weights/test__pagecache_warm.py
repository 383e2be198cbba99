"""Warm (bounded by the floor, the budget and the time; skipping resident pages) and evict."""
from __future__ import annotations

import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache_sys as pc
from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache_warm as pcwarm
from tests.unit.helpers.pagefiles import evict, make_datafile, read_all

MIB = pc.MIB


@pytest.fixture
def datafile(tmp_path):
    return make_datafile(tmp_path)


def test_warm_reads_everything_and_skips_resident(datafile):
    evict(datafile)
    size = os.path.getsize(datafile)
    w = pcwarm.warm_files([(datafile, size)], threads=2, block_size=1 * MIB, segment_bytes=2 * MIB)
    # kernel readahead may cache blocks before a worker reaches them: those are skipped, not read
    assert w.limited_by == "done" and w.bytes_read + w.bytes_skipped_resident == size and not w.errors
    assert w.bytes_read > 0
    assert pc.measure_file(datafile).resident_pages == pc.pages_for(size, pc.page_size())
    again = pcwarm.warm_files([(datafile, size)], threads=2, block_size=1 * MIB)
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

    w = pcwarm.warm_files([(datafile, size)], threads=1, block_size=1 * MIB, floor_bytes=95 * MIB,
                          meminfo=fake_meminfo, skip_resident=False)
    assert w.limited_by == "budget"
    assert 0 < w.bytes_read < size
    assert w.min_mem_free is not None and w.min_mem_free >= 95 * MIB


def test_warm_budget_cap_and_time_limit(datafile):
    evict(datafile)
    size = os.path.getsize(datafile)
    w = pcwarm.warm_files([(datafile, size)], threads=1, block_size=1 * MIB, budget_bytes=3 * MIB,
                          skip_resident=False)
    assert w.limited_by == "budget" and w.bytes_read == 3 * MIB
    evict(datafile)
    w = pcwarm.warm_files([(datafile, size)], threads=1, block_size=1 * MIB, max_seconds=0)
    assert w.limited_by == "time" and w.bytes_read == 0


def test_evict_only_named_files(datafile, tmp_path):
    other = tmp_path / "other.bin"
    other.write_bytes(os.urandom(2 * MIB))
    read_all(datafile)
    read_all(str(other))
    pcwarm.evict_files([datafile])
    assert pc.measure_file(datafile).resident_pages <= 2
    assert pc.measure_file(str(other)).resident_pages == pc.pages_for(2 * MIB, pc.page_size())


def test_warm_with_pread_fallback(datafile):
    evict(datafile)
    size = os.path.getsize(datafile)
    w = pcwarm.warm_files([(datafile, size)], threads=2, block_size=1 * MIB, use_sendfile=False, skip_resident=False)
    assert w.limited_by == "done" and w.bytes_read == size
    assert pc.measure_file(datafile).resident_pages == pc.pages_for(size, pc.page_size())
