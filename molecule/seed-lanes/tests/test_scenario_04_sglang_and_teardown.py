"""The end of the scenario: the report's second lane (SGLang, with its baked barrier patch) is
deployed on the 8 nodes the vLLM lane left (its teardown is the secrets test's, in
test_scenario_09_secrets.py), reaches ready, re-runs quietly, and is torn down in the engine's
order. Each test sets up what it needs (conftest.py); in the full scenario it runs last, since it
replaces the lane the earlier files test.
"""
from __future__ import annotations

import json
import re

from simlib import (
    ANSI,
    SGLANG_LANE,
    api_status,
    assert_no_traceback,
    changed_hosts,
    cmdlines_holding,
    docker,
    flat,
    lane_containers,
    node_of,
    plan,
    run_playbook,
)

SGLANG_KEY = "sk-lksim-sglang-4d2a9e7c1b"


def test_sglang_lane_reaches_ready_with_the_patched_barrier_and_reruns_quietly(sglang_only, tmp_path):
    # With an API key: SGLang takes it only as --api-key, which lanekit hands over inside the
    # engine's process, so no process's command line (what `ps` shows) holds it.
    keyfile = tmp_path / "key.json"
    keyfile.write_text(json.dumps({"lanekit_api_key": SGLANG_KEY}))
    keyed = ["-e", f"@{keyfile}"]
    proc = run_playbook("deploy_lane.yml", lane=SGLANG_LANE, extra=keyed, timeout=1500)
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
    for rank in sglang_plan["ranks"]:
        held = cmdlines_holding(node_of(rank["host"]), rank["container_name"], SGLANG_KEY)
        assert held == [], f"the API key is on a command line in {rank['container_name']}: {held}"
    assert SGLANG_KEY not in proc.stdout + proc.stderr

    again = run_playbook("deploy_lane.yml", lane=SGLANG_LANE, extra=keyed)
    assert again.returncode == 0 and changed_hosts(again.stdout, ignore=()) == set()


def test_sglang_teardown_stops_rank_zero_first_and_removes_every_rank(sglang_serving):
    proc = run_playbook("teardown_lane.yml", lane=SGLANG_LANE, extra=["-e", "teardown_remove=true"])
    assert proc.returncode == 0
    # The task that stops first must have stopped rank 0 and only it; the others follow in the next task.
    text = ANSI.sub("", proc.stdout)
    start = text.index("Stop the ranks that stop first")
    first_task = text[start:text.index("TASK [", start)]
    stopped_first = set(re.findall(r"-(r\d+)\b", first_task))
    assert stopped_first == {"r0"}, f"SGLang must stop rank 0 first, stopped first: {stopped_first}"
    assert lane_containers(SGLANG_LANE) == {}
