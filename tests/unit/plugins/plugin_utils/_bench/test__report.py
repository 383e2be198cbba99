"""Bench report shaping, compare math and the prompt corpus."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _compare as cmp
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _corpus as corpus
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _report as report

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))
BASELINES = os.path.join(REPO, "roles", "bench", "files", "baselines")

RESULT = {
    "status": "completed", "final_score": 14, "rating": "Poor", "total_scenarios": 43, "deployability": 31,
    "responsiveness": 99, "safety_warnings": ["TC-81 injection", {"scenario_id": "TC-92", "title": "x"}, "TC-81"],
    "scores": {"total_points": 12, "max_points": 86, "median_turn_ms": 1594.0,
               "throughput": {"samples": 3, "failed": 0, "results": [
                   {"depth": 0, "concurrency": 1, "pp_tps": 1000.0, "tg_tps": 20.0, "pp_tokens": 256, "tg_tokens": 32},
                   {"depth": 0, "concurrency": 1, "pp_tps": 1200.0, "tg_tps": 22.0, "pp_tokens": 256, "tg_tokens": 32},
                   {"depth": 1024, "concurrency": 2, "pp_tps": None, "tg_tps": 30.0, "pp_tokens": 256,
                    "tg_tokens": 32}]}},
}


def test_report_has_the_tables_figures_and_provenance():
    doc = report.build(RESULT, {"lane": "L", "plan_hash": "h"}, [])
    assert doc["valid"] and doc["lane"] == "L" and doc["provenance"]["plan_hash"] == "h"
    assert doc["quality"]["score"] == 14 and doc["quality"]["points"] == 12
    assert doc["responsiveness"]["median_turn_s"] == 1.59
    assert doc["safety_warnings"] == ["TC-81", "TC-92"]
    assert doc["throughput"][0] == {"depth": 0, "concurrency": 1, "samples": 2, "pp_tps": 1100.0, "tg_tps": 21.0,
                                    "ttft_ms": None, "pp_tokens": 256, "tg_tokens": 32}
    assert doc["throughput"][1]["pp_tps"] is None


def test_invalid_report_says_so_first():
    md = report.render_markdown(report.build(RESULT, {"lane": "L"}, ["Rank 1 restarted during the run."]))
    assert "INVALID, not a result" in md and "- Rank 1 restarted during the run." in md
    assert "| pp256 @d0 c1 (tok/s) | 1,100 |" in md


def test_tool_summary_without_result_is_an_error_sentence():
    s = report.tool_summary(None, 1)
    assert s["error"].startswith("tool-eval-bench wrote no result (exit code 1)")


def test_compare_deltas_in_percent_against_the_first():
    a = report.build(RESULT, {"lane": "A"}, [])
    b = json.loads(json.dumps(a))
    b["lane"] = "B"
    b["throughput"][0]["pp_tps"] = 1320.0
    table = cmp.compare([a, b])
    row = next(r for r in table["rows"] if r["metric"] == "pp256 @d0 c1 (tok/s)")
    assert row["values"] == [1100.0, 1320.0] and row["deltas"] == [None, 20.0]
    quality = next(r for r in table["rows"] if r["metric"] == "Quality")
    assert quality["deltas"] == [None, 0.0]
    assert "1,320 (+20.0%)" in cmp.render_markdown(table)


def test_shipped_baselines_are_reports_with_their_source():
    docs = [cmp.check_report(json.load(open(os.path.join(BASELINES, f), encoding="utf-8")), f)
            for f in sorted(os.listdir(BASELINES)) if f.endswith(".json")]
    assert {d["lane"] for d in docs} == {"mistral-large4-nvfp4-8x-vllm", "mistral-large4-nvfp4-8x-sglang"}
    for d in docs:
        assert "bring-up report" in d["provenance"]["source"] and len(d["throughput"]) == 6
    table = cmp.compare(docs)  # sglang first (sorted), then vllm
    tg = next(r for r in table["rows"] if r["metric"] == "tg128 @d0 c1 (tok/s)")
    assert tg["values"] == [31.9, 24.8] and tg["deltas"][1] == pytest.approx(-22.3)


def test_resolve_names_files_baselines_and_lanes(tmp_path):
    run = tmp_path / "L" / "bench" / "20261130T100000Z"
    run.mkdir(parents=True)
    (run / "report.json").write_text(json.dumps({"valid": True}))
    assert cmp.resolve("L", str(tmp_path), BASELINES) == str(run / "report.json")
    assert cmp.resolve(str(run), str(tmp_path), BASELINES) == str(run / "report.json")
    assert cmp.resolve("baseline:mistral-large4-nvfp4-8x-vllm", "", BASELINES).endswith("8x-vllm.json")
    with pytest.raises(ValueError, match="No baseline baseline:nope"):
        cmp.resolve("baseline:nope", "", BASELINES)
    with pytest.raises(ValueError, match="run ansible-playbook lanekit.serving.bench_lane -i <inventory> -e lane=other"):
        cmp.resolve("other", str(tmp_path), BASELINES)
    with pytest.raises(ValueError, match="not a lanekit bench report"):
        cmp.check_report({"x": 1}, "f.json")


def test_corpus_is_deterministic_and_the_sim_tokenizer_knows_its_words():
    import importlib.util

    text = corpus.corpus_text(500, 42)
    assert text == corpus.corpus_text(500, 42) and len(text.split()) == 500
    assert corpus.corpus_words_needed([0, 8192], 2048, [1, 2]) == max(20000, 3 * (8192 + 4096))
    spec = importlib.util.spec_from_file_location("mk", os.path.join(REPO, "tests", "sim", "make_checkpoint.py"))
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    vocab = mk.hf_tokenizer()["model"]["vocab"]
    assert all(w in vocab for w in text.split())
