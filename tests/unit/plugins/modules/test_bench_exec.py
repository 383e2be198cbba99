# Copyright: lanekit developers
# Apache-2.0
"""bench_exec on the bench host: prepare, start detached with exactly the given environment, poll the
appended bytes and the exit code, stop a run, collect raw/, clean up."""
from __future__ import annotations

import base64
import json
import sys
import time

from tests.unit.helpers.modules import assert_documentation_matches_argument_spec, run_module

# A stand-in tool: progress lines on stderr, a result file, its environment echoed, then an exit code.
TOOL = (
    "import json, os, sys, time\n"
    "for i in range(3):\n"
    "    print(json.dumps({'event': 'scenario_start', 'index': i, 'total': 3, 'scenario_id': f'TC-0{i+1}'}),"
    " file=sys.stderr, flush=True)\n"
    "    time.sleep(0.2)\n"
    "os.makedirs('../../raw/runs', exist_ok=True)\n"
    "json.dump(dict(os.environ), open('../../raw/runs/env.json', 'w'))\n"
    "print('done')\n"
    "sys.exit(int(sys.argv[1]))\n"
)


def test_documentation_matches_the_argument_spec():
    assert_documentation_matches_argument_spec("bench_exec")


def _wait_end(root, pid, tmp_path, offsets=None):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = run_module("bench_exec", {"mode": "poll", "root": root, "pid": pid, "offsets": offsets or {}}, tmp=tmp_path)
        if not r["running"]:
            return r
        time.sleep(0.3)
    raise AssertionError("the run did not end")


def test_a_run_starts_detached_reports_progress_and_its_exit_code(tmp_path):
    root = str(tmp_path / "runs" / "lane-1")
    r = run_module("bench_exec", {"mode": "prepare", "root": root}, tmp=tmp_path)
    assert r["changed"] and (tmp_path / "runs" / "lane-1" / "home" / ".cache" / "llama-benchy").is_dir()
    assert oct((tmp_path / "runs" / "lane-1").stat().st_mode & 0o777) == "0o700"
    env = {"PATH": "/usr/bin:/bin", "HOME": root + "/home", "HF_HUB_OFFLINE": "1"}
    r = run_module("bench_exec", {"mode": "start", "root": root, "argv": [sys.executable, "-c", TOOL, "3"], "env": env,
                                  "api_key": "sk-secret"}, tmp=tmp_path)
    # The pid comes back as a number (no environment value masks it), the key nowhere.
    assert r["changed"] and isinstance(r["pid"], int) and r["pid"] > 0
    assert "sk-secret" not in str(r)
    end = _wait_end(root, r["pid"], tmp_path, {"tool-eval-bench-events.jsonl": 0, "tool-eval-bench.log": 0})
    assert end["rc"] == 3
    events = base64.b64decode(end["chunks"]["tool-eval-bench-events.jsonl"]["data"]).decode()
    assert events.count("scenario_start") == 3 and "TC-03" in events
    assert base64.b64decode(end["chunks"]["tool-eval-bench.log"]["data"]) == b"done\n"
    # A later poll from an offset returns only what came after it.
    r = run_module("bench_exec", {"mode": "poll", "root": root, "pid": 1 << 22,
                                  "offsets": {"tool-eval-bench.log": 2}}, tmp=tmp_path)
    assert base64.b64decode(r["chunks"]["tool-eval-bench.log"]["data"]) == b"ne\n"
    got = run_module("bench_exec", {"mode": "collect", "root": root}, tmp=tmp_path)
    assert set(got["files"]) == {"tool-eval-bench.log", "tool-eval-bench-events.jsonl", "runs/env.json"}
    seen_env = json.loads(base64.b64decode(got["files"]["runs/env.json"]))
    # Exactly the given environment (Python may add LC_CTYPE coercion), nothing inherited.
    assert {k: v for k, v in seen_env.items() if k != "LC_CTYPE"} == dict(env, TOOL_EVAL_API_KEY="sk-secret")
    run_module("bench_exec", {"mode": "cleanup", "root": root}, tmp=tmp_path)
    assert not (tmp_path / "runs" / "lane-1").exists()


def test_stop_ends_a_run_that_hangs(tmp_path):
    root = str(tmp_path / "run")
    run_module("bench_exec", {"mode": "prepare", "root": root}, tmp=tmp_path)
    r = run_module("bench_exec", {"mode": "start", "root": root, "env": {"PATH": "/usr/bin:/bin"},
                                  "argv": [sys.executable, "-c", "import time; time.sleep(600)"]}, tmp=tmp_path)
    assert run_module("bench_exec", {"mode": "poll", "root": root, "pid": r["pid"]}, tmp=tmp_path)["running"]
    run_module("bench_exec", {"mode": "stop", "root": root, "pid": r["pid"]}, tmp=tmp_path)
    end = _wait_end(root, r["pid"], tmp_path)
    assert end["rc"] is None and not end["running"]
