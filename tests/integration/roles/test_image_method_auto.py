"""Issue 28 part 4: the image role's method.yml with image_method auto, through ansible-playbook on
three local hosts: the builder's image_info reads the layer sizes, every node's reports how many
bottom layers it holds, the filter picks the method, one line says which and why, and the distribute
step includes that method's file. Each host's docker is a stand-in script (module_defaults sets
image_info's docker_cli per host) answering from a JSON file of its images."""
from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys

import pytest

from tests.unit.helpers.recipes import REPO

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")

HASH = "c" * 64
REF = "lanekit/demo:" + HASH[:12]
LAYERS = ["sha256:" + "11" * 32, "sha256:" + "22" * 32, "sha256:" + "33" * 32]
# Newest first: a 1 MB patch layer over a 60 MB layer over a 300 MB base, configuration steps between.
HISTORY = '1000000 "RUN [\\"python3\\", \\"/opt/lanekit/patches/p.py\\"]"\n0 "ENTRYPOINT [\\"vllm\\"]"\n' \
          '60000000 "RUN pip install vllm"\n0 "ENV A=1"\n300000000 "ADD rootfs.tar /"\n'

DOCKER = '''#!%(python)s
import json, sys
images = json.load(open(%(state)r))
history = %(history)r
args = sys.argv[1:]
def find(ref):
    return images.get(ref) or next((i for i in images.values() if i["Id"] == ref), None)
if args[:1] == ["version"]:
    print(json.dumps({"Arch": "amd64", "Version": "24.0.0"}))
elif args[:2] == ["image", "inspect"]:
    found = [find(ref) for ref in args[2:]]
    if None in found:
        print("[]"); sys.stderr.write("Error: No such image: x\\n"); sys.exit(1)
    print(json.dumps(found))
elif args[:2] == ["image", "ls"]:
    print("\\n".join(sorted({i["Id"] for i in images.values()})) if "--filter" not in args else "")
elif args[:2] == ["image", "history"]:
    if args[-1] not in images:
        sys.stderr.write("Error: No such image\\n"); sys.exit(1)
    sys.stdout.write(history)
else:
    sys.stderr.write("unexpected docker %%r\\n" %% args); sys.exit(2)
'''

PLAY = f"""\
- name: Choose the image method on three local nodes
  hosts: all
  gather_facts: false
  module_defaults:
    lanekit.serving.image_info:
      docker_cli: "{{{{ playbook_dir }}}}/docker-{{{{ inventory_hostname }}}}"
  vars:
    image_nodes: [n1, n2, n3]
    image_builder: n1
    __image_pin: {{ref: "{REF}", content_hash: "{HASH}", rootfs: "", config: ""}}
  tasks:
    - name: Run the role's method.yml
      ansible.builtin.include_role:
        name: lanekit.serving.image
        tasks_from: method.yml
    - name: Show the method
      ansible.builtin.debug:
        msg: "USED={{{{ __image_method_used }}}} NEEDING={{{{ __image_choice.needing | default('-') }}}}"
      run_once: true
"""


def _image(ref, layers, labels=None):
    return {"Id": "sha256:" + hashlib.sha256(ref.encode()).hexdigest(), "Architecture": "amd64", "Os": "linux",
            "RepoTags": [ref], "RepoDigests": [], "Config": {"Labels": labels or {}}, "RootFS": {"Layers": layers}}


def _run(tmp_path, nodes: dict, forks: int = 3, *extra: str):
    for host, images in dict(nodes, n1={REF: _image(REF, LAYERS, {"io.lanekit.content-hash": HASH})}).items():
        state = tmp_path / f"{host}.json"
        state.write_text(json.dumps(images), encoding="utf-8")
        script = tmp_path / f"docker-{host}"
        script.write_text(DOCKER % {"python": sys.executable, "state": str(state), "history": HISTORY}, encoding="utf-8")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "play.yml").write_text(PLAY, encoding="utf-8")
    (tmp_path / "hosts.ini").write_text("n1\nn2\nn3\n[all:vars]\nansible_connection=local\n"
                                        f"ansible_python_interpreter={sys.executable}\n", encoding="utf-8")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [ANSIBLE_PLAYBOOK, "-i", "hosts.ini", "-f", str(forks), "play.yml", *extra]
    proc = subprocess.run(argv, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return " ".join(proc.stdout.split())


def test_fresh_nodes_get_the_relay_and_the_line_says_why(tmp_path):
    out = _run(tmp_path, {"n2": {}, "n3": {}})
    assert ("image method auto: relay, 2 of 3 nodes need the image (0.34 GiB) and lack 100% of it on average: "
            "the stream would send 2.00 images from the builder, the relay about 1.3 over every link") in out
    assert "USED=relay NEEDING=2" in out


def test_a_changed_top_layer_goes_by_the_stream(tmp_path):
    base = {"example/base:1": _image("example/base:1", LAYERS[:2])}
    out = _run(tmp_path, {"n2": base, "n3": base})
    assert "image method auto: stream, 2 of 3 nodes need the image (0.34 GiB) and lack 0.3% of it" in out
    assert "the stream would send 0.01 images from the builder" in out
    assert "USED=stream NEEDING=2" in out


def test_every_node_current_sends_nothing_and_an_explicit_method_is_used_as_set(tmp_path):
    held = {REF: _image(REF, LAYERS, {"io.lanekit.content-hash": HASH})}
    out = _run(tmp_path, {"n2": held, "n3": held})
    assert "image method auto: stream, nothing to send: all 3 nodes hold the image" in out
    out = _run(tmp_path, {"n2": {}, "n3": {}}, 3, "-e", "image_method=stream")
    assert "image method auto" not in out and "USED=stream NEEDING=-" in out


def test_too_few_forks_keep_the_stream(tmp_path):
    out = _run(tmp_path, {"n2": {}, "n3": {}}, 2)
    assert "stream, not the relay" in out and "Ansible runs 2 (forks; set -f 3)" in out
