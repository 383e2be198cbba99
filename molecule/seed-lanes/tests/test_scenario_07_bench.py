"""Bench on the simulated cluster: playbooks/bench-lane.yml against the serving vLLM seed lane
with small settings. Asserts the report's structure, provenance and chart (a PNG with the
expected series), the validity gate (a rank restarted mid-run makes the run invalid; an
unreachable API fails with a sentence) and that the run needs nothing from outside the machine.
Structure only: the stand-in's scores mean nothing. Test code only (not part of the collection).
"""
from __future__ import annotations

import glob
import json
import os
import re
import struct
import subprocess
import time
import zlib

from simlib import LANE, ROOT, assert_no_traceback, docker, flat, node_of, plan, record_timing, run_playbook

# Small: 2 depths x 2 concurrencies x 1 run, 3 quality scenarios; about half a minute on the sim.
SMALL = {"depths": [0, 1024], "concurrency": [1, 2], "pp": 256, "tg": 32, "runs": 1,
         "scenarios": ["TC-01", "TC-02", "TC-03"]}
# Proxy and hub variables that point nowhere: a tool that reached out would fail the run.
NOWHERE = "http://127.0.0.1:9"
OFFLINE_ENV = {"http_proxy": NOWHERE, "https_proxy": NOWHERE, "HTTP_PROXY": NOWHERE, "HTTPS_PROXY": NOWHERE,
               "ALL_PROXY": NOWHERE, "HF_ENDPOINT": NOWHERE}


def png_text(data: bytes) -> dict[str, str]:
    """The PNG's text chunks (tEXt, zTXt, iTXt), read with the standard library."""
    out, pos = {}, 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        key, _sep, rest = body.partition(b"\0")
        if kind == b"tEXt":
            out[key.decode()] = rest.decode("latin-1")
        elif kind == b"zTXt":
            out[key.decode()] = zlib.decompress(rest[1:]).decode("latin-1")
        elif kind == b"iTXt":
            flag, rest = rest[0], rest[2:]
            _lang, _sep, rest = rest.partition(b"\0")
            _tkey, _sep, text = rest.partition(b"\0")
            out[key.decode()] = (zlib.decompress(text) if flag else text).decode()
        pos += 12 + length
    return out


def bench_args(settings: dict | None = None, *extra: str) -> list[str]:
    return ["-e", json.dumps({"bench_settings": settings or SMALL}), *extra]


def runs() -> list[str]:
    return sorted(glob.glob(os.path.join(ROOT, "reports", LANE, "bench", "*")))


def run_bench(extra: list[str], wait: bool = True):
    saved = {k: os.environ.get(k) for k in OFFLINE_ENV}
    os.environ.update(OFFLINE_ENV)
    try:
        return run_playbook("bench-lane.yml", extra=extra, wait=wait, timeout=900)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_bench_writes_a_valid_report_with_provenance_and_chart(vllm_serving):
    before = set(runs())
    proc = run_bench(bench_args(None, "-e", json.dumps({"bench_compare_with": [f"baseline:{LANE}"]})))
    record_timing("bench-lane (small settings)", proc.seconds)
    out = flat(proc.stdout)
    assert proc.returncode == 0, out[-3000:]
    assert_no_traceback(proc.stdout)
    # the live progress line: throughput points, then quality scenarios
    assert re.search(rf"bench {LANE}: throughput scenario [1-4] of 4 \(depth (0|1024), concurrency [12], run 1\)", out)
    assert f"bench {LANE}: quality scenario 3 of 3 (TC-03)" in out
    new = sorted(set(runs()) - before)
    assert len(new) == 1
    run = new[0]
    for name in ("raw/tool-eval-bench.json", "raw/tool-eval-bench.log", "raw/llama-benchy-progress.jsonl",
                 "raw/tool-eval-bench-events.jsonl", "inputs/tokenizer.json", "inputs/lanekit-bench-corpus-v1.txt",
                 "run.json", "report.json", "report.md", "report.png"):
        assert os.path.isfile(os.path.join(run, name)), name
    assert glob.glob(os.path.join(run, "raw", "tool-eval-bench-runs", "**", "*.md"), recursive=True)
    with open(os.path.join(run, "report.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    assert doc["valid"] is True and doc["problems"] == []
    assert doc["samples"] == 4 and doc["failed"] == 0
    assert [(r["depth"], r["concurrency"]) for r in doc["throughput"]] == [(0, 1), (0, 2), (1024, 1), (1024, 2)]
    assert all(r["pp_tps"] and r["tg_tps"] for r in doc["throughput"])
    assert set(doc["quality"]) >= {"score", "points", "max_points"} and isinstance(doc["safety_warnings"], list)
    prov = doc["provenance"]
    lane_plan = plan()
    assert prov["lane"] == LANE and prov["plan_hash"] == lane_plan["plan_hash"]
    assert prov["image"]["ref"] == lane_plan["image"]["ref"]
    assert len(prov["weights"]["manifest_sha256"]) == 64 and "manifest_revision" in prov["weights"]
    assert prov["engine_version"] not in ("", "unknown")
    assert prov["tools"]["tool-eval-bench"] == "3.0.0" and prov["tools"]["llama-benchy"] == "0.4.0"
    assert prov["collection_version"] not in ("", "unknown")
    assert {k: prov["settings"][k] for k in SMALL} == SMALL and prov["settings"]["seed"] == 42
    assert prov["started"] <= prov["ended"]
    gate = doc["gate"]
    assert len(gate["before"]) == 8 and gate["before"] == gate["after"]
    md = open(os.path.join(run, "report.md"), encoding="utf-8").read()
    assert "Verdict: **valid**" in md and "| pp256 @d0 c1 (tok/s) |" in md and "## Compared" in md
    # the chart: a PNG that opens, the run's four series and the baseline's beside them
    data = open(os.path.join(run, "report.png"), "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24])[0] > 400
    series = json.loads(png_text(data)["lanekit-series"])
    assert series[:4] == [f"{LANE} [0] pp c1", f"{LANE} [0] pp c2", f"{LANE} [0] tg c1", f"{LANE} [0] tg c2"]
    assert f"{LANE} [1] tg c2" in series
    # nothing left the machine: the tokenizer and corpus are local, the API is the lane's
    record = json.load(open(os.path.join(run, "run.json"), encoding="utf-8"))
    argv = " ".join(record["argv"])
    assert f"--tokenizer {run}/inputs/tokenizer.json" in argv and "--book-url http://127.0.0.1:9/" in argv
    assert record["api_url"] == f"http://{lane_plan['api']['address']}:{lane_plan['api']['port']}/v1"
    log = open(os.path.join(run, "raw", "tool-eval-bench.log"), encoding="utf-8", errors="replace").read()
    log += open(os.path.join(run, "raw", "tool-eval-bench-events.jsonl"), encoding="utf-8", errors="replace").read()
    assert "gpt2" not in log and "huggingface.co" not in log


def test_compare_playbook_puts_runs_and_baselines_side_by_side(tmp_path):
    latest = [r for r in runs() if os.path.isfile(os.path.join(r, "report.json"))
              and json.load(open(os.path.join(r, "report.json"), encoding="utf-8"))["valid"]]
    assert latest, "needs the valid run of the test above"
    proc = run_playbook("bench-compare.yml", extra=[
        "-e", f"compare={latest[-1]},baseline:{LANE},baseline:mistral-large4-nvfp4-8x-sglang",
        "-e", f"compare_dir={tmp_path}"])
    assert proc.returncode == 0, flat(proc.stdout)[-2000:]
    table = json.load(open(tmp_path / "compare.json", encoding="utf-8"))
    assert len(table["columns"]) == 3
    row = next(r for r in table["rows"] if r["metric"] == "tg128 @d0 c1 (tok/s)")
    assert row["values"][1:] == [24.8, 31.9] and row["deltas"][0] is None
    assert "(+" in (tmp_path / "compare.md").read_text() or "(-" in (tmp_path / "compare.md").read_text()
    assert (tmp_path / "compare.png").read_bytes()[:4] == b"\x89PNG"


def test_unreachable_api_fails_with_a_sentence(vllm_serving):
    before = set(runs())
    proc = run_bench(bench_args(None, "-e", "bench_api_address=192.0.2.1"))
    out = flat(proc.stdout)
    assert proc.returncode != 0
    assert_no_traceback(proc.stdout)
    assert f"Lane {LANE} cannot be benchmarked now: The API of lane {LANE} at http://192.0.2.1:" in out
    assert "did not answer" in out
    assert not any(os.path.exists(os.path.join(r, "run.json")) for r in set(runs()) - before)


def test_a_rank_restarted_mid_run_makes_the_run_invalid(vllm_serving):
    before = set(runs())
    settings = dict(SMALL, depths=[0, 1024, 2048], runs=2)
    proc = run_bench(bench_args(settings), wait=False)
    victim = next(s for s in plan()["ranks"] if s["node_rank"] == 3)
    deadline = time.monotonic() + 300
    restarted = False
    while time.monotonic() < deadline and proc.poll() is None:
        started = [r for r in set(runs()) - before
                   if os.path.isfile(os.path.join(r, "raw", "llama-benchy-progress.jsonl"))]
        if started:
            docker(node_of(victim["host"]), "restart", "-t", "1", victim["container_name"])
            restarted = True
            break
        time.sleep(1)
    assert restarted, "the bench never started its throughput grid"
    try:
        proc.wait(timeout=600)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    logs = sorted(glob.glob(os.path.join(ROOT, ".sim", "scenario-bench-lane.yml-*.log")), key=os.path.getmtime)
    log = open(logs[-1], encoding="utf-8").read()
    out = flat(log)
    assert proc.returncode != 0
    assert_no_traceback(log)
    assert f"The bench run of lane {LANE} is INVALID and is not a result" in out
    # A worker restarted alone may rejoin (restarted) or take the lane down with it when the head
    # loses it (stopped; a real engine's worker cannot rejoin its group): either way rank 3 is named.
    assert (f"Rank 3 ({victim['container_name']} on {victim['host']}) restarted during the run" in out
            or f"Rank 3 ({victim['container_name']} on {victim['host']}) stopped during the run" in out)
    run = sorted(set(runs()) - before)[-1]
    doc = json.load(open(os.path.join(run, "report.json"), encoding="utf-8"))
    assert doc["valid"] is False and any(f"Rank 3 ({victim['container_name']}" in p for p in doc["problems"])
    assert "INVALID, not a result" in open(os.path.join(run, "report.md"), encoding="utf-8").read()
