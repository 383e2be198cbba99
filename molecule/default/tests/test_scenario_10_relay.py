"""The image relay on the simulated cluster (image_method=relay): the nodes that lack the lane's
image form a chain from the builder, each forwarding what it loads to the next; every node ends
with the pinned image, and a node whose docker load is killed mid-chain fails with a sentence
naming it while the nodes after it re-route to the builder and complete.

Needs no serving lane: it runs build_images.yml (the lane's image exists on the builder, so only
the distribution runs). No timed assertions.
"""
from __future__ import annotations

import glob
import os
import subprocess
import time

import pytest
from simlib import HOSTS, ROOT, assert_no_traceback, docker, flat, node_of, plan, run_playbook

BUILDER = HOSTS[0]
KILLED = "spark-04"


def image_of(host: str, ref: str) -> dict | None:
    import json
    proc = docker(node_of(host), "image", "inspect", ref, "--format", "{{json .}}", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def remove_from_nodes(ref: str) -> None:
    for host in HOSTS[1:]:
        docker(node_of(host), "image", "rm", "--force", ref, check=False)


def assert_pinned(host: str, ref: str, builder: dict, content_hash: str) -> None:
    image = image_of(host, ref)
    assert image, f"{host} has no {ref} after the relay"
    assert image["Config"]["Labels"]["io.lanekit.content-hash"] == content_hash, host
    assert image["RootFS"]["Layers"] == builder["RootFS"]["Layers"], f"{host} has other layers than the builder"
    assert image["Config"] == builder["Config"], f"{host} has another image configuration than the builder"


def set_links(mbit: int) -> None:
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    subprocess.run([os.path.join(ROOT, ".venv", "bin", "ansible-playbook"),
                    os.path.join(ROOT, "tests", "sim", "playbooks", "sim_links.yml"),
                    "-e", f"sim_cluster_link_mbit={mbit}"], cwd=ROOT, env=env, capture_output=True, check=True)


@pytest.fixture()
def lane_image():
    """The lane's image ref after a first build_images run (it builds only when the builder lacks it or
    the stand-in base changed)."""
    # The shared sim's stand-in bases are rebuilt by whoever took it last: accept the lock they make.
    proc = run_playbook("build_images.yml", extra=["-e", "image_lock_update=true"])
    assert proc.returncode == 0, "setting up: build_images.yml failed"
    image = plan()["image"]
    return image["ref"], image["content_hash"]


@pytest.fixture()
def capped_links():
    """Links capped at 100 Mbit/s, so the relay lasts long enough to kill a node's load mid-chain."""
    set_links(100)
    yield
    set_links(0)


def test_every_node_gets_the_pinned_image_through_the_relay(lane_image):
    ref, content_hash = lane_image
    builder = image_of(BUILDER, ref)
    remove_from_nodes(ref)
    proc = run_playbook("build_images.yml", extra=["-e", "image_method=relay"])
    assert proc.returncode == 0
    assert_no_traceback(proc.stdout)
    text = flat(proc.stdout)
    assert "7 of 8 nodes need" in text
    for host in HOSTS[1:]:
        assert_pinned(host, ref, builder, content_hash)
        assert f"{host}: loaded" in text and "from the relay" in text
    assert "re-routed around" not in text

    again = run_playbook("build_images.yml", extra=["-e", "image_method=relay"])
    assert again.returncode == 0 and "(all current)" in flat(again.stdout)


def load_pid(host: str) -> str:
    proc = subprocess.run(["docker", "exec", node_of(host), "pgrep", "-f", "docker.* image load"],
                          capture_output=True, text=True, check=False)
    return proc.stdout.split()[0] if proc.stdout.split() else ""


def test_a_node_killed_mid_chain_is_reported_and_the_rest_complete(lane_image, capped_links):
    ref, content_hash = lane_image
    builder = image_of(BUILDER, ref)
    remove_from_nodes(ref)
    logs = os.path.join(ROOT, ".sim", "scenario-build_images.yml-*.log")
    before = set(glob.glob(logs))
    run = run_playbook("build_images.yml", extra=["-e", "image_method=relay"], wait=False)
    killed = ""
    try:
        while run.poll() is None and not killed:
            pid = load_pid(KILLED)
            if pid:
                # The load has started, so the node already relays to its successor: kill it there.
                subprocess.run(["docker", "exec", node_of(KILLED), "kill", "-9", pid], check=False)
                killed = pid
            else:
                time.sleep(0.5)
        run.wait(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
    assert killed, f"the docker load on {KILLED} ended before it could be killed"
    (log,) = set(glob.glob(logs)) - before
    with open(log, encoding="utf-8") as handle:
        output = handle.read()
    assert_no_traceback(output)
    text = flat(output)
    assert f"docker load on {KILLED} failed on the relayed stream" in text
    assert f"fatal: [{KILLED}]" in text
    assert f"{KILLED}: did not report (its distribution failed above)" in text  # the run names it again
    for host in HOSTS[1:]:
        if host != KILLED:
            assert_pinned(host, ref, builder, content_hash)
    assert "spark-05: loaded" in text and f"re-routed around {KILLED}" in text
    assert image_of(KILLED, ref) is None  # nothing half-loaded was tagged
