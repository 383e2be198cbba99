"""The image role's registry on the builder follows the inventory: added htpasswd or TLS, another
file, address or port recreate the existing container (its images stay in the volume), the same
inventory again changes nothing, and dropping logins is refused with a sentence.

The role's own registry.yml runs through ansible-playbook on a local host; community.docker is a
stand-in collection placed first on the collections path, whose docker_container_info and
docker_container keep one container's inspection in a JSON file and behave as the real modules do
with ``comparisons: {'*': ignore}`` (an existing container is only recreated when told to)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.unit.helpers.recipes import REPO

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")

DIGEST = "registry:2@sha256:" + "a" * 64

PLAY = f"""\
- name: Run the image role's registry tasks on a local builder
  hosts: builder
  gather_facts: false
  vars:
    image_builder: builder
    image_registry_image: "{DIGEST}"
    image_registry_bind: 10.0.0.11
  tasks:
    - name: Run the role's registry.yml
      ansible.builtin.include_role:
        name: lanekit.serving.image
        tasks_from: registry.yml
"""

INFO = '''#!/usr/bin/python
import json, os
from ansible.module_utils.basic import AnsibleModule
STATE = %(state)r
m = AnsibleModule(argument_spec=dict(name=dict(type="str", required=True)), supports_check_mode=True)
c = json.load(open(STATE)) if os.path.exists(STATE) else None
m.exit_json(changed=False, exists=c is not None, container=c)
'''

CONTAINER = '''#!/usr/bin/python
import json, os
from ansible.module_utils.basic import AnsibleModule
STATE = %(state)r
m = AnsibleModule(argument_spec=dict(
    name=dict(type="str", required=True), image=dict(type="str"), state=dict(type="str"),
    recreate=dict(type="bool", default=False), detach=dict(type="bool"), restart_policy=dict(type="str"),
    labels=dict(type="dict"), published_ports=dict(type="list", elements="str"),
    volumes=dict(type="list", elements="str"), env=dict(type="dict"), container_default_behavior=dict(type="str"),
    comparisons=dict(type="dict"), image_name_mismatch=dict(type="str")))
p = m.params
if p["comparisons"] != {"*": "ignore"}:
    m.fail_json(msg="the stand-in only knows comparisons {'*': ignore}")
old = json.load(open(STATE)) if os.path.exists(STATE) else None
if old is not None and not p["recreate"]:
    m.exit_json(changed=False)
mounts = []
for item in p["volumes"] or []:
    src, dst, *mode = item.split(":")
    mounts.append({"Type": "bind" if src.startswith("/") else "volume",
                   ("Source" if src.startswith("/") else "Name"): src, "Destination": dst, "RW": mode != ["ro"]})
ports = {}
for item in p["published_ports"] or []:
    ip, host_port, _container = item.rsplit(":", 2)
    ports.setdefault("5000/tcp", []).append({"HostIp": ip.strip("[]"), "HostPort": host_port})
env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
env += ["%%s=%%s" %% kv for kv in sorted((p["env"] or {}).items()) if kv[0] != "PATH"]
created = (old or {}).get("Created", 0) + 1
json.dump({"Created": created, "Config": {"Image": p["image"], "Env": env}, "Mounts": mounts,
           "HostConfig": {"PortBindings": ports}}, open(STATE, "w"))
m.exit_json(changed=True)
'''


@pytest.fixture(name="builder")
def _builder(tmp_path):
    modules = tmp_path / "fakes" / "ansible_collections" / "community" / "docker" / "plugins" / "modules"
    modules.mkdir(parents=True)
    (tmp_path / "fakes" / "ansible_collections" / "community" / "docker" / "galaxy.yml").write_text(
        "namespace: community\nname: docker\nversion: 4.8.5\n", encoding="utf-8")
    state = str(tmp_path / "container.json")
    (modules / "docker_container_info.py").write_text(INFO % {"state": state}, encoding="utf-8")
    (modules / "docker_container.py").write_text(CONTAINER % {"state": state}, encoding="utf-8")
    (tmp_path / "play.yml").write_text(PLAY, encoding="utf-8")
    (tmp_path / "hosts.ini").write_text("builder ansible_connection=local ansible_python_interpreter="
                                        f"{sys.executable}\n", encoding="utf-8")
    return tmp_path


def play(tmp_path, **extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([str(tmp_path / "fakes"), os.environ["ANSIBLE_COLLECTIONS_PATH"]]))
    argv = [ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "hosts.ini"), str(tmp_path / "play.yml"),
            "-e", json.dumps(extra)]
    proc = subprocess.run(argv, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=180, check=False)
    state = tmp_path / "container.json"
    return proc, (json.loads(state.read_text(encoding="utf-8")) if state.exists() else None)


def test_added_htpasswd_recreates_the_registry_and_the_same_inventory_again_changes_nothing(builder):
    proc, first = play(builder)
    assert proc.returncode == 0, proc.stdout
    assert first["Created"] == 1 and not any(e.startswith("REGISTRY_AUTH") for e in first["Config"]["Env"])

    proc, second = play(builder, image_registry_htpasswd="/etc/lanekit/registry.htpasswd")
    assert proc.returncode == 0, proc.stdout
    assert second["Created"] == 2, "the existing registry was not recreated with the htpasswd file"
    assert "REGISTRY_AUTH=htpasswd" in second["Config"]["Env"]
    assert {"Type": "bind", "Source": "/etc/lanekit/registry.htpasswd", "Destination": "/auth/htpasswd",
            "RW": False} in second["Mounts"]
    assert {"Type": "volume", "Name": "lanekit-registry", "Destination": "/var/lib/registry", "RW": True} in second["Mounts"]

    proc, third = play(builder, image_registry_htpasswd="/etc/lanekit/registry.htpasswd")
    assert proc.returncode == 0, proc.stdout
    assert third == second
    assert "changed=0" in proc.stdout

    proc, fourth = play(builder, image_registry_htpasswd="/etc/lanekit/registry.htpasswd", image_registry_port=5443)
    assert proc.returncode == 0, proc.stdout
    assert fourth["Created"] == 3
    assert fourth["HostConfig"]["PortBindings"] == {"5000/tcp": [{"HostIp": "10.0.0.11", "HostPort": "5443"}]}


def test_dropping_htpasswd_from_the_inventory_is_refused_and_the_registry_kept(builder):
    proc, _first = play(builder, image_registry_htpasswd="/etc/lanekit/registry.htpasswd")
    assert proc.returncode == 0, proc.stdout
    proc, after = play(builder)
    assert proc.returncode != 0
    out = " ".join(proc.stdout.split())
    assert "The registry container lanekit-registry on builder asks for logins but the inventory's " \
           "image_registry_htpasswd is empty" in out
    assert after["Created"] == 1 and "REGISTRY_AUTH=htpasswd" in after["Config"]["Env"]
