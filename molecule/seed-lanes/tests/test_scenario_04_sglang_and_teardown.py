"""The end of the scenario: the report's second lane (SGLang, with its baked barrier patch) is
deployed on the 8 nodes the vLLM lane left (torn down by test_scenario_05_day2.py's torn-down test),
with an API key and a secret environment value, reaches ready, keeps both secret, re-runs quietly, and
is torn down in the engine's order, its secrets file leaving every node with it. Each test sets up
what it needs (conftest.py); in the full scenario it runs last, since it replaces the lane the
earlier files test.

This lane's deploy is also the scenario's secrets check (the vLLM lane's own keyed deploy,
test_scenario_09_secrets.py, is left to make test-extended): the key and the secret go through the
same plan, env file and teardown whatever the engine, and the key guard vLLM needs on its other
paths is proven on the real engine (real-vllm, scenario 13) and by the unit tests of the guard.
"""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess

import pytest
from simlib import (
    ANSI,
    NODES,
    ROOT,
    SGLANG_LANE,
    api_status,
    assert_no_traceback,
    changed_hosts,
    cmdlines_holding,
    docker,
    files_holding,
    flat,
    lane_containers,
    node_of,
    plan,
    run_playbook,
)

SGLANG_KEY = "sk-lksim-sglang-4d2a9e7c1b"
SECRET = "lksim-secret-9b2c7e4a1f6d"
CHANGED = "lksim-secret-changed-5e8a0c3b"
ENV_FILE = f"/etc/lanekit/secrets/{SGLANG_LANE}.env"
WORDS = (SGLANG_KEY, SECRET, CHANGED)


def _vars_file(directory, secret: str) -> list[str]:
    path = directory / f"secrets-{secret[-6:]}.json"
    path.write_text(json.dumps({"lanekit_api_key": SGLANG_KEY, "lanekit_secret_env": {"LKSIM_SECRET": secret}}))
    return ["-e", f"@{path}"]


def _nodes_holding_env_file() -> list[str]:
    return [node for node in NODES
            if subprocess.run(["docker", "exec", node, "test", "-e", ENV_FILE], check=False).returncode == 0]


@pytest.fixture()
def sglang_keyed(sglang_only, tmp_path):
    """The SGLang lane serving with its key and secret env file (deployed here when it is not)."""
    ranks = lane_containers(SGLANG_LANE)
    serving = len(ranks) == 8 and all(state == "running" for _node, state in ranks.values())
    if not (serving and len(_nodes_holding_env_file()) == 8):
        proc = run_playbook("deploy_lane.yml", lane=SGLANG_LANE, extra=_vars_file(tmp_path, SECRET), timeout=1500)
        assert proc.returncode == 0, "setting up: the keyed SGLang lane did not deploy"


def test_sglang_lane_reaches_ready_with_the_patched_barrier_and_keeps_its_secrets(sglang_only, tmp_path):
    # With an API key: SGLang takes it only as --api-key, which lanekit hands over inside the
    # engine's process, so no process's command line (what `ps` shows) holds it. The secret env value
    # goes through a root-only env file on each node.
    keyed = _vars_file(tmp_path, SECRET)
    proc = run_playbook("deploy_lane.yml", lane=SGLANG_LANE, extra=keyed, timeout=1500)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0
    assert_no_traceback(proc.stdout)
    assert "is ready" in flat(proc.stdout)
    ranks = lane_containers(SGLANG_LANE)
    assert len(ranks) == 8 and all(state == "running" for _node, state in ranks.values()), ranks

    sglang_plan = plan(SGLANG_LANE)
    assert [p["file"] for p in sglang_plan["image"]["patches"]] == ["patches/patch_barrier_timeout.py"]
    wanted = sglang_plan["ranks"][0]["env"]["SGLANG_UNBALANCED_LOAD_TIMEOUT_S"]
    assert str(wanted) != "480", "the lane must raise the barrier timeout, or this test proves nothing"
    # The stand-in's post-load barrier reads the module constant the patch rewrote: unpatched it
    # would log 480 s whatever the environment says.
    head = next(r for r in sglang_plan["ranks"] if r["node_rank"] == 0)
    logs = docker(f"lksim-{head['host']}", "logs", head["container_name"])
    text = logs.stdout + logs.stderr
    assert f"monitored_barrier timeout in effect: {wanted} s" in text, text[-3000:]

    node, port = node_of(head["host"]), sglang_plan["api"]["port"]
    assert api_status(node, port, SGLANG_KEY) == 200
    assert api_status(node, port, None) == 401, "SGLang answered without the key"
    assert api_status(node, port, "sk-wrong") == 401, "SGLang answered a wrong key"
    assert api_status(node, port, None, "/health") == 200
    assert sglang_plan["api"]["key_required"] and sglang_plan["secrets"]["env_names"] == ["LKSIM_SECRET"]
    assert sglang_plan["secrets"]["env_file"] == ENV_FILE
    for rank in sglang_plan["ranks"]:
        held = cmdlines_holding(node_of(rank["host"]), rank["container_name"], SGLANG_KEY)
        assert held == [], f"the API key is on a command line in {rank['container_name']}: {held}"
        info = json.loads(docker(node_of(rank["host"]), "inspect", rank["container_name"]).stdout)[0]
        argv = json.dumps([info["Args"], info["Config"]["Cmd"], info["Config"]["Entrypoint"], info["Path"]])
        assert SGLANG_KEY not in argv and SECRET not in argv, rank["container_name"]
        assert f"LKSIM_SECRET={SECRET}" in info["Config"]["Env"]  # delivered through the env file
        mode = subprocess.run(["docker", "exec", node_of(rank["host"]), "stat", "-c", "%a %U", ENV_FILE],
                              capture_output=True, text=True, check=False)
        assert mode.stdout.split() == ["600", "root"], mode.stdout + mode.stderr

    again = run_playbook("deploy_lane.yml", lane=SGLANG_LANE, extra=keyed)
    assert again.returncode == 0 and changed_hosts(again.stdout, ignore=()) == set()
    output += again.stdout + again.stderr
    # A changed secret shows as a change in check mode, without its value in the diff.
    check = run_playbook("deploy_lane.yml", lane=SGLANG_LANE, extra=_vars_file(tmp_path, CHANGED) + ["--check", "--diff"])
    assert check.returncode == 0
    output += check.stdout + check.stderr
    assert changed_hosts(check.stdout, ignore=()), "a changed secret did not show as a change in check mode"
    assert not [w for w in WORDS if w in output], "a secret reached the playbook output"
    assert not files_holding(os.path.join(ROOT, "reports"), WORDS), "a secret reached a file under reports/"


def test_sglang_teardown_stops_rank_zero_first_and_takes_the_secrets_file_with_it(sglang_keyed):
    assert len(_nodes_holding_env_file()) == 8, "the keyed lane's secrets file is not on every node"
    proc = run_playbook("teardown_lane.yml", lane=SGLANG_LANE, extra=["-e", "teardown_remove=true"])
    assert proc.returncode == 0
    # The task that stops first must have stopped rank 0 and only it; the others follow in the next task.
    text = ANSI.sub("", proc.stdout)
    start = text.index("Stop the ranks that stop first")
    first_task = text[start:text.index("TASK [", start)]
    stopped_first = set(re.findall(r"-(r\d+)\b", first_task))
    assert stopped_first == {"r0"}, f"SGLang must stop rank 0 first, stopped first: {stopped_first}"
    assert lane_containers(SGLANG_LANE) == {}
    assert _nodes_holding_env_file() == [], "the secrets file stayed on a node after the lane was removed"
    # Removed, not lost: every rank's log is archived first, and no secret is in the archive.
    archives = [d for d in glob.glob(os.path.join(ROOT, "reports", SGLANG_LANE, "*teardown*")) if os.path.isdir(d)]
    assert archives, "teardown removed the containers without archiving their logs"
    newest = max(archives, key=os.path.getmtime)
    logged = {os.path.basename(os.path.dirname(log)).split("-", 1)[0]
              for log in glob.glob(os.path.join(newest, "ranks", "r*", "*.log"))}
    assert logged == {f"r{rank}" for rank in range(8)}, f"not every rank's log is in {newest}: {sorted(logged)}"
    assert not [w for w in WORDS if w in proc.stdout + proc.stderr], "a secret reached the teardown's output"
    assert not files_holding(os.path.join(ROOT, "reports"), WORDS), "a secret reached a file under reports/"
