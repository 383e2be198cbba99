"""image_distribute (modules/image_distribute.py) against a docker engine in memory: a node's image
kept, pulled, retagged or refused, and the stream from image_serve (modules/image_serve.py) to the
nodes end to end over loopback."""
from __future__ import annotations

import json
import os
import socket
import sys
import threading

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._docker_cli import DockerCLI, image_pin
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.modules.image_distribute import ImageDistributor
from ansible_collections.lanekit.serving.plugins.modules.image_serve import ImageServer
from tests.unit.helpers.docker import FakeEngine, FakeModule

# -- distribution ---------------------------------------------------------------------------------
HASH = "a" * 64


def distributor(engine, check_mode=False, **extra):
    params = dict(ref="lanekit/thin:aaaaaaaaaaaa", content_hash=HASH, rootfs=None, method="registry",
                  registry_ref="reg:5000/lanekit/thin@sha256:" + "7" * 64, source=None, token=None, client_name="",
                  connect_timeout=5, delta=True, probe="always", probe_command=["/bin/sh", "-c", "true"], probe_timeout=10,
                  docker_cli=None)
    params.update(extra)
    module = FakeModule(params, check_mode=check_mode, diff=True, responder=engine)
    return ImageDistributor(module, DockerCLI(module)), module


def test_current_node_is_left_alone_but_probed():
    engine = FakeEngine()
    engine.add("lanekit/thin:aaaaaaaaaaaa", labels={"io.lanekit.content-hash": HASH})
    manager, module = distributor(engine)
    result = manager.run()
    assert not result["changed"] and result["action"] == "current" and result["probe"]["ready"]
    assert not [c for c in module.calls if c[1:3] == ["image", "pull"]]


def test_missing_image_is_pulled_by_digest_and_tagged():
    engine = FakeEngine()
    registry_ref = "reg:5000/lanekit/thin@sha256:" + "7" * 64
    engine.pulls[registry_ref] = engine.add("x", labels={"io.lanekit.content-hash": HASH}, repo_digests=[registry_ref])
    del engine.images["x"]
    manager, module = distributor(engine, probe="arrival")
    result = manager.run()
    assert result["changed"] and result["action"] == "pulled"
    assert result["pin"]["repo_digests"] == [registry_ref]
    assert result["probe"]["ready"]


def test_tag_replaced_by_another_image_is_repaired_by_retagging_a_local_copy():
    engine = FakeEngine()
    good = engine.add("reg:5000/lanekit/thin:aaaaaaaaaaaa", labels={"io.lanekit.content-hash": HASH})
    engine.add("lanekit/thin:aaaaaaaaaaaa", labels={"io.lanekit.content-hash": "b" * 64})
    manager, _unused = distributor(engine, rootfs=image_pin(good)["rootfs"])
    result = manager.run()
    assert result["action"] == "retagged" and result["pin"]["content_hash"] == HASH
    assert "points at another image" in result["reason"]


def test_same_label_but_other_layers_is_not_current():
    engine = FakeEngine()
    engine.add("lanekit/thin:aaaaaaaaaaaa", labels={"io.lanekit.content-hash": HASH})
    manager, _unused = distributor(engine, rootfs="sha256:" + "0" * 64, check_mode=True)
    result = manager.run()
    assert result["changed"] and result["action"] == "would-fetch" and "other layers" in result["reason"]


def test_fetch_that_yields_another_image_fails():
    engine = FakeEngine()
    registry_ref = "reg:5000/lanekit/thin@sha256:" + "7" * 64
    engine.pulls[registry_ref] = engine.add("x", labels={"io.lanekit.content-hash": "b" * 64})
    del engine.images["x"]
    with pytest.raises(LanekitError) as err:
        distributor(engine)[0].run()
    assert "still does not hold the pinned image" in str(err.value)


# -- the stream, end to end over loopback (docker save/load replaced by small python processes) ---
class StreamDocker(DockerCLI):
    def __init__(self, module, argv_for):
        super().__init__(module)
        self.argv_for = argv_for

    def popen(self, args, **kwargs):
        import subprocess
        self.commands.append(list(args))
        return subprocess.Popen(self.argv_for(args), **kwargs)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("clients", [1, 3])
def test_stream_from_server_to_nodes(tmp_path, clients):
    payload = 5 * (1 << 20) + 123
    port = free_port()
    ref = "lanekit/thin:aaaaaaaaaaaa"
    source_engine = FakeEngine()
    source_engine.add(ref, labels={"io.lanekit.content-hash": HASH})
    save = [sys.executable, "-c", f"import sys; sys.stdout.buffer.write(bytes(range(256)) * ({payload} // 256) + b'x' * ({payload} % 256))"]
    server_module = FakeModule(dict(ref=ref, content_hash=HASH, rootfs=None, bind="127.0.0.1", port=port, token="t0ken",
                                    clients=clients, idle_timeout=20, max_seconds=60, spool_dir=str(tmp_path / "spool"),
                                    docker_cli=None), responder=source_engine)
    server = ImageServer(server_module, StreamDocker(server_module, lambda args: save))
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(server.run()))
    thread.start()

    results = []
    for index in range(clients):
        out = tmp_path / f"loaded-{index}"
        load = [sys.executable, "-c", f"import shutil, sys; shutil.copyfileobj(sys.stdin.buffer, open({str(out)!r}, 'wb'))"]

        def responder(argv, out=out):
            if argv[1:3] == ["image", "inspect"] and out.exists() and out.stat().st_size == payload:
                return 0, json.dumps([{"Id": "sha256:1", "Architecture": "amd64", "RepoTags": [ref],
                                       "Config": {"Labels": {"io.lanekit.content-hash": HASH}},
                                       "RootFS": {"Layers": ["sha256:" + "1" * 64]}}]), ""
            return FakeEngine()(argv)

        module = FakeModule(dict(ref=ref, content_hash=HASH, rootfs=None, method="stream", registry_ref=None,
                                 source=f"127.0.0.1:{port}", token="t0ken", client_name=f"node-{index}",
                                 connect_timeout=10, delta=True, probe="arrival", probe_command=["/bin/sh", "-c", "true"],
                                 probe_timeout=10, docker_cli=None), diff=False, responder=responder)
        results.append(ImageDistributor(module, StreamDocker(module, lambda args, load=load: load)).run())
    thread.join(timeout=60)
    assert all(r["action"] == "loaded" and r["bytes"] == payload and r["probe"]["ready"] for r in results)
    assert outcome["loaded"] == clients and outcome["bytes"] == payload
    assert not os.listdir(tmp_path / "spool")  # the spool is removed when the server ends


def test_stream_with_a_wrong_token_is_refused(tmp_path):
    port = free_port()
    ref = "lanekit/thin:aaaaaaaaaaaa"
    engine = FakeEngine()
    engine.add(ref, labels={"io.lanekit.content-hash": HASH})
    server_module = FakeModule(dict(ref=ref, content_hash=HASH, rootfs=None, bind="127.0.0.1", port=port, token="right",
                                    clients=1, idle_timeout=2, max_seconds=30, spool_dir=str(tmp_path / "spool"),
                                    docker_cli=None), responder=engine)
    server = ImageServer(server_module, StreamDocker(server_module, lambda args: [sys.executable, "-c", "print('x')"]))
    thread = threading.Thread(target=server.run)
    thread.start()
    module = FakeModule(dict(ref=ref, content_hash=HASH, rootfs=None, method="stream", registry_ref=None,
                             source=f"127.0.0.1:{port}", token="wrong", client_name="n", connect_timeout=10, delta=False,
                             probe="never", probe_command=["/bin/sh"], probe_timeout=1, docker_cli=None),
                        responder=FakeEngine())
    with pytest.raises(LanekitError) as err:
        ImageDistributor(module, StreamDocker(module, lambda args: ["false"])).run()
    thread.join(timeout=30)
    assert "refused" in str(err.value) and "wrong token" in str(err.value)


def test_unreachable_source_is_a_sentence(tmp_path):
    module = FakeModule(dict(ref="lanekit/thin:aaaaaaaaaaaa", content_hash=HASH, rootfs=None, method="stream",
                             registry_ref=None, source=f"127.0.0.1:{free_port()}", token="t", client_name="n",
                             connect_timeout=1, delta=True, probe="never", probe_command=["/bin/sh"], probe_timeout=1,
                             docker_cli=None), responder=FakeEngine())
    with pytest.raises(LanekitError) as err:
        ImageDistributor(module, DockerCLI(module)).run()
    assert "could not reach the image source" in str(err.value) and "image_stream_port" in str(err.value)


SAVE_SCRIPT = r"""
import hashlib, io, json, sys, tarfile
layers = [b"base-layer-" * 4000, b"patch-layer"]
blobs = []
for data in layers:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("f.txt"); info.size = len(data); t.addfile(info, io.BytesIO(data))
    blobs.append(buf.getvalue())
diffs = ["sha256:" + hashlib.sha256(b).hexdigest() for b in blobs]
config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": diffs}}).encode()
out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|")
def add(name, blob):
    info = tarfile.TarInfo(name); info.size = len(blob); out.addfile(info, io.BytesIO(blob))
for number, blob in enumerate(blobs):
    add(f"layer{number}/VERSION", b"1.0")
    add(f"layer{number}/layer.tar", blob)
add("config.json", config)
add("manifest.json", json.dumps([{"Config": "config.json", "RepoTags": ["lanekit/thin:aaaaaaaaaaaa"],
                                   "Layers": ["layer0/layer.tar", "layer1/layer.tar"]}]).encode())
out.close()
"""


def _save_layers():
    import hashlib
    import io
    import tarfile as tf
    diffs = []
    for data in (b"base-layer-" * 4000, b"patch-layer"):
        buf = io.BytesIO()
        with tf.open(fileobj=buf, mode="w") as t:
            info = tf.TarInfo("f.txt")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        diffs.append("sha256:" + hashlib.sha256(buf.getvalue()).hexdigest())
    return diffs


@pytest.mark.parametrize("node_has_base", [True, False])
def test_stream_leaves_out_layers_the_node_holds(tmp_path, node_has_base):
    import tarfile as tf
    diffs = _save_layers()
    port = free_port()
    ref = "lanekit/thin:aaaaaaaaaaaa"
    source_engine = FakeEngine()
    source_engine.add(ref, labels={"io.lanekit.content-hash": HASH}, layers=diffs)
    server_module = FakeModule(dict(ref=ref, content_hash=HASH, rootfs=None, bind="127.0.0.1", port=port, token="t",
                                    clients=1, idle_timeout=20, max_seconds=60, spool_dir=str(tmp_path / "spool"),
                                    docker_cli=None), responder=source_engine)
    server = ImageServer(server_module, StreamDocker(server_module, lambda args: [sys.executable, "-c", SAVE_SCRIPT]))
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(server.run()))
    thread.start()

    out = tmp_path / "loaded.tar"
    node = FakeEngine()
    if node_has_base:
        node.add("lanekit/thin:old", labels={"io.lanekit.content-hash": "b" * 64}, layers=diffs[:1])

    def responder(argv):
        if argv[1:3] == ["image", "inspect"] and argv[3:] == [ref]:
            if not out.exists():
                return 1, "[]", "Error: No such image"
            return 0, json.dumps([{"Id": "sha256:1", "Architecture": "amd64", "RepoTags": [ref],
                                   "Config": {"Labels": {"io.lanekit.content-hash": HASH}},
                                   "RootFS": {"Layers": diffs}}]), ""
        return node(argv)

    load = [sys.executable, "-c", f"import shutil, sys; shutil.copyfileobj(sys.stdin.buffer, open({str(out)!r}, 'wb'))"]
    module = FakeModule(dict(ref=ref, content_hash=HASH, rootfs=None, method="stream", registry_ref=None,
                             source=f"127.0.0.1:{port}", token="t", client_name="n", connect_timeout=10, delta=True,
                             probe="never", probe_command=["/bin/sh"], probe_timeout=1, docker_cli=None),
                        responder=responder)
    result = ImageDistributor(module, StreamDocker(module, lambda args: load)).run()
    thread.join(timeout=60)
    with tf.open(out) as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("manifest.json"))
    assert manifest[0]["Layers"] == ["layer0/layer.tar", "layer1/layer.tar"]
    assert "layer1/layer.tar" in names and "config.json" in names and "layer0/VERSION" in names
    assert ("layer0/layer.tar" in names) is (not node_has_base)
    assert result["skipped_layers"] == (1 if node_has_base else 0)
    assert outcome["served"][0]["skipped_layers"] == result["skipped_layers"]


@pytest.mark.parametrize("owner", ["self", "other"])
def test_a_spool_dir_another_user_can_change_is_refused_before_serving(tmp_path, owner):
    if owner == "other" and os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    spool = tmp_path / "spool"
    spool.mkdir()
    if owner == "other":
        os.chmod(spool, 0o700)
        os.chown(spool, 4242, 4242)
    else:
        os.chmod(spool, 0o777)
    ref = "lanekit/thin:aaaaaaaaaaaa"
    engine = FakeEngine()
    engine.add(ref, labels={"io.lanekit.content-hash": HASH})
    module = FakeModule(dict(ref=ref, content_hash=HASH, rootfs=None, bind="127.0.0.1", port=free_port(), token="t",
                             clients=1, idle_timeout=2, max_seconds=5, spool_dir=str(spool), docker_cli=None),
                        responder=engine)
    server = ImageServer(module, StreamDocker(module, lambda args: [sys.executable, "-c", "print('x')"]))
    with pytest.raises(LanekitError, match=f"spool directory \\(spool_dir\\) {spool} belongs to uid"):
        server.run()
    assert os.listdir(spool) == []
