"""weights_stage (modules/weights_stage.py) end to end: main(), the argument spec, fail_json sentences."""
from __future__ import annotations

import json

from tests.unit.helpers.modules import REV, assert_documentation_matches_argument_spec, run_module


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


def test_documentation_matches_argument_spec():
    assert_documentation_matches_argument_spec("weights_stage")
