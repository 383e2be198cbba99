"""Day-2 operations on the simulated cluster: a status that answers "is it serving?" with a
verdict and an exit code (serving, one rank killed, one node stopped, torn down), its JSON, the
logs of every rank merged in time order (live and from the teardown archive), and what runs
where with a second lane's container present. Each test sets up what it needs (conftest.py);
the tests that break the lane run last, so the lane is deployed at most once.
"""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import time

import pytest
from simlib import (
    ANSI,
    LANE,
    NODES,
    ROOT,
    api_status,
    assert_no_traceback,
    changed_hosts,
    docker,
    flat,
    lane_containers,
    plan,
    rank_containers,
    record_timing,
    run_playbook,
)

LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) r(\d+) (spark-\d\d) \| (.*)$")
OTHER_LANE = "day2-other-lane"


def verdict_line(output: str) -> str:
    """The status's first printed line ('lane L: <verdict> | ...')."""
    text = ANSI.sub("", output)
    found = re.search(rf"^lane {re.escape(LANE)}: .*$", text, re.MULTILINE)
    assert found, f"no verdict line in:\n{text[-3000:]}"
    print("VERDICT:", found.group(0))
    return found.group(0)


def _serving_its_plan() -> bool:
    """What the status calls serving, read without a playbook (one costs about 9 s of a loaded 2-core
    machine, and every test here asks): every rank on the plan's hash, and the head listing the model."""
    lane_plan = plan()
    label = f"io.lanekit.plan-hash={lane_plan['plan_hash']}"
    on_plan = all(label in found["Labels"].split(",") for node in NODES for found in rank_containers(node))
    head = lane_plan["ranks"][0]
    return on_plan and api_status(f"lksim-{head['host']}", lane_plan["api"]["port"], None) == 200


@pytest.fixture()
def lane_serving(vllm_serving):
    """The lane answers as serving: eight running containers are not enough when an earlier
    scenario left them hung or on another plan, so redeploy then."""
    if not _serving_its_plan():
        proc = run_playbook("deploy_lane.yml", timeout=1500)
        assert proc.returncode == 0, "setting up: the vLLM lane did not deploy"


def status(extra: list[str] | None = None):
    proc = run_playbook("status_lane.yml", extra=extra)
    assert_no_traceback(proc.stdout)
    record_timing("status_lane", proc.seconds, f"rc {proc.returncode}")
    return proc


def status_json(tmp_path, name: str) -> dict:
    path = tmp_path / f"{name}.json"
    status(["-e", "status_format=json", "-e", f"status_file={path}"])
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def log_lines(output: str) -> list[tuple[str, int, str, str]]:
    return [m.groups() for m in (LOG_LINE.match(line) for line in ANSI.sub("", output).splitlines()) if m]


def rank_of(rank: int) -> dict:
    return next(r for r in plan()["ranks"] if r["node_rank"] == rank)


def test_status_of_a_serving_lane_says_serving_and_exits_0_in_seconds(lane_serving, tmp_path):
    proc = status()
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert verdict_line(proc.stdout) == f"lane {LANE}: serving | API /health 200, model listed"
    assert proc.seconds < 30, f"a status took {proc.seconds:.0f} s"
    doc = status_json(tmp_path, "serving")
    assert doc["verdict"] == "serving" and doc["serving"] is True and doc["version"] == 1
    assert [r["rank"] for r in doc["ranks"]] == list(range(8))
    assert all(r["state"] == "running" and r["exit_code"] is None for r in doc["ranks"])
    assert doc["table"][0] == f"lane {LANE}"


def started_at(lane: str = LANE) -> dict[str, str]:
    """Each rank container's start time (a restart or a re-create changes it)."""
    out = {}
    for node in NODES:
        for found in rank_containers(node, lane):
            out[found["Names"]] = docker(node, "inspect", "-f", "{{.State.StartedAt}}", found["Names"]).stdout.strip()
    return out


def test_a_rerun_of_the_serving_lane_is_one_probe_per_node_and_a_stopped_rank_skips_image_and_weights(lane_serving):
    stability_s = plan()["boot"]["stability_s"]
    time.sleep(stability_s + 1)  # a rank younger than the stability window is not settled yet
    before = started_at()
    proc = run_playbook("deploy_lane.yml")
    record_timing("deploy_lane re-run of a serving lane", proc.seconds)
    assert proc.returncode == 0 and changed_hosts(proc.stdout) == set()
    assert_no_traceback(proc.stdout)
    assert f"Lane {LANE} is ready: it already serves plan {plan()['plan_hash'][:12]} on 8 nodes" in flat(proc.stdout)
    # Every phase was skipped: no task of the image, weights, cache, ranks or ready roles ran.
    for role in ("image", "weights", "cache", "ranks", "ready"):
        assert f"TASK [lanekit.serving.{role} :" not in proc.stdout, role
    assert started_at() == before

    # A bad setting for a skipped phase is refused all the same, and the serving lane is left alone
    # (the next deploy below takes the lock again: the refusal released it).
    refused = run_playbook("deploy_lane.yml", extra=["-e", "weights_verify=bogus"])
    assert refused.returncode != 0
    assert_no_traceback(refused.stdout)
    assert "value of weights_verify must be one of: quick, full, got: bogus" in flat(refused.stdout)
    assert started_at() == before

    # One rank stopped: the probe names it and the ranks and ready phases bring the lane back; the image
    # and weights phases, which the probe proved settled on every node, are skipped (issue 28).
    victim = rank_of(3)
    docker(f"lksim-{victim['host']}", "stop", "-t", "1", victim["container_name"])
    proc = run_playbook("deploy_lane.yml", timeout=1500)
    assert_no_traceback(proc.stdout)
    text = flat(proc.stdout)
    assert proc.returncode == 0, text[-3000:]
    assert f"Lane {LANE}: the phases run, because" in text
    assert f"rank 3 ({victim['container_name']}) is exited" in text
    assert "Settled on every node (the image and weights phases among them are skipped): image, weights" in text
    assert "Skip the image phase: every node holds the pinned image (the preflight probe proved it)." in text
    assert "Skip the weights phase: every node sees the weights whole" in text
    for role in ("image", "weights"):
        assert f"TASK [lanekit.serving.{role} :" not in proc.stdout, role
    assert "is ready" in text and "TASK [lanekit.serving.ranks :" in proc.stdout
    assert "TASK [lanekit.serving.ready :" in proc.stdout
    assert lane_containers()[victim["container_name"]][1] == "running"


def test_logs_of_every_rank_are_merged_in_time_order_and_filtered(lane_serving):
    proc = run_playbook("logs_lane.yml", extra=["-e", "logs_lines=20"])
    assert proc.returncode == 0
    record_timing("logs_lane", proc.seconds)
    lines = log_lines(proc.stdout)
    assert {rank for _t, rank, _h, _x in lines} == {str(r) for r in range(8)}
    stamps = [t for t, _r, _h, _x in lines]
    assert stamps == sorted(stamps), "the ranks' lines are not merged in time order"
    assert all(host == rank_of(int(rank))["host"] for _t, rank, host, _x in lines)

    picked = run_playbook("logs_lane.yml", extra=["-e", "logs_ranks=0,3", "-e", "logs_grep=INFO", "-e", "logs_lines=5"])
    assert picked.returncode == 0
    lines = log_lines(picked.stdout)
    assert lines and {rank for _t, rank, _h, _x in lines} == {"0", "3"}
    assert all("INFO" in text for _t, _r, _h, text in lines)
    assert sum(1 for _t, rank, _h, _x in lines if rank == "0") <= 5


def test_cluster_status_shows_both_lanes_and_a_busy_node_is_refused_unless_replaced(lane_serving):
    image = rank_of(1)["image"]
    node = "lksim-spark-02"
    docker(node, "rm", "-f", f"{OTHER_LANE}-r0", "gpu-hog", check=False)
    try:
        # --init: a bare `sleep` as PID 1 ignores SIGTERM, and the replacing deploy's stop would wait out
        # the whole grace it gives an engine it does not know (two minutes) before killing it.
        docker(node, "run", "-d", "--init", "--name", f"{OTHER_LANE}-r0", "--label", f"io.lanekit.lane={OTHER_LANE}",
               "--label", "io.lanekit.rank=0", "--label", "io.lanekit.plan-hash=0123456789abcdef",
               "--entrypoint", "sleep", image, "600")
        docker(node, "run", "-d", "--name", "gpu-hog", "-e", "NVIDIA_VISIBLE_DEVICES=all", "--entrypoint", "sleep",
               image, "600")
        proc = run_playbook("cluster_status.yml")
        record_timing("cluster_status", proc.seconds)
        assert proc.returncode == 0
        text = flat(proc.stdout)
        assert f"lane {LANE}: running, 8/8 ranks running on spark-01, spark-02" in text
        assert f"lane {OTHER_LANE}: running, 1/1 ranks running on spark-02 (plan 0123456789ab)" in text
        assert re.search(r"spark-02 gpu-hog container running NVIDIA_VISIBLE_DEVICES=all", text), text[-3000:]
        # The same discovery keeps a second lane off a node that runs one (one lane per GPU).
        refused = run_playbook("deploy_lane.yml")
        assert refused.returncode != 0
        assert f"spark-02 already runs lane {OTHER_LANE} (r0 running): one lane per GPU" in flat(refused.stdout)
        assert all(state == "running" for _id, state in lane_containers().values())
        # Replacing on purpose: the other lane goes (its log archived first), this one stays as it was.
        replaced = run_playbook("deploy_lane.yml", extra=["-e", "lanekit_replace=true"])
        assert_no_traceback(replaced.stdout)
        assert replaced.returncode == 0, replaced.stdout[-3000:]
        assert docker(node, "ps", "-aq", "--filter", f"label=io.lanekit.lane={OTHER_LANE}").stdout.strip() == ""
        archives = glob.glob(os.path.join(ROOT, "reports", OTHER_LANE, "*-replaced", "ranks", "r0-spark-02"))
        assert archives and os.path.isfile(os.path.join(max(archives), "full.log")), "replaced without its log"
        assert docker(node, "ps", "-q", "--filter", "name=^gpu-hog$").stdout.strip(), "a non-lane container was touched"
        assert len(lane_containers()) == 8 and all(state == "running" for _id, state in lane_containers().values())
        # Without the refusal a second lane would fail on the node itself: the serving rank holds 0.89 of
        # the simulated device, so another engine there starts with ~1.5 GiB free (as on a GB10).
        free = docker(node, "run", "--rm", "--network", "host", "--entrypoint", "python3", image, "-c",
                      "from lanekit_standin.memory import Device; print(Device.from_env().free_gib)")
        assert float(free.stdout.strip()) < 2.0, free.stdout + free.stderr
    finally:
        docker(node, "rm", "-f", f"{OTHER_LANE}-r0", "gpu-hog", check=False)


def test_status_with_one_rank_killed_names_the_rank_and_exits_non_zero(lane_serving, tmp_path):
    victim = rank_of(3)
    docker(f"lksim-{victim['host']}", "kill", victim["container_name"])
    time.sleep(3)
    proc = status()
    assert proc.returncode == 2, proc.stdout[-3000:]
    line = verdict_line(proc.stdout)
    assert line.startswith((f"lane {LANE}: down", f"lane {LANE}: degraded"))
    text = flat(proc.stdout)
    assert f"cause: rank 3 ({victim['host']}) exited first with code 137 (SIGKILL)" in text
    assert f"lanekit.serving.deploy_lane -i inventories/sim -e lane={LANE}" in text
    row = next(r for r in ANSI.sub("", proc.stdout).splitlines() if r.startswith("r3 "))
    assert row.split()[3] == "exited(137)" and row.split()[4] == "-", row
    doc = status_json(tmp_path, "killed")
    assert doc["verdict"] in ("down", "degraded") and doc["culprits"] == [3]
    assert doc["signatures"][0]["id"] in ("container_exited", "oom_killed")
    assert doc["ranks"][3]["exit_code"] == 137


def wait_node(node: str, up: bool, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ok = subprocess.run(["docker", "exec", node, "docker", "info"], capture_output=True, check=False).returncode == 0
        if ok == up:
            return
        time.sleep(1)
    raise AssertionError(f"{node} did not come {'up' if up else 'down'} in {timeout:.0f} s")


def test_status_with_a_node_stopped_names_the_node_unreachable(vllm_present):
    host = rank_of(2)["host"]
    subprocess.run(["docker", "stop", f"lksim-{host}"], check=True, capture_output=True)
    try:
        proc = status()
        assert proc.returncode == 2, proc.stdout[-3000:]
        line = verdict_line(proc.stdout)
        # Real vLLM (tests/fixtures/real_vllm): a head notices no lost rank while idle, so a head on
        # another node still answers (degraded); with the head's node gone the lane is down.
        assert line.startswith((f"lane {LANE}: down", f"lane {LANE}: degraded"))
        text = flat(proc.stdout)
        assert f"cause: node {host} unreachable (r2 unknown)" in text
        assert f"fix: bring {host} back" in text
        row = next(r for r in ANSI.sub("", proc.stdout).splitlines() if r.startswith("r2 "))
        assert row.split()[3] == "unreachable", row
    finally:
        subprocess.run(["docker", "start", f"lksim-{host}"], check=True, capture_output=True)
        wait_node(f"lksim-{host}", up=True)


@pytest.fixture()
def vllm_torn_down():
    """The vLLM lane removed by teardown-lane.yml (its logs archived): torn down here unless an earlier
    test did (in make test-extended, the vLLM secrets test's teardown; conftest.ORDER). In make test
    this teardown takes the lane the status tests left with a rank killed and a node restarted."""
    if lane_containers():
        down = run_playbook("teardown_lane.yml", extra=["-e", "teardown_remove=true"])
        assert down.returncode == 0, "setting up: the vLLM lane did not tear down"
    archives = [d for d in glob.glob(os.path.join(ROOT, "reports", LANE, "*T*Z-*")) if os.path.isdir(d)]
    if not max(archives, key=os.path.getmtime, default="").endswith("-teardown"):
        # The newest archive must be a teardown's with every rank's log, which needs a lane to tear down.
        proc = run_playbook("deploy_lane.yml", timeout=1500)
        assert proc.returncode == 0, "setting up: the vLLM lane did not deploy"
        down = run_playbook("teardown_lane.yml", extra=["-e", "teardown_remove=true"])
        assert down.returncode == 0, "setting up: the vLLM lane did not tear down"


def test_a_torn_down_lane_is_not_deployed_and_its_archived_logs_read_back(vllm_torn_down):
    assert lane_containers() == {}
    proc = status()
    assert proc.returncode == 2
    assert verdict_line(proc.stdout) == f"lane {LANE}: not deployed"
    assert f"fix: ansible-playbook lanekit.serving.deploy_lane -i inventories/sim -e lane={LANE}" in flat(proc.stdout)

    archived = run_playbook("logs_lane.yml", extra=["-e", "logs_from_archive=latest", "-e", "logs_lines=3"])
    assert archived.returncode == 0
    assert re.search(rf"logs of lane {re.escape(LANE)} \({re.escape(os.path.join(ROOT, 'reports', LANE))}/\d{{8}}T\d{{6}}Z"
                     r"-teardown\)", flat(archived.stdout)), archived.stdout[-2000:]
    lines = log_lines(archived.stdout)
    assert {rank for _t, rank, _h, _x in lines} == {str(r) for r in range(8)}
    stamps = [t for t, _r, _h, _x in lines]
    assert stamps == sorted(stamps)
