"""The fabric role end to end on the controller (issue 25): two local "nodes" run the role as a deploy does
(prepare on the controller, every node's probe started in the background and awaited, the judgement and
fabric.json), with community.docker.docker_container replaced by a stand-in that runs the container's argv
as a local process. With torch (LANEKIT_FABRIC_VENV, default /tmp/fabric-venv) the probe really measures gloo
over 127.0.0.1; without it, the gate says it cannot run."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.unit.helpers.recipes import REPO
from tests.unit.plugins.plugin_utils._fabric.helpers_plan import plan, rank
from tests.unit.plugins.plugin_utils._fabric.test__probe import TORCH_PYTHON, free_port, has_torch

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")

# A docker_container that runs the container's program as a local process (python3 is STUB_PYTHON) and
# returns its output as docker_container does with detach=false: container.Output, failed on a non-zero exit.
STUB = '''#!/usr/bin/python
from __future__ import annotations
import os
import subprocess
from ansible.module_utils.basic import AnsibleModule

OPTIONS = ("name image entrypoint command env labels network_mode ipc_mode devices ulimits capabilities shm_size "
           "device_requests groups security_opts log_driver detach cleanup pull state recreate restart_policy "
           "auto_remove command_handling container_default_behavior force_kill").split()


def main():
    module = AnsibleModule(argument_spec={k: dict(type="raw") for k in OPTIONS})
    p = module.params
    if p["state"] == "absent":
        module.exit_json(changed=False)
    program = [os.environ["STUB_PYTHON"] if p["entrypoint"] == ["python3"] else p["entrypoint"][0]]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1", **(p["env"] or {})}
    proc = subprocess.run(program + list(p["command"]), env=env, capture_output=True, text=True, check=False)
    output = proc.stdout + proc.stderr
    if proc.returncode:
        module.fail_json(msg=output, status=proc.returncode, container={"Output": output})
    module.exit_json(changed=True, status=0, container={"Output": output})


main()
'''


def _setup(tmp_path):
    modules = tmp_path / "collections" / "ansible_collections" / "community" / "docker" / "plugins" / "modules"
    modules.mkdir(parents=True)
    (modules / "docker_container.py").write_text(STUB, encoding="utf-8")
    (modules.parent.parent / "galaxy.yml").write_text("namespace: community\nname: docker\nversion: 99.0.0\n")
    lane_plan = plan(reports_dir=str(tmp_path / "reports" / "L"),
                     ranks=[rank(0, "n1", "127.0.0.1", env={"GLOO_SOCKET_IFNAME": "lo"}),
                            rank(1, "n2", "127.0.0.1", role="worker", env={"GLOO_SOCKET_IFNAME": "lo"})])
    (tmp_path / "plan.json").write_text(json.dumps({"lanekit_plan": lane_plan}), encoding="utf-8")
    (tmp_path / "hosts.ini").write_text("n1\nn2\n[all:vars]\nansible_connection=local\n"
                                        "ansible_python_interpreter={{ ansible_playbook_python }}\n", encoding="utf-8")
    (tmp_path / "fabric.yml").write_text(
        "- name: Run the fabric role on two local nodes\n  hosts: all\n  gather_facts: false\n  roles:\n"
        "    - role: lanekit.serving.fabric\n", encoding="utf-8")


def _run(tmp_path, python: str, *extra: str):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1", STUB_PYTHON=python,
               ANSIBLE_COLLECTIONS_PATH=f"{tmp_path / 'collections'}:{os.path.join(REPO, '.collections')}")
    argv = [ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "hosts.ini"), str(tmp_path / "fabric.yml"), "-e", f"@{tmp_path / 'plan.json'}",
            "-e", json.dumps({"fabric_sizes": [65536, 1048576], "fabric_iters": 2, "fabric_timeout_s": 60,
                              "fabric_port": free_port()}), *extra]
    proc = subprocess.run(argv, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600, check=False)
    return proc, " ".join(proc.stdout.split())


def _report(tmp_path) -> dict:
    return json.loads((tmp_path / "reports" / "L" / "fabric.json").read_text(encoding="utf-8"))


@pytest.mark.skipif(not has_torch(TORCH_PYTHON), reason="no torch in LANEKIT_FABRIC_VENV")
def test_the_role_measures_both_nodes_at_once_writes_the_report_and_reuses_it(tmp_path):
    _setup(tmp_path)
    proc, text = _run(tmp_path, TORCH_PYTHON, "-e", "fabric_floor_gbps=0.000001", "-f", "1")
    # -f 1: one host at a time, yet both probes run together (started in the background, awaited after).
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "The fabric of lane L (2 nodes) passes: all_reduce busbw" in text and "transport gloo/tcp" in text
    doc = _report(tmp_path)
    assert doc["verdict"]["status"] == "pass" and [r["host"] for r in doc["results"]] == ["n1", "n2"]
    again, text = _run(tmp_path, TORCH_PYTHON, "-e", "fabric_floor_gbps=0.000001")
    assert again.returncode == 0 and "still holds (same nodes, image and fabric env" in text
    assert _report(tmp_path)["measured_at"] == doc["measured_at"]


@pytest.mark.skipif(not has_torch(TORCH_PYTHON), reason="no torch in LANEKIT_FABRIC_VENV")
def test_strict_stops_below_the_floor_with_the_slowest_pair(tmp_path):
    _setup(tmp_path)
    proc, text = _run(tmp_path, TORCH_PYTHON, "-e", "fabric_floor_gbps=100000")
    assert proc.returncode != 0
    assert "The fabric of lane L (2 nodes) is below its floor" in text and "Slowest pair: n" in text
    assert _report(tmp_path)["verdict"]["status"] == "below_floor"


def test_an_image_without_torch_cannot_run_strict_stops_and_warn_goes_on(tmp_path):
    if has_torch(sys.executable):
        pytest.skip("this Python has torch")
    _setup(tmp_path)
    proc, text = _run(tmp_path, sys.executable)
    assert proc.returncode != 0
    assert "The fabric gate cannot run on lane L (2 nodes): n1: the image has no usable torch" in text
    warned, text = _run(tmp_path, sys.executable, "-e", "fabric_gate=warn")
    assert warned.returncode == 0, warned.stdout[-3000:]
    assert "fabric_gate=warn: the deploy goes on." in text
    off, text = _run(tmp_path, sys.executable, "-e", "fabric_gate=off")
    assert off.returncode == 0 and "Fabric gate off (fabric_gate=off)" in text
