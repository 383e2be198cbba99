"""cache_warmth (modules/cache_warmth.py): measure, warm and evict, the memory budget, and main()."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.modules.cache_warmth import CacheWarmth
from tests.unit.helpers.modules import assert_documentation_matches_argument_spec, run_module


def cw_params(path, **kw):
    p = dict(path=str(path), state="measured", files=None, priority_files=None, rank=None, world_size=None,
             method="auto", threads=2, block_size_mib=1, memory_fraction=0.9, device_memory_gib=None,
             headroom_gib=0.0, budget_gib=None, max_seconds=60, memory_model="discrete", per_file=True,
             allow_in_use=False, min_resident_pct=98.0)
    p.update(kw)
    return p


def test_cache_warmth_measure_warm_evict(staged):
    warnings = []
    evict = CacheWarmth(cw_params(staged, state="evicted"), False, warnings.append).run()
    assert evict["residency_after"]["pct"] is not None and evict["residency_after"]["pct"] < 5
    m = CacheWarmth(cw_params(staged), False, warnings.append).run()
    assert m["changed"] is False and m["residency_before"]["files"] == 5 and len(m["files"]) == 5
    chk = CacheWarmth(cw_params(staged, state="warm"), True, warnings.append).run()
    assert chk["changed"] and chk["would_read_bytes"] > 0 and chk["bytes_read"] == 0
    w = CacheWarmth(cw_params(staged, state="warm", rank=1, world_size=2), False, warnings.append).run()
    assert w["changed"] and w["limited_by"] == "done" and w["residency_after"]["pct"] == 100.0
    assert w["order"][0] == "consolidated-00002-of-00002.safetensors"
    again = CacheWarmth(cw_params(staged, state="warm"), False, warnings.append).run()
    assert again["changed"] is False and again["bytes_read"] == 0
    ev = CacheWarmth(cw_params(staged, state="evicted"), False, warnings.append).run()
    assert ev["changed"] and ev["residency_after"]["bytes_resident"] < ev["residency_before"]["bytes_resident"]


def test_cache_warmth_unified_memory_budget_stops_and_warns(staged):
    warnings = []
    CacheWarmth(cw_params(staged, state="evicted"), False, warnings.append).run()
    # a "GB10" whose engine claims more than is free: nothing may be warmed, and it says so
    r = CacheWarmth(cw_params(staged, state="warm", memory_model="unified", memory_fraction=1.0,
                              device_memory_gib=100000.0), False, warnings.append).run()
    assert r["unified_memory"] and r["bytes_read"] == 0 and r["limited_by"] == "budget"
    assert r["engine_short_bytes"] > 0
    assert any("Unified memory" in w for w in warnings)
    assert any("memory budget" in w for w in warnings)
    assert r["meminfo_after"]["available_minus_free"] is not None


def test_cache_warmth_module_main(staged, tmp_path):
    r = run_module("cache_warmth", {"path": str(staged)}, tmp=tmp_path)
    assert r["changed"] is False and "residency_before" in r and r["residency_before"]["method"] in (
        "cachestat", "mincore")
    r = run_module("cache_warmth", {"path": str(tmp_path)}, tmp=tmp_path)
    assert r["failed"] and "stage the weights first" in r["msg"]
    r = run_module("cache_warmth", {"path": str(staged), "files": ["nope.bin"]}, tmp=tmp_path)
    assert r["failed"] and "nope.bin" in r["msg"]
    (staged / "params.json").unlink()
    r = run_module("cache_warmth", {"path": str(staged)}, tmp=tmp_path)
    assert not r.get("failed") and r["missing_files"] == ["params.json"] and r["residency_before"]["files"] == 4


def test_documentation_matches_argument_spec():
    assert_documentation_matches_argument_spec("cache_warmth")


def test_cache_warmth_warm_enough_reads_nothing(staged):
    warnings = []
    CacheWarmth(cw_params(staged, state="evicted"), False, warnings.append).run()
    # Below the threshold only by the kernel's measure: a lane already "warm enough" is left alone.
    lenient = CacheWarmth(cw_params(staged, state="warm", min_resident_pct=0.0), False, warnings.append).run()
    assert lenient["changed"] is False and lenient["bytes_read"] == 0 and lenient["limited_by"] == "done"
    check = CacheWarmth(cw_params(staged, state="warm", min_resident_pct=0.0), True, warnings.append).run()
    assert check["changed"] is False and check["would_read_bytes"] == 0
    strict = CacheWarmth(cw_params(staged, state="warm", min_resident_pct=100.0), False, warnings.append).run()
    assert strict["changed"] is True and strict["bytes_read"] > 0


def test_cache_warmth_floor_is_memfree_on_unified_and_memavailable_on_discrete(staged, monkeypatch):
    """A discrete-GPU host whose MemFree is low only because of other page cache still warms (the
    floor is on MemAvailable); the same figures on unified memory, where the engine sees MemFree, warm nothing."""
    from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache_sys as pc
    gib = 1 << 30
    busy = {"MemTotal": 24 * gib, "MemFree": 1 * gib, "MemAvailable": 20 * gib, "Cached": 19 * gib}
    monkeypatch.setattr(pc, "read_meminfo", lambda *a, **k: dict(busy))
    warnings = []
    CacheWarmth(cw_params(staged, state="evicted"), False, warnings.append).run()
    uni = CacheWarmth(cw_params(staged, state="warm", memory_model="unified", memory_fraction=0.0,
                                headroom_gib=4.0), False, warnings.append).run()
    assert uni["budget"]["floor_on"] == "MemFree" and uni["bytes_read"] == 0 and uni["limited_by"] == "budget"
    assert any("MemFree must stay above" in w for w in warnings)
    dis = CacheWarmth(cw_params(staged, state="warm", memory_model="discrete", headroom_gib=4.0),
                      False, warnings.append).run()
    assert dis["budget"]["floor_on"] == "MemAvailable" and dis["limited_by"] == "done"
    assert dis["changed"] and dis["bytes_read"] > 0 and dis["residency_after"]["pct"] == 100.0
