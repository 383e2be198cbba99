"""Page math, meminfo, residency measurement (cachestat/mincore/unknown), the unified-memory probe."""
from __future__ import annotations

import errno
import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache_sys as pc
from tests.unit.helpers.pagefiles import evict, make_datafile, read_all

GIB = pc.GIB
MIB = pc.MIB


MEMINFO = """MemTotal:       127535104 kB
MemFree:        20971520 kB
MemAvailable:   104857600 kB
Buffers:            1024 kB
Cached:         83886080 kB
HugePages_Total:       0
"""


@pytest.fixture
def datafile(tmp_path):
    return make_datafile(tmp_path)


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


def test_detect_uma_from_driver_files(tmp_path):
    gpu = tmp_path / "0000:01:00.0"
    gpu.mkdir()
    (gpu / "information").write_text("Model: \t\t NVIDIA GB10\nIRQ: 1\n")
    assert pc.detect_uma(str(tmp_path)) == (True, "NVIDIA GB10")
    (gpu / "information").write_text("Model: \t\t NVIDIA H100 80GB HBM3\n")
    assert pc.detect_uma(str(tmp_path))[0] is False
    assert pc.detect_uma(str(tmp_path / "none")) == (False, None)
