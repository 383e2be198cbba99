"""What a person checks by hand after a deploy, on every node of the simulated cluster.

The expected values come from the plan the deploy wrote (reports/<lane>/plan.json), so these
tests hold the running cluster to the plan rather than to numbers copied here.
"""
from __future__ import annotations

import json
import os

import pytest

LANE = os.environ.get("LANEKIT_LANE", "mistral-large4-nvfp4-8x-vllm")
ROOT = os.environ.get("LANEKIT_ROOT", os.getcwd())
PLAN_PATH = os.path.join(ROOT, "reports", LANE, "plan.json")

# Each node read through `docker exec` into its container (testinfra's docker backend), not over SSH
# through Ansible: forty checks cost about two seconds each through Ansible's ad hoc path and a tenth
# of that this way. These tests read what the deploy left on the nodes; how a run reaches a node (SSH
# as lanekit, sudo) is what the deploys themselves and the ssh-faults scenario prove.
HOSTS = [f"spark-{i:02d}" for i in range(1, 9)]
testinfra_hosts = [f"docker://lksim-{name}" for name in HOSTS]


@pytest.fixture(scope="module")
def plan():
    with open(PLAN_PATH, encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture()
def rank(host, plan):
    name = host.backend.get_hostname().removeprefix("lksim-")
    for spec in plan["ranks"]:
        if spec["host"] == name:
            return spec
    pytest.fail(f"{name} has no rank in {PLAN_PATH}")


def inspect(host, container):
    result = host.run(f"docker inspect {container}")
    if result.rc != 0:
        print(host.run("docker ps -a").stdout)
        pytest.fail(f"container {container} missing on {host.backend.get_hostname()}: {result.stderr}")
    return json.loads(result.stdout)[0]


def test_rank_container_runs_the_planned_argv(host, rank):
    info = inspect(host, rank["container_name"])
    try:
        assert info["State"]["Running"] is True
    except AssertionError:
        print(host.run(f"docker logs --tail 50 {rank['container_name']}").stdout)
        raise
    assert info["Config"]["Entrypoint"] == rank["entrypoint"]
    assert info["Config"]["Cmd"] == rank["command"]
    assert info["HostConfig"]["AutoRemove"] is False  # never --rm: the logs stay
    assert info["HostConfig"]["NetworkMode"] == "host"


def test_rank_env_and_labels(host, rank):
    info = inspect(host, rank["container_name"])
    env = dict(item.split("=", 1) for item in info["Config"]["Env"])
    for key, value in rank["env"].items():
        assert env.get(key) == value, key
    labels = info["Config"]["Labels"]
    assert labels["io.lanekit.spec-hash"] == rank["spec_hash"]
    assert labels["io.lanekit.lane"] == LANE


def test_rank_runs_the_pinned_image(host, rank, plan):
    info = inspect(host, rank["container_name"])
    image = json.loads(host.run(f"docker image inspect {info['Image']}").stdout)[0]
    assert image["Config"]["Labels"]["io.lanekit.content-hash"] == plan["image"]["content_hash"]


def test_weights_mounted_read_only(host, rank):
    info = inspect(host, rank["container_name"])
    mounts = {m["Destination"]: m for m in info["Mounts"]}
    weights = rank["mounts"][0]["target"]
    assert weights in mounts and mounts[weights]["RW"] is False


def test_head_answers_models_with_the_served_name(host, rank, plan):
    if rank["role"] != "head":
        pytest.skip("only the head serves the OpenAI API")
    url = f"http://127.0.0.1:{plan['api']['port']}/v1/models"
    script = f"import json,urllib.request;print(json.dumps(json.load(urllib.request.urlopen('{url}', timeout=10))))"
    result = host.run(f"python3 -c \"{script}\"")
    assert result.rc == 0, result.stderr
    models = [m["id"] for m in json.loads(result.stdout)["data"]]
    assert plan["api"]["served_model_name"] in models
