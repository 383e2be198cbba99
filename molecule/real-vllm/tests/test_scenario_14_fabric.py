"""Scenario 14: the fabric gate (issue 25) for real. On the sim's CPU nodes (inventories/sim-cpu) the
real-vLLM lane's own image (torch 2.13.0+cpu) runs the probe: gloo all-reduce and all-gather between
cpu-01 and cpu-02 over the sim's bridge. Uncapped it passes the inventory's floor and a re-run reuses
the result; with cpu-02's link capped (tc tbf, tests/sim/playbooks/sim_links.yml) the gate names
cpu-02 with the fix and the deploy stops before any rank starts. (The stand-in lanes, with no torch in
their images, say the gate cannot run: seed-lanes' scenario 16.) Test code only (not part of the collection)."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
from simlib import ROOT, assert_no_traceback, flat, record_timing, run_playbook, staging_host_held

LANE = "tiny-llama-cpu-2x-vllm"
INVENTORY = "sim-cpu"
NODES = ["lksim-cpu-01", "lksim-cpu-02"]
SLOW = "cpu-02"
CAP_MBIT = 100  # 12.5 MB/s: below the inventory's floor of 0.02 GB/s whatever the load (inventories/sim-cpu)


def run(name: str, **kw):
    # CI runs this scenario beside seed-lanes (tests/test-all.sh): hold the shared staging host.
    with staging_host_held():
        return run_playbook(name, lane=LANE, inventory=INVENTORY, **kw)


def report(lane: str = LANE) -> dict:
    with open(os.path.join(ROOT, "reports", lane, "fabric.json"), encoding="utf-8") as fh:
        return json.load(fh)


def set_link(host: str, mbit: int) -> None:
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    subprocess.run([os.path.join(ROOT, ".venv", "bin", "ansible-playbook"),
                    os.path.join(ROOT, "tests", "sim", "playbooks", "sim_links.yml"),
                    "-e", json.dumps({"sim_cluster_link_mbit": mbit, "sim_cluster_link_hosts": [host]})],
                   cwd=ROOT, env=env, capture_output=True, check=True)


def probe_containers() -> list[str]:
    out = []
    for node in NODES:
        proc = subprocess.run(["docker", "exec", node, "docker", "ps", "-a", "--filter", "label=io.lanekit.fabric-probe",
                               "--format", "{{.Names}}"], capture_output=True, text=True, check=True)
        out += proc.stdout.split()
    return out


def ranks() -> list[str]:
    out = []
    for node in NODES:
        proc = subprocess.run(["docker", "exec", node, "docker", "ps", "-a", "--filter", f"label=io.lanekit.lane={LANE}",
                               "--format", "{{.Names}}"], capture_output=True, text=True, check=True)
        out += proc.stdout.split()
    return out


@pytest.fixture(scope="module")
def image_on_the_nodes():
    """The lane's image on both CPU nodes (scenario 13 leaves it there; build_images is a no-op then)."""
    set_link(SLOW, 0)
    proc = run("build_images.yml", timeout=1800)
    assert proc.returncode == 0, "setting up: the real vLLM lane's image is not on the CPU nodes"
    yield
    set_link(SLOW, 0)


@pytest.fixture()
def capped():
    set_link(SLOW, CAP_MBIT)
    yield
    set_link(SLOW, 0)


@pytest.mark.timeout(2400)  # run alone, its fixture first distributes the real image (up to 1800 s)
@pytest.mark.usefixtures("image_on_the_nodes")
def test_uncapped_the_real_lane_passes_and_the_report_names_image_torch_and_env():
    proc = run("fabric_lane.yml", extra=["-e", "fabric_remeasure=true"], timeout=900)
    record_timing("fabric_lane of the real vLLM CPU lane (uncapped)", proc.seconds)
    text = flat(proc.stdout)
    assert proc.returncode == 0, text[-4000:]
    assert_no_traceback(proc.stdout)
    assert f"The fabric of lane {LANE} (2 nodes) passes: all_reduce busbw" in text
    assert "floor 0.02 GB/s" in text and "transport gloo/tcp" in text
    doc = report()
    assert doc["verdict"]["status"] == "pass"
    assert doc["torch"] == ["2.13.0+cpu"] and doc["image"]["ref"].startswith("lanekit/tiny-llama-cpu-vllm:")
    assert doc["env"]["cpu-01"]["GLOO_SOCKET_IFNAME"] == "eth0"
    assert [r["status"] for r in doc["results"]] == ["ok", "ok"]
    assert probe_containers() == [], "a probe container was left on a node"


@pytest.mark.usefixtures("image_on_the_nodes")
def test_a_rerun_reuses_the_result_while_nodes_image_and_env_hold():
    before = report()["measured_at"]
    proc = run("fabric_lane.yml", timeout=600)
    assert proc.returncode == 0, flat(proc.stdout)[-3000:]
    assert "still holds (same nodes, image and fabric env" in flat(proc.stdout)
    assert report()["measured_at"] == before


@pytest.mark.usefixtures("image_on_the_nodes")
def test_a_capped_node_is_named_with_the_fix(capped):
    proc = run("fabric_lane.yml", extra=["-e", "fabric_remeasure=true"], timeout=900)
    record_timing("fabric_lane of the real vLLM CPU lane (cpu-02 capped)", proc.seconds, f"{CAP_MBIT} Mbit/s")
    text = flat(proc.stdout)
    assert proc.returncode != 0, text[-4000:]
    assert_no_traceback(proc.stdout)
    assert f"The fabric of lane {LANE} (2 nodes) is below its floor" in text
    assert f"Slowest pair: {SLOW} -> cpu-01 at" in text and f"{SLOW} is slow on its send side" in text
    assert f"fix: check the NIC, cable and switch port of {SLOW}" in text and "-e fabric_gate=warn" in text
    doc = report()
    assert doc["verdict"]["status"] == "below_floor" and doc["verdict"]["pairs"]["slowest"]["src_host"] == SLOW
    warned = run("fabric_lane.yml", extra=["-e", "fabric_remeasure=true", "-e", "fabric_gate=warn"], timeout=900)
    assert warned.returncode == 0 and "fabric_gate=warn: the deploy goes on." in flat(warned.stdout)


@pytest.mark.timeout(2400)  # a teardown and a deploy
@pytest.mark.usefixtures("image_on_the_nodes")
def test_the_deploy_stops_before_any_rank_starts_on_a_slow_node(capped):
    down = run("teardown_lane.yml", extra=["-e", "teardown_remove=true"], timeout=600)
    assert down.returncode == 0 and ranks() == []
    proc = run("deploy_lane.yml", extra=["-e", "fabric_remeasure=true"], timeout=1800)
    text = flat(proc.stdout)
    assert proc.returncode != 0, text[-4000:]
    assert f"{SLOW} is slow on its send side" in text
    assert ranks() == [], "a rank started although the fabric gate refused the lane"
