"""The image relay on the simulated cluster (image_method=relay): the nodes that lack the lane's
image form a chain from the builder, each forwarding what it loads to the next; every node ends
with the pinned image, and a node whose docker load is killed mid-chain fails with a sentence
naming it while the nodes after it re-route to the builder and complete.

Needs no serving lane: it runs build_images.yml on a variant of the lane's image spec (a label
unique to the run), which the builder builds and no node holds. No timed assertions.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time

import pytest
import yaml
from simlib import HOSTS, ROOT, assert_no_traceback, docker, flat, forget_killed_payload, node_of, run_playbook

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


@pytest.fixture(scope="module")
def relay_spec(tmp_path_factory):
    """Extra vars that build an image no node holds: the lane's vLLM image spec with a label unique to
    this run (no new layer, a new content hash), its lock and its plan kept apart from the lane's.

    The lane's own image cannot stand in: the shared deployed lane's containers keep it on every
    node under its id, so the nodes would re-tag that local copy instead of receiving anything."""
    tmp = tmp_path_factory.mktemp("relay")
    images = tmp / "images"
    shutil.copytree(os.path.join(ROOT, "images"), images)
    spec = images / "mistral-large4-vllm" / "image.yml"
    text = spec.read_text(encoding="utf-8")
    assert "\npatches: []\n" in text
    spec.write_text(text.replace("\npatches: []\n", f'\nlabels:\n  org.example.lksim-relay-run: "{time.time_ns()}"\npatches: []\n'),
                    encoding="utf-8")
    lock = tmp / "relay.image.lock.yml"
    # Its own lock and reports too: the lane's plan.json (which the other scenarios read) stays the lane's.
    yield {"lock": lock, "extra": ["-e", f"lanekit_images_dir={images}", "-e", f"image_lock_file={lock}",
                                   "-e", f"lanekit_reports_dir={tmp / 'reports'}",
                                   "-e", "image_lock_update=true", "-e", "image_method=relay"]}
    if lock.exists():
        ref = pinned(lock)[0]
        for host in HOSTS:
            docker(node_of(host), "image", "rm", "--force", ref, check=False)


def pinned(lock) -> tuple[str, str]:
    """(ref, content hash) the relay image's lock records."""
    with open(lock, encoding="utf-8") as handle:
        (entry,) = yaml.safe_load(handle)["arches"].values()
    return entry["ref"], entry["content_hash"]


@pytest.fixture()
def capped_links():
    """Links capped at 100 Mbit/s, so the relay lasts long enough to kill a node's load mid-chain."""
    set_links(100)
    yield
    set_links(0)


def test_every_node_gets_the_pinned_image_through_the_relay(relay_spec):
    proc = run_playbook("build_images.yml", extra=relay_spec["extra"])
    assert proc.returncode == 0, flat(proc.stdout)[-3000:]
    assert_no_traceback(proc.stdout)
    text = flat(proc.stdout)
    assert "7 of 8 nodes need" in text
    ref, content_hash = pinned(relay_spec["lock"])
    builder = image_of(BUILDER, ref)
    for host in HOSTS[1:]:
        assert_pinned(host, ref, builder, content_hash)
        assert f"{host}: loaded" in text and "from the relay" in text
    assert "re-routed around" not in text

    again = run_playbook("build_images.yml", extra=relay_spec["extra"])
    assert again.returncode == 0 and "(all current)" in flat(again.stdout)


def receiver_pid(host: str) -> str:
    """The pid of image_distribute while it receives: with pipelining a module is a bare ``python3``
    (its parent, become's sudo or shell, says BECOME-SUCCESS), and the receiving one holds its
    spool file (``<image_work_dir>/.spool``, unlinked) open."""
    script = ("for p in $(pgrep -x python3); do pp=$(cut -d' ' -f4 /proc/$p/stat 2>/dev/null); "
              "grep -qa BECOME-SUCCESS /proc/$pp/cmdline 2>/dev/null && ls -l /proc/$p/fd 2>/dev/null "
              "| grep -q '/.spool/' && echo $p; done")
    proc = subprocess.run(["docker", "exec", node_of(host), "sh", "-c", script],
                          capture_output=True, text=True, check=False)
    return proc.stdout.split()[-1] if proc.stdout.split() else ""


def test_a_node_killed_mid_chain_is_reported_and_the_rest_complete(relay_spec, capped_links):
    if relay_spec["lock"].exists():
        remove_from_nodes(pinned(relay_spec["lock"])[0])
    logs = os.path.join(ROOT, ".sim", "scenario-build_images.yml-*.log")
    before = set(glob.glob(logs))
    run = run_playbook("build_images.yml", extra=relay_spec["extra"], wait=False)
    killed, seen = "", 0.0
    try:
        while run.poll() is None and not killed:
            pid = receiver_pid(KILLED)
            if pid and not seen:
                seen = time.monotonic()
            if pid and time.monotonic() - seen >= 1:
                # The node spools what it receives (nothing reaches docker load before it is
                # proven) and relays it to its successor meanwhile: the node dies mid-chain.
                subprocess.run(["docker", "exec", node_of(KILLED), "kill", "-9", pid], check=False)
                killed = pid
            else:
                time.sleep(0.3)
        run.wait(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
    assert killed, f"the receiver on {KILLED} ended before it could be killed"
    forget_killed_payload(node_of(KILLED), "image_distribute")
    (log,) = set(glob.glob(logs)) - before
    with open(log, encoding="utf-8") as handle:
        output = handle.read()
    assert_no_traceback(output)
    text = flat(output)
    assert f"fatal: [{KILLED}]" in text
    assert f"{KILLED}: did not report (its distribution failed above)" in text  # the run names it again
    ref, content_hash = pinned(relay_spec["lock"])
    builder = image_of(BUILDER, ref)
    for host in HOSTS[1:]:
        if host != KILLED:
            assert_pinned(host, ref, builder, content_hash)
    assert "spark-05: loaded" in text and f"re-routed around {KILLED}" in text
    assert image_of(KILLED, ref) is None  # nothing half-loaded was tagged
