"""Images on the simulated cluster, after converge deployed the vLLM lane:
a node whose image was removed or replaced under the same tag is repaired and only it changes;
a truncated digest, an architecture mismatch, a lock mismatch and a patch whose target line is
missing each stop the run with a sentence and leave the running ranks untouched.

The fresh build on all 8 nodes is the scenario's converge; the quiet re-run is scenario 05's re-run test.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import textwrap
import time

import pytest
from simlib import (
    HOSTS,
    ROOT,
    SGLANG_LANE,
    assert_no_traceback,
    changed_hosts,
    docker,
    flat,
    lane_containers,
    node_of,
    plan,
    rank_containers,
    run_playbook,
)


@pytest.fixture()
def running_lane(vllm_serving):
    """The lane's rank containers before a refused run, to prove the run left them as they were."""
    before = lane_containers()
    assert len(before) == 8 and all(state == "running" for _node, state in before.values()), before
    yield before
    assert lane_containers() == before, "a refused run touched the running ranks"


def image_of(host: str, ref: str) -> dict | None:
    proc = docker(node_of(host), "image", "inspect", ref, "--format", "{{json .}}", check=False)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout)


@pytest.fixture()
def vllm_image_everywhere(vllm_staged):
    """The vLLM lane's pinned image on every node (its ranks need not exist: in the full scenario the
    lane is torn down by then, conftest.ORDER); built and distributed only when a node lacks it."""
    ref = plan()["image"]["ref"]
    if any(image_of(host, ref) is None for host in HOSTS):
        proc = run_playbook("build_images.yml")
        assert proc.returncode == 0, "setting up: the vLLM lane's image did not reach every node"


def test_removed_and_replaced_images_are_repaired_and_only_those_nodes_change(running_lane):
    image = plan()["image"]
    ref = image["ref"]
    good = image_of("spark-05", ref)
    assert good, f"{ref} is not on spark-05 after converge"
    # spark-03: the image is removed (the running rank keeps its layers, the tag is gone).
    docker(node_of("spark-03"), "image", "rm", "--force", ref)
    assert image_of("spark-03", ref) is None
    # spark-05: another image now carries the same tag (a commit of the running rank: same labels,
    # one more layer), the case a tag-only check would miss.
    rank = next(iter(c for c in running_lane if c.endswith("-r4")))
    docker(node_of("spark-05"), "commit", "--pause=false", rank, ref)
    assert image_of("spark-05", ref)["Id"] != good["Id"]

    proc = run_playbook("build_images.yml")
    assert proc.returncode == 0
    assert_no_traceback(proc.stdout)
    assert changed_hosts(proc.stdout) == {"spark-03", "spark-05"}
    for host in ("spark-03", "spark-05"):
        repaired = image_of(host, ref)
        assert repaired and repaired["RootFS"]["Layers"] == good["RootFS"]["Layers"], f"{host} was not repaired"

    again = run_playbook("build_images.yml")
    assert again.returncode == 0 and changed_hosts(again.stdout) == set()


def test_truncated_digest_is_refused_with_the_key_to_set(running_lane):
    short = {"mistral-large4-vllm": {"amd64": plan()["image"]["base_digest"][:15]}}
    proc = run_playbook("deploy_lane.yml", extra=["-e", json.dumps({"lanekit_image_digests": short})])
    assert proc.returncode != 0
    assert_no_traceback(proc.stdout)
    assert "the inventory or -e value lanekit_image_digests['mistral-large4-vllm']['amd64']" in flat(proc.stdout)
    assert re.search(r"truncated|not a (full )?pin|64 hex", proc.stdout, re.IGNORECASE)


def test_architecture_mismatch_is_refused_before_anything_runs(running_lane):
    digest = plan()["image"]["base_digest"]
    pins = json.dumps({"lanekit_node_arch": "arm64", "lanekit_image_digests": {"mistral-large4-vllm": {"arm64": digest}}})
    proc = run_playbook("deploy_lane.yml", extra=["-e", pins])
    assert proc.returncode != 0
    assert_no_traceback(proc.stdout)
    assert re.search(r"arm64", proc.stdout) and re.search(r"amd64|x86_64", proc.stdout)
    assert re.search(r"architecture", proc.stdout, re.IGNORECASE)


def test_lock_mismatch_stops_the_run_until_updated_on_purpose(running_lane):
    lock = os.path.join(ROOT, ".sim", "locks", "mistral-large4-vllm.image.lock.yml")
    kept = lock + ".scenario"
    shutil.copy2(lock, kept)
    try:
        with open(lock, encoding="utf-8") as fh:
            text = fh.read()
        # A lock recorded from another build of the same spec: its layer list differs.
        tampered = re.sub(r"(rootfs: sha256:)[0-9a-f]{64}", r"\g<1>" + "0" * 64, text)
        assert tampered != text
        with open(lock, "w", encoding="utf-8") as fh:
            fh.write(tampered)
        proc = run_playbook("deploy_lane.yml")
        assert proc.returncode != 0
        assert_no_traceback(proc.stdout)
        assert "image_lock_update" in flat(proc.stdout) and "lock" in proc.stdout.lower()
        with open(lock, encoding="utf-8") as fh:
            assert fh.read() == tampered, "a refused run must not rewrite the lock"
    finally:
        os.replace(kept, lock)


DRIFT_PATCH = textwrap.dedent('''\
    #!/usr/bin/env python3
    """Scenario fixture: the upstream renamed the barrier constant (what a new upstream tag can do)."""
    import importlib.util
    import os
    spec = importlib.util.find_spec("sglang")
    root = os.path.dirname(list(spec.submodule_search_locations)[0])
    path = os.path.join(root, "sglang", "srt", "model_executor", "model_runner_components", "load_model_utils.py")
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text.replace("UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480", "POST_LOAD_BARRIER_TIMEOUT = 480"))
''')


def test_patch_whose_target_line_is_missing_fails_the_build(running_lane, tmp_path):
    # The SGLang image spec as shipped, over an upstream whose code drifted: the first patch stands
    # for the upstream change, the second is the collection's own barrier patch, which must refuse.
    images = tmp_path / "images"
    shutil.copytree(os.path.join(ROOT, "images"), images)
    spec_dir = images / "mistral-large4-sglang"
    (spec_dir / "patches" / "aaa_upstream_drift.py").write_text(DRIFT_PATCH)
    spec = (spec_dir / "image.yml").read_text()
    spec = spec.replace("patches:\n", "patches:\n  - file: patches/aaa_upstream_drift.py\n"
                        "    target: sglang/srt/model_executor/model_runner_components/load_model_utils.py\n", 1)
    (spec_dir / "image.yml").write_text(spec)
    proc = run_playbook("build_images.yml", lane=SGLANG_LANE, extra=["-e", f"lanekit_images_dir={images}"])
    assert proc.returncode != 0
    assert_no_traceback(proc.stdout)
    text = flat(proc.stdout)
    assert "cannot patch" in text and "UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480" in text
    assert "no image was tagged" in text


# A process that took the stream port on the builder before the run: it answers every connection
# the way the old protocol did (an "ok" line, then frames of whatever it likes).
FAKE_STREAM_SERVER = r'''
import os, socket, sys
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("0.0.0.0", int(sys.argv[1])))
listener.listen(8)
with open("/tmp/lanekit-fake-stream.pid", "w") as handle:
    handle.write(str(os.getpid()))
while True:
    conn, _addr = listener.accept()
    try:
        conn.recv(65536)
        conn.sendall(b'{"ok": true, "skipped_layers": 0}\n' + (1024).to_bytes(8, "big") + bytes(1024)
                     + bytes(8) + (1024).to_bytes(8, "big"))
    except OSError:
        pass
    conn.close()
'''


def _adhoc_distribute(host: str, args: dict) -> subprocess.CompletedProcess:
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible"), host, "-i", os.path.join(ROOT, "inventories", "sim"),
            "-m", "lanekit.serving.image_distribute", "-a", json.dumps(args)]
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_a_fake_stream_server_on_the_port_is_refused_and_nothing_is_tagged(vllm_image_everywhere):
    image = plan()["image"]
    ref = image["ref"]
    builder = node_of("spark-01")
    # spark-03 loses the image (and its rank, when there is one: no untagged copy to re-tag): only the
    # stream can bring it back. A later test that needs the lane serving deploys it again.
    for name in [c["Names"] for c in rank_containers(node_of("spark-03"))]:
        docker(node_of("spark-03"), "rm", "--force", name)
    docker(node_of("spark-03"), "image", "rm", "--force", ref)
    assert image_of("spark-03", ref) is None
    subprocess.run(["docker", "exec", builder, "rm", "-f", "/tmp/lanekit-fake-stream.pid"], check=True)
    subprocess.run(["docker", "exec", "-d", builder, "python3", "-c", FAKE_STREAM_SERVER, "47110"], check=True)
    pid = ""
    try:
        for _attempt in range(50):
            found = subprocess.run(["docker", "exec", builder, "cat", "/tmp/lanekit-fake-stream.pid"],
                                   capture_output=True, text=True, check=False)
            pid = found.stdout.strip()
            if pid:
                break
            time.sleep(0.2)
        assert pid, "the fake server did not start"
        # The run: the real server cannot bind, and the run stops before any node connects.
        proc = run_playbook("build_images.yml")
        assert proc.returncode != 0
        assert_no_traceback(proc.stdout)
        text = flat(proc.stdout)
        assert "cannot listen on 172.31.213.11:47110" in text and "image_stream_port" in text
        assert image_of("spark-03", ref) is None
        # A node sent to the fake server itself refuses it: it cannot prove the run's secret.
        adhoc = _adhoc_distribute("spark-03", {
            "ref": ref, "content_hash": image["content_hash"], "method": "stream", "source": "172.31.213.11:47110",
            "token": "a-secret-the-fake-server-does-not-hold", "delta": False, "probe": "never", "connect_timeout": 10})
        assert adhoc.returncode != 0, adhoc.stdout
        assert "refused the image source 172.31.213.11:47110" in flat(adhoc.stdout)
        assert "a-secret-the-fake-server-does-not-hold" not in adhoc.stdout
        assert image_of("spark-03", ref) is None
    finally:
        if pid:
            subprocess.run(["docker", "exec", builder, "kill", pid], check=False)
        # The test's own file: scenario 12 checks that nothing is left in a node's shared temp dirs.
        subprocess.run(["docker", "exec", builder, "rm", "-f", "/tmp/lanekit-fake-stream.pid"], check=False)
    # With the port free again the same run streams the image to spark-03, and only it changes.
    proc = run_playbook("build_images.yml")
    assert proc.returncode == 0
    assert changed_hosts(proc.stdout) == {"spark-03"}
    assert re.search(r"spark-03: loaded [0-9.]+ MiB from the stream", flat(proc.stdout))
    assert image_of("spark-03", ref)["RootFS"]["Layers"] == image_of("spark-05", ref)["RootFS"]["Layers"]


def test_the_pinned_config_is_what_the_nodes_and_the_saved_image_say():
    import sys
    sys.path.insert(0, os.path.join(ROOT, ".collections"))
    from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import image_pin
    from ansible_collections.lanekit.serving.plugins.module_utils._image._targate import TarGate
    image = plan()["image"]
    lock_path = os.path.join(ROOT, ".sim", "locks", "mistral-large4-vllm.image.lock.yml")
    with open(lock_path, encoding="utf-8") as handle:
        locked = re.search(r"config: (sha256:[0-9a-f]{64})", handle.read())
    assert locked, "the lock records no config digest"
    for host in ("spark-01", "spark-08"):
        assert image_pin(image_of(host, image["ref"]))["config"] == locked.group(1)
    # The saved archive's configuration blob gives the same digest the inspect gives (the gate checks it).
    saved = subprocess.run(["docker", "exec", node_of("spark-01"), "docker", "image", "save", image["ref"]],
                           capture_output=True, check=True).stdout
    gate = TarGate(image["ref"], image["content_hash"], config=locked.group(1))
    for start in range(0, len(saved), 1 << 20):
        gate.feed(saved[start:start + (1 << 20)])
    gate.verify()
