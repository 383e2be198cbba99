"""Bench from a bench_host on the simulated cluster: playbooks/bench-lane.yml with -e bench_host=spark-02
against the serving vLLM seed lane. The bench venv is built on spark-02 from wheels the controller
downloaded once (installed there with --no-index), the run executes there, and the report is written
on the controller as always. A second run installs nothing. Structure only (the stand-in's scores mean
nothing). Test code only (not part of the collection).
"""
from __future__ import annotations

import json
import os
import subprocess

from simlib import LANE, assert_no_traceback, flat, node_of, record_timing, run_playbook
from test_scenario_07_bench import SMALL, bench_args, run_bench, runs

BENCH_HOST = "spark-02"
VENV = "/root/.cache/lanekit/bench-venv"


def _on_node(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "exec", node_of(BENCH_HOST), *argv], capture_output=True, text=True, check=False)


def _bench_from_host(offline: bool):
    """One bench from the bench host. The first may download the pinned wheels (the controller's one
    use of its package index); with ``offline`` every proxy and hub variable points nowhere."""
    before = set(runs())
    args = bench_args(SMALL, "-e", f"bench_host={BENCH_HOST}", "-e", '{"bench_compare_with": []}')
    proc = run_bench(args) if offline else run_playbook("bench-lane.yml", extra=args, timeout=900)
    new = sorted(set(runs()) - before)
    return proc, new


def test_bench_runs_on_the_bench_host_and_reports_on_the_controller(vllm_serving):
    proc, new = _bench_from_host(offline=False)
    record_timing("bench-lane from a bench_host (first: venv built)", proc.seconds)
    out = flat(proc.stdout)
    assert proc.returncode == 0, out[-3000:]
    assert_no_traceback(proc.stdout)
    assert f"bench {LANE}: quality scenario 3 of 3 (TC-03)" in out
    assert len(new) == 1
    run = new[0]
    for name in ("raw/tool-eval-bench.json", "raw/tool-eval-bench.log", "raw/llama-benchy-progress.jsonl",
                 "raw/tool-eval-bench-events.jsonl", "run.json", "report.json", "report.md", "report.png"):
        assert os.path.isfile(os.path.join(run, name)), name
    doc = json.load(open(os.path.join(run, "report.json"), encoding="utf-8"))
    assert doc["valid"] is True and doc["problems"] == [] and doc["samples"] == 4
    assert doc["provenance"]["tools"]["tool-eval-bench"] == "3.0.0"
    record = json.load(open(os.path.join(run, "run.json"), encoding="utf-8"))
    assert record["bench_host"] == BENCH_HOST
    assert "/.cache/lanekit/bench-runs/" in " ".join(record["argv"])  # the tool read its inputs there
    # The venv is there with the pinned tools and its marker; the run's private directory is gone.
    assert _on_node(f"{VENV}/bin/tool-eval-bench", "--help").returncode == 0
    marker = _on_node("stat", "-c", "%Y", f"{VENV}/.lanekit-bench-installed")
    assert marker.returncode == 0, marker.stderr
    assert _on_node("ls", "-A", "/root/.cache/lanekit/bench-runs").stdout.strip() == ""

    # A second run installs nothing and needs nothing from outside the machine.
    proc, new = _bench_from_host(offline=True)
    record_timing("bench-lane from a bench_host (second: venv current)", proc.seconds)
    out = flat(proc.stdout)
    assert proc.returncode == 0, out[-3000:]
    assert len(new) == 1
    assert _on_node("stat", "-c", "%Y", f"{VENV}/.lanekit-bench-installed").stdout == marker.stdout
