# Copyright: lanekit developers
# Apache-2.0
"""The bench_run and bench_report actions end to end against a stand-in API on 127.0.0.1, with the
real tools from the bench virtualenv: gate, offline run, progress, raw outputs, report, no key on disk."""
from __future__ import annotations

import json
import os
import sys

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.action import bench_compare as bc
from ansible_collections.lanekit.serving.plugins.action import bench_report as br
from ansible_collections.lanekit.serving.plugins.action import bench_run as brun
from ansible_collections.lanekit.serving.plugins.module_utils._bench import _api as brun_api
from ansible_collections.lanekit.serving.plugins.modules import bench_compare as bc_doc
from ansible_collections.lanekit.serving.plugins.modules import bench_report as br_doc
from ansible_collections.lanekit.serving.plugins.modules import bench_run as brun_doc
from tests.unit.helpers.lane_fakes import action_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
VENV = os.path.join(REPO, ".venv-bench")
sys.path.insert(0, os.path.join(REPO, "tests", "sim", "standin"))
sys.path.insert(0, os.path.join(REPO, "tests", "sim"))
import make_checkpoint  # noqa: E402
from lanekit_standin import http_api  # noqa: E402

KEY = "sekrit-bench-key-123"


@pytest.mark.parametrize("action, doc", [(brun, brun_doc), (br, br_doc), (bc, bc_doc)])
def test_argument_spec_matches_the_documentation(action, doc):
    documented = yaml.safe_load(doc.DOCUMENTATION)["options"]
    assert set(documented) == set(action.ARGUMENT_SPEC)
    for name, spec in action.ARGUMENT_SPEC.items():
        assert documented[name].get("type") == spec["type"], name
        assert documented[name].get("default") == spec.get("default"), name


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setenv("STANDIN_DECODE_MS_PER_TOKEN", "1")
    state = http_api.ApiState(engine="vllm", version="0.0-test", served_names=["m"], model_path="/models/m",
                              max_model_len=32768, tool_call_parser="mistral", auto_tool_choice=True)
    srv = http_api.make_server("127.0.0.1", 0, http_api.handler_for(state))
    http_api.bind(srv)
    http_api.start(srv)
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def _plan(port: int) -> dict:
    return {"lane": "L", "engine": "vllm", "plan_hash": "abc", "reports_dir": "/unused",
            "api": {"host": "n1", "address": "127.0.0.1", "port": port, "served_model_name": "m"},
            "image": {"ref": "img:1"}, "weights": {"model_id": "org/m", "path": "/models/m"},
            "ranks": [{"node_rank": 0, "host": "n1", "container_name": "c0"}], "hosts": {"n1": [0]}}


def _containers(started="2026-11-30T10:00:00Z"):
    return [{"name": "c0", "exists": True, "inspect": {"State": {"Running": True, "StartedAt": started},
                                                       "RestartCount": 0,
                                                       "Config": {"Labels": {"io.lanekit.plan-hash": "abc"}}}}]


def _tools_venv(tmp_path) -> str:
    """A virtualenv the tools check accepts (executables that are never run): the gate is checked
    before any tool runs, so this test needs no .venv-bench (make check does not build one)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for tool in (*brun_api.TOOLS, "python"):
        (venv / "bin" / tool).write_text("#!/bin/sh\nexit 1\n")
        (venv / "bin" / tool).chmod(0o755)
    return str(venv)


def test_gate_refuses_a_dead_api_before_running_anything(tmp_path):
    args = {"plan": _plan(9), "run_dir": str(tmp_path / "run"), "venv": _tools_venv(tmp_path),
            "tokenizer": str(tmp_path / "t.json"), "containers": _containers()}
    result = action_module(brun.ActionModule, args).run(task_vars={})
    assert result["failed"] and result["msg"].startswith("Lane L cannot be benchmarked now: The API of lane L at "
                                                         "http://127.0.0.1:9/v1 did not answer")
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(not os.path.exists(os.path.join(VENV, "bin", "tool-eval-bench")),
                    reason="needs the bench virtualenv (make venv-bench)")
def test_offline_run_and_report_keep_the_key_off_disk(tmp_path, api, capsys, monkeypatch):
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")  # a leaked proxy variable must not matter
    make_checkpoint.build(str(tmp_path / "ckpt"), 0.1, 1)
    run_dir = tmp_path / "run"
    settings = {"depths": [0, 512], "concurrency": [1], "pp": 128, "tg": 8, "runs": 1, "scenarios": ["TC-01"]}
    args = {"plan": _plan(api), "cli_settings": settings, "run_dir": str(run_dir), "venv": VENV,
            "tokenizer": str(tmp_path / "ckpt" / "tokenizer.json"), "containers": _containers(), "api_key": KEY,
            "poll_s": 0.5}
    ran = action_module(brun.ActionModule, args).run(task_vars={})
    assert not ran.get("failed"), ran.get("msg")
    assert ran["tool"]["status"] == "completed" and ran["tool"]["samples"] == 2 and ran["tool"]["failed"] == 0
    out = capsys.readouterr().out.splitlines()
    # polled every 0.5 s, so a quick step may pass unseen; where the run ended is always shown
    assert all(line.startswith("bench L: ") for line in out) and len(out) >= 2
    assert out[-1] == "bench L: quality scenario 1 of 1 (TC-01); throughput grid done"
    report_args = {"plan": _plan(api), "run_dir": str(run_dir), "venv": VENV, "containers": _containers(),
                   "api_key": KEY, "manifest": str(tmp_path / "missing.json")}
    done = action_module(br.ActionModule, report_args).run(task_vars={})
    assert not done.get("failed"), done.get("msg")
    doc = json.loads((run_dir / "report.json").read_text())
    assert doc["valid"] and [r["depth"] for r in doc["throughput"]] == [0, 512]
    assert doc["provenance"]["tools"]["tool-eval-bench"] == "3.0.0" and doc["provenance"]["plan_hash"] == "abc"
    assert done["series"] == ["L [0] pp c1", "L [0] tg c1"]
    for root, _dirs, files in os.walk(run_dir):
        for name in files:
            assert KEY.encode() not in open(os.path.join(root, name), "rb").read(), name
    # the same run judged with a rank that restarted meanwhile is kept but invalid
    restarted = action_module(br.ActionModule, dict(report_args, containers=_containers("2026-11-30T11:00:00Z")))
    again = restarted.run(task_vars={})
    assert again["failed"] and "Rank 0 (c0 on n1) restarted during the run" in again["msg"]
    assert json.loads((run_dir / "report.json").read_text())["valid"] is False
