"""The three modules end to end (main(), argument spec, fail_json sentences) and their managers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils import _staging
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.modules.cache_warmth import CacheWarmth
from ansible_collections.lanekit.serving.plugins.modules.weights_verify import WeightsChecker

BASE = str(Path(_staging.__file__).parents[5])
MODULES = Path(_staging.__file__).parents[1] / "modules"
REV = "0123456789abcdef0123456789abcdef01234567"


def run_module(name, args, check=False, tmp=None):
    """Run a module file the way Ansible does (args file), return its JSON result."""
    a = dict(args)
    if check:
        a["_ansible_check_mode"] = True
    a.setdefault("_ansible_tmpdir", str(tmp) if tmp else None)
    a.setdefault("_ansible_remote_tmp", str(tmp) if tmp else "/tmp")
    argsfile = Path(tmp or "/tmp") / ("args-%s.json" % name)
    argsfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": a}))
    env = dict(os.environ, PYTHONPATH=BASE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, str(MODULES / (name + ".py")), str(argsfile)], capture_output=True,
                       text=True, env=env, timeout=120)
    out = p.stdout.strip().splitlines()
    assert out, p.stderr
    return json.loads(out[-1])


@pytest.fixture
def staged(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "params.json").write_text('{"dim": 8}')
    (src / "tekken.json").write_text('{"vocab": []}')
    (src / "consolidated-00001-of-00002.safetensors").write_bytes(os.urandom(3 << 20))
    (src / "consolidated-00002-of-00002.safetensors").write_bytes(os.urandom(2 << 20))
    (src / "consolidated.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "a": "consolidated-00001-of-00002.safetensors", "b": "consolidated-00002-of-00002.safetensors"}}))
    dest = tmp_path / "nfs" / "model"
    dest.parent.mkdir()
    r = run_module("weights_stage", {"dest": str(dest), "source": "local", "local_path": str(src),
                                     "revision": REV, "model_id": "org/m"}, tmp=tmp_path)
    assert r["changed"] and not r.get("failed"), r
    return dest


def test_stage_module_idempotent_check_and_errors(staged, tmp_path):
    src = tmp_path / "src"
    args = {"dest": str(staged), "source": "local", "local_path": str(src), "revision": REV, "model_id": "org/m"}
    r = run_module("weights_stage", args, tmp=tmp_path)
    assert r["changed"] is False and r["files_fetched"] == 0
    r = run_module("weights_stage", dict(args, dest=str(tmp_path / "nfs" / "fresh")), check=True, tmp=tmp_path)
    assert r["changed"] and r["would_fetch_bytes"] == r["bytes_total"] > 5 << 20
    assert not (tmp_path / "nfs" / "fresh").exists()
    r = run_module("weights_stage", {"dest": str(staged), "source": "hf", "repo_id": "org/m", "revision": "main",
                                     "token": "hf_SECRET"}, tmp=tmp_path)
    assert r["failed"] and "40-hex" in r["msg"] and "Traceback" not in r["msg"]
    assert "hf_SECRET" not in json.dumps(r)
    r = run_module("weights_stage", {"dest": str(staged), "source": "hf", "revision": REV}, tmp=tmp_path)
    assert r["failed"] and "repo_id" in r["msg"]


def test_verify_module_good_and_bad(staged, tmp_path):
    r = run_module("weights_verify", {"path": str(staged), "revision": REV, "layout": "mistral_consolidated"},
                   tmp=tmp_path)
    assert r["ok"] and not r["changed"] and r["files_checked"] == 5
    r = run_module("weights_verify", {"path": str(staged), "revision": "f" * 40}, tmp=tmp_path)
    assert r["failed"] and "lane pins " + "f" * 40 in r["msg"]
    (staged / "consolidated-00002-of-00002.safetensors").rename(staged / "moved.bin")
    with open(staged / "consolidated-00001-of-00002.safetensors", "ab") as fh:
        fh.write(b"x")
    r = run_module("weights_verify", {"path": str(staged), "layout": "mistral_consolidated"}, tmp=tmp_path)
    assert r["failed"]
    assert "missing: consolidated-00002-of-00002.safetensors" in r["msg"]
    assert "consolidated-00001-of-00002.safetensors (size 3145729, expected 3145728)" in r["msg"]
    assert r["missing"] == ["consolidated-00002-of-00002.safetensors"]


def test_checker_layout_symlinks_and_index(staged):
    assert WeightsChecker(str(staged), layout="mistral_consolidated").run()["ok"]
    (staged / "config.json").write_text("{}")
    os.symlink(str(staged / "gone"), str(staged / "dangling.safetensors"))
    r = WeightsChecker(str(staged), layout="mistral_consolidated").run()
    assert not r["ok"]
    assert any("config.json is present" in e for e in r["layout_errors"])
    assert r["dangling_symlinks"] == ["dangling.safetensors"]
    man = json.loads((staged / "MANIFEST.json").read_text())
    man["files"] = [f for f in man["files"] if f["path"] not in ("tekken.json",
                                                                 "consolidated-00002-of-00002.safetensors")]
    (staged / "MANIFEST.json").write_text(json.dumps(man))
    r = WeightsChecker(str(staged), layout="mistral_consolidated").run()
    assert any("tekken.json is missing" in e for e in r["layout_errors"])
    assert any("names shards that are not in the manifest: consolidated-00002" in e for e in r["layout_errors"])


def test_checker_without_manifest_is_a_sentence(tmp_path):
    with pytest.raises(LanekitError, match="no MANIFEST.json"):
        WeightsChecker(str(tmp_path)).run()
    with pytest.raises(LanekitError, match="mounted"):
        WeightsChecker(str(tmp_path / "nope")).run()


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


@pytest.mark.parametrize("name", ["weights_stage", "weights_verify", "cache_warmth"])
def test_documentation_matches_argument_spec(name):
    import importlib

    import yaml
    mod = importlib.import_module("ansible_collections.lanekit.serving.plugins.modules." + name)
    doc = yaml.safe_load(mod.DOCUMENTATION)
    yaml.safe_load(mod.EXAMPLES)
    yaml.safe_load(mod.RETURN)
    spec = mod.argument_spec()
    assert set(doc["options"]) == set(spec)
    for opt, d in doc["options"].items():
        s = spec[opt]
        assert d["type"] == s["type"], opt
        assert d.get("default") == s.get("default"), opt
        assert d.get("choices") == s.get("choices"), opt
        assert bool(d.get("required")) == bool(s.get("required")), opt
        assert d.get("elements") == s.get("elements"), opt
    assert set(doc["attributes"]) == {"check_mode", "diff_mode", "idempotent"}


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
    from ansible_collections.lanekit.serving.plugins.module_utils import _pagecache as pc
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
