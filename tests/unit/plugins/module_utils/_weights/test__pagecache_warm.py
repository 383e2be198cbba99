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
    # a cold file is read whole: blocks the kernel's readahead brought in while a worker read are not skipped
    assert w.limited_by == "done" and w.bytes_read == size and w.bytes_skipped_resident == 0 and not w.errors
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


class _Readahead:
    """A kernel that caches one block past every read (its readahead): cachestat reports the pages
    of [0, cached_to), which the reads push forward."""

    def __init__(self, block):
        self.block = block
        self.cached_to = 0
        self.reads = []

    def cachestat(self, _fd, off=0, length=0):
        cached = max(0, min(off + length, self.cached_to) - off)
        return ((cached + pc.page_size() - 1) // pc.page_size(), 0, 0, 0, 0)

    def read(self, pos, n):
        self.reads.append((pos, n))
        self.cached_to = max(self.cached_to, pos + n + self.block)


def test_warm_reads_blocks_readahead_brought_in_while_it_ran(datafile, monkeypatch):
    """Issue #28: skipping a block that readahead had in flight stalled the stream every other
    block; residency is taken before the segment is read, so every cold block is read."""
    evict(datafile)
    size = os.path.getsize(datafile)
    kernel = _Readahead(1 * MIB)
    real_sendfile = os.sendfile

    def sendfile(out_fd, in_fd, pos, n):
        kernel.read(pos, n)
        return real_sendfile(out_fd, in_fd, pos, n)

    monkeypatch.setattr(pc, "cachestat", kernel.cachestat)
    monkeypatch.setattr(pc, "cachestat_nr", lambda: 451)
    monkeypatch.setattr(os, "sendfile", sendfile)
    w = pcwarm.warm_files([(datafile, size)], threads=1, block_size=1 * MIB, segment_bytes=4 * MIB)
    assert w.bytes_read == size and w.bytes_skipped_resident == 0
    assert [pos for pos, _n in kernel.reads] == list(range(0, size, 1 * MIB))


def test_warm_skips_blocks_resident_before_it_began(datafile, monkeypatch):
    """What was cached before the warm (the first 3 MiB here) is skipped, the rest read once."""
    evict(datafile)
    size = os.path.getsize(datafile)
    kernel = _Readahead(0)
    kernel.cached_to = 3 * MIB
    real_sendfile = os.sendfile

    def sendfile(out_fd, in_fd, pos, n):
        kernel.read(pos, n)
        return real_sendfile(out_fd, in_fd, pos, n)

    monkeypatch.setattr(pc, "cachestat", kernel.cachestat)
    monkeypatch.setattr(pc, "cachestat_nr", lambda: 451)
    monkeypatch.setattr(os, "sendfile", sendfile)
    w = pcwarm.warm_files([(datafile, size)], threads=1, block_size=1 * MIB, segment_bytes=4 * MIB,
                          budget_bytes=size - 3 * MIB)
    assert w.bytes_skipped_resident == 3 * MIB and w.bytes_read == size - 3 * MIB
    assert w.limited_by == "done"
    assert kernel.reads[0][0] == 3 * MIB


def test_new_bytes_per_block_asks_blocks_only_when_part_is_cached(monkeypatch):
    calls = []

    def cachestat(_fd, off=0, length=0):
        calls.append((off, length))
        return (0 if off == 0 and length == 10 * MIB else 1, 0, 0, 0, 0)

    monkeypatch.setattr(pc, "cachestat", cachestat)
    assert pcwarm.new_bytes_per_block(3, 0, 10 * MIB, 4 * MIB, 4096) == [4 * MIB, 4 * MIB, 2 * MIB]
    assert calls == [(0, 10 * MIB)]
    calls.clear()
    assert pcwarm.new_bytes_per_block(3, 4 * MIB, 5 * MIB, 4 * MIB, 4096) == [4 * MIB - 4096, 1 * MIB - 4096]
    assert calls == [(4 * MIB, 5 * MIB), (4 * MIB, 4 * MIB), (8 * MIB, 1 * MIB)]
