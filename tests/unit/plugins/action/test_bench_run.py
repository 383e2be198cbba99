# Copyright: lanekit developers
# Apache-2.0
"""The bench_run and bench_report actions end to end against a stand-in API on 127.0.0.1, with the
real tools from the bench virtualenv: gate, offline run, progress, raw outputs, report, no key on disk."""
from __future__ import annotations

import json
import os
import stat
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


# -- issue 38 (item 11): the raw outputs are private and hold no key, from the controller and from a bench_host --
FAKE_TOOL = r'''#!{python}
import json, os, sys
argv = sys.argv
def arg(flag):
    return argv[argv.index(flag) + 1]
key = os.environ.get("TOOL_EVAL_API_KEY", "")
# What a careless tool does: echo its config (the key included) into its outputs and its log.
print("config: api_key=" + key, flush=True)
print(json.dumps({{"event": "start", "api_key": key}}), file=sys.stderr, flush=True)
os.makedirs(os.path.join(arg("--output-dir"), "run-1"), exist_ok=True)
with open(os.path.join(arg("--output-dir"), "run-1", "request.json"), "w") as fh:
    json.dump({{"headers": {{"Authorization": "Bearer " + key}}}}, fh)
with open(arg("--json-file"), "w") as fh:
    json.dump({{"config": {{"api_key": key}}, "results": []}}, fh)
'''


def _key_tool_venv(tmp_path) -> str:
    venv = _tools_venv(tmp_path)
    tool = os.path.join(venv, "bin", "tool-eval-bench")
    with open(tool, "w", encoding="utf-8") as handle:
        handle.write(FAKE_TOOL.format(python=sys.executable))
    os.chmod(tool, 0o755)
    return venv


def _private_and_keyless(run_dir) -> None:
    assert stat.S_IMODE(os.stat(run_dir).st_mode) == 0o700
    seen = 0
    for root, dirs, files in os.walk(run_dir):
        for name in dirs:
            assert stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode) == 0o700, os.path.join(root, name)
        for name in files:
            path = os.path.join(root, name)
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
            assert KEY.encode() not in open(path, "rb").read(), path
            seen += 1
    assert seen >= 4


def test_raw_outputs_of_a_tool_that_echoes_the_key_are_private_and_redacted(tmp_path, api):
    old = os.umask(0o022)  # the controller's usual umask
    try:
        tokenizer = tmp_path / "tokenizer.json"
        tokenizer.write_text("{}")
        run_dir = tmp_path / "reports" / "L" / "bench" / "20260101T000000Z"
        args = {"plan": _plan(api), "cli_settings": {"depths": [0], "concurrency": [1], "runs": 1,
                                                     "scenarios": ["TC-01"]},
                "run_dir": str(run_dir), "venv": _key_tool_venv(tmp_path), "tokenizer": str(tokenizer),
                "containers": _containers(), "api_key": KEY, "poll_s": 0.05}
        ran = action_module(brun.ActionModule, args).run(task_vars={})
        assert not ran.get("failed"), ran.get("msg")
        assert (run_dir / "raw" / "tool-eval-bench-runs" / "run-1" / "request.json").exists()
        _private_and_keyless(run_dir)
        # The report beside them is as private (its verdict does not matter here).
        action_module(br.ActionModule, {"plan": _plan(api), "run_dir": str(run_dir), "venv": args["venv"],
                                        "containers": _containers(), "api_key": KEY,
                                        "manifest": str(tmp_path / "missing.json")}).run(task_vars={})
    finally:
        os.umask(old)
    assert (run_dir / "report.json").exists() and (run_dir / "report.md").exists()
    _private_and_keyless(run_dir)


def test_raw_outputs_fetched_from_a_bench_host_are_private_and_redacted(tmp_path, monkeypatch):
    import base64
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{}")
    run_dir = tmp_path / "reports" / "L" / "bench" / "20260101T000000Z"
    leaked = {"tool-eval-bench.json": json.dumps({"config": {"api_key": KEY}}),
              "tool-eval-bench.log": f"config: api_key={KEY}\n",
              "tool-eval-bench-runs/run-1/request.json": json.dumps({"Authorization": f"Bearer {KEY}"})}

    def remote(mode, module_args, bench_host):
        return {"api": {"check": {"ok": True, "models": ["m"], "problems": []}},
                "start": {"pid": 4242},
                "poll": {"running": False, "rc": 0, "chunks": {}},
                "collect": {"files": {rel: base64.b64encode(text.encode()).decode() for rel, text in leaked.items()},
                            "tools": {}}}.get(mode, {})

    action = action_module(brun.ActionModule, {
        "plan": _plan(9), "cli_settings": {"depths": [0], "concurrency": [1], "runs": 1, "scenarios": ["TC-01"]},
        "run_dir": str(run_dir), "venv": str(tmp_path / "no-venv"), "tokenizer": str(tokenizer),
        "containers": _containers(), "api_key": KEY, "poll_s": 0.01, "bench_host": "bench-01",
        "host_venv": "/opt/lanekit/bench-venv", "host_root": "/var/tmp/lanekit/bench"})
    monkeypatch.setattr(action, "_remote", remote)
    monkeypatch.setattr(action, "_execute_module", lambda **kwargs: {})
    monkeypatch.setattr(brun.becomefiles, "put", lambda *a, **k: None)
    monkeypatch.setattr(brun.gate, "check_before", lambda *a, **k: [])
    old = os.umask(0o022)
    try:
        ran = action.run(task_vars={})
    finally:
        os.umask(old)
    assert not ran.get("failed"), ran.get("msg")
    assert "********" in (run_dir / "raw" / "tool-eval-bench-runs" / "run-1" / "request.json").read_text()
    _private_and_keyless(run_dir)
