"""Secrets on the simulated cluster: the vLLM seed lane deployed with lanekit_api_key and a
lanekit_secret_env value reaches ready, answers an authenticated request and refuses an
unauthenticated one, and neither secret appears in the playbook output (a check-mode diff
included), in the plan, in any file under reports/ or in the containers' argv. The lane is then
torn down: no rank container is left, their logs are archived first, and the secrets file leaves
every node with the lane. make test-extended runs it (lanefixtures.EXTENDED_ONLY); make test proves
the same on the keyed SGLang lane (test_scenario_04_sglang_and_teardown.py) and vLLM's key guard on the
real engine (real-vllm's scenario 13).
"""
from __future__ import annotations

import glob
import json
import os
import subprocess

from simlib import LANE, NODES, ROOT, api_status, docker, files_holding, node_of, plan, rank_containers, run_playbook

KEY = "sk-lksim-8f3e1a9c5d7b2e60"
SECRET = "lksim-secret-9b2c7e4a1f6d"
CHANGED = "lksim-secret-changed-5e8a0c3b"


def _vars_file(tmp_path, secret: str) -> str:
    path = tmp_path / "secrets.json"
    path.write_text(json.dumps({"lanekit_api_key": KEY, "lanekit_secret_env": {"LKSIM_SECRET": secret}}))
    return f"@{path}"


def _on_node(node: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "exec", node, *argv], capture_output=True, text=True, check=False)


def test_a_lane_with_a_key_and_a_secret_env_keeps_them_secret(vllm_only, tmp_path):
    secrets = _vars_file(tmp_path, SECRET)
    proc = run_playbook("deploy_lane.yml", extra=["-e", secrets], timeout=1500)
    output = proc.stdout + proc.stderr
    try:
        assert proc.returncode == 0, "the lane with a key did not reach ready"
        lane_plan = plan()
        assert lane_plan["api"]["key_required"] and lane_plan["secrets"]["env_names"] == ["LKSIM_SECRET"]
        head = lane_plan["ranks"][0]
        node = node_of(head["host"])
        assert api_status(node, lane_plan["api"]["port"], KEY) == 200
        assert api_status(node, lane_plan["api"]["port"], None) == 401
        assert api_status(node, lane_plan["api"]["port"], "sk-wrong") == 401
        # vLLM's own check stops at /v1; lanekit's KeyGuard (--middleware) covers the rest.
        for path in ("/tokenize", "/pooling", "/score", "/rerank", "/invocations"):
            assert api_status(node, lane_plan["api"]["port"], None, path) == 401, f"{path} answered without the key"
        assert api_status(node, lane_plan["api"]["port"], None, "/health") == 200
        for rank in lane_plan["ranks"]:
            info = json.loads(docker(node_of(rank["host"]), "inspect", rank["container_name"]).stdout)[0]
            argv = json.dumps([info["Args"], info["Config"]["Cmd"], info["Config"]["Entrypoint"], info["Path"]])
            assert KEY not in argv and SECRET not in argv
            assert f"LKSIM_SECRET={SECRET}" in info["Config"]["Env"]  # delivered through the env file
        assert lane_plan["secrets"]["env_file"] == f"/etc/lanekit/secrets/{LANE}.env"
        mode = _on_node(node, "stat", "-c", "%a %U", lane_plan["secrets"]["env_file"])
        assert mode.stdout.split() == ["600", "root"], mode.stdout + mode.stderr
        # A changed secret shows as a change in check mode, without its value in the diff.
        check = run_playbook("deploy_lane.yml", extra=["-e", _vars_file(tmp_path, CHANGED), "--check", "--diff"])
        assert check.returncode == 0
        output += check.stdout + check.stderr
    finally:
        # Removing the lane takes its secrets file off every node (looked at before any later deploy,
        # which would remove it too).
        removed = run_playbook("teardown_lane.yml", extra=["-e", "teardown_remove=true"])
        env_file = f"/etc/lanekit/secrets/{LANE}.env"
        left = [name for name in sorted({node_of(r["host"]) for r in plan(LANE)["ranks"]})
                if _on_node(name, "test", "-e", env_file).returncode == 0]
    assert removed.returncode == 0, "the keyed lane did not tear down"
    output += removed.stdout + removed.stderr
    assert not left, f"the secrets file stayed on {left} after the lane was removed"
    for node in NODES:
        assert rank_containers(node) == [], f"{node} still has rank containers"
    archives = [d for d in glob.glob(os.path.join(ROOT, "reports", LANE, "*teardown*")) if os.path.isdir(d)]
    assert archives, "teardown removed the containers without archiving their logs"
    newest = max(archives, key=os.path.getmtime)
    assert glob.glob(os.path.join(newest, "**", "*.log"), recursive=True), f"no rank log in {newest}"
    words = (KEY, SECRET, CHANGED)
    assert not [w for w in words if w in output], "a secret reached the playbook output"
    assert not files_holding(os.path.join(ROOT, "reports"), words)  # the teardown archive included
