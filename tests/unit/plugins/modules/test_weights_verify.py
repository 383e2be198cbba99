"""weights_verify (modules/weights_verify.py): the module end to end and its checker (layout, symlinks, index)."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.modules.weights_verify import WeightsChecker
from tests.unit.helpers.modules import REV, assert_documentation_matches_argument_spec, run_module


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


def test_documentation_matches_argument_spec():
    assert_documentation_matches_argument_spec("weights_verify")


def test_an_index_swapped_for_a_link_is_a_layout_error_not_a_read(staged, tmp_path):
    """Issue 38 item 7: an index on the export linked elsewhere (/dev/zero would exhaust memory) is named,
    not read."""
    target = tmp_path / "some-other.json"
    target.write_text(json.dumps({"weight_map": {}}))
    man = json.loads((staged / "MANIFEST.json").read_text())
    man["files"].append({"path": "model.safetensors.index.json", "size": target.stat().st_size, "sha256": "0" * 64})
    (staged / "MANIFEST.json").write_text(json.dumps(man))
    os.symlink(str(target), str(staged / "model.safetensors.index.json"))
    r = WeightsChecker(str(staged)).run()
    assert any("model.safetensors.index.json is a symbolic link" in e for e in r["layout_errors"]), r
