"""image_distribute (modules/image_distribute.py) against a docker engine in memory: a node's image
kept, pulled, retagged or refused, and the stream from image_serve (modules/image_serve.py) to the
nodes end to end over loopback."""
from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import threading
import time

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import DockerCLI, image_pin
from ansible_collections.lanekit.serving.plugins.modules.image_distribute import ImageDistributor
from ansible_collections.lanekit.serving.plugins.modules.image_serve import ImageServer
from tests.unit.helpers.docker import FakeEngine, FakeModule

# -- distribution ---------------------------------------------------------------------------------
HASH = "a" * 64


def distributor(engine, check_mode=False, **extra):
    params = dict(ref="lanekit/thin:aaaaaaaaaaaa", content_hash=HASH, rootfs=None, config=None, method="registry",
                  registry_ref="reg:5000/lanekit/thin@sha256:" + "7" * 64, source=None, token=None, client_name="",
                  connect_timeout=5, stream_timeout=30, delta=True,
                  probe="always", probe_command=["/bin/sh", "-c", "true"], probe_timeout=10,
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
    assert "is not the pinned image" in str(err.value) and "was not tagged" in str(err.value)
    assert "lanekit/thin:aaaaaaaaaaaa" not in engine.images  # the wrong image never got the lane's tag


def test_a_pulled_image_with_another_entrypoint_is_not_tagged():
    engine = FakeEngine()
    registry_ref = "reg:5000/lanekit/thin@sha256:" + "7" * 64
    good = engine.add("good", labels={"io.lanekit.content-hash": HASH})
    pinned = image_pin(good)["config"]
    bad = engine.add("x", labels={"io.lanekit.content-hash": HASH})
    bad["Config"]["Entrypoint"] = ["/bin/sh", "-c", "evil"]
    engine.pulls[registry_ref] = bad
    del engine.images["x"], engine.images["good"]
    with pytest.raises(LanekitError, match="another configuration"):
        distributor(engine, rootfs=image_pin(good)["rootfs"], config=pinned)[0].run()
    assert "lanekit/thin:aaaaaaaaaaaa" not in engine.images


# -- the stream, end to end over loopback (docker save/load replaced by small python processes) ---
REF = "lanekit/thin:aaaaaaaaaaaa"

SAVE_SCRIPT = r"""
import hashlib, io, json, os, sys, tarfile, time
tags, entrypoint, delay, blob_size = json.loads(sys.argv[1])
if isinstance(delay, str):  # a path: the save writes once the test creates it
    for _tick in range(1500):
        if os.path.exists(delay):
            break
        time.sleep(0.02)
else:
    time.sleep(delay)
layers = [b"base-layer-" * 4000 + bytes(blob_size), b"patch-layer"]
blobs = []
for data in layers:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("f.txt"); info.size = len(data); t.addfile(info, io.BytesIO(data))
    blobs.append(buf.getvalue())
diffs = ["sha256:" + hashlib.sha256(b).hexdigest() for b in blobs]
config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": diffs},
                     "config": {"Entrypoint": entrypoint, "Labels": {"io.lanekit.content-hash": "a" * 64}}}).encode()
out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|")
def add(name, blob):
    info = tarfile.TarInfo(name); info.size = len(blob); out.addfile(info, io.BytesIO(blob))
for number, blob in enumerate(blobs):
    add(f"layer{number}/VERSION", b"1.0")
    add(f"layer{number}/layer.tar", blob)
name = hashlib.sha256(config).hexdigest() + ".json"
add(name, config)
add("manifest.json", json.dumps([{"Config": name, "RepoTags": tags, "Layers": ["layer0/layer.tar", "layer1/layer.tar"]}]).encode())
out.close()
"""


def save_argv(tags=(REF,), entrypoint=("engine", "serve"), delay=0.0, blob_size=0):
    return [sys.executable, "-c", SAVE_SCRIPT, json.dumps([list(tags), list(entrypoint), delay, blob_size])]


def layer_diffs(blob_size=0):
    diffs = []
    for data in (b"base-layer-" * 4000 + bytes(blob_size), b"patch-layer"):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            info = tarfile.TarInfo("f.txt")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        diffs.append("sha256:" + hashlib.sha256(buf.getvalue()).hexdigest())
    return diffs


def pinned_inspect(entrypoint=("engine", "serve"), blob_size=0):
    return {"Id": "sha256:1", "Architecture": "amd64", "Os": "linux", "RepoTags": [REF],
            "Config": {"Entrypoint": list(entrypoint), "Labels": {"io.lanekit.content-hash": HASH}},
            "RootFS": {"Type": "layers", "Layers": layer_diffs(blob_size)}}


class StreamDocker(DockerCLI):
    def __init__(self, module, argv_for):
        super().__init__(module)
        self.argv_for = argv_for

    def popen(self, args, **kwargs):
        self.commands.append(list(args))
        return subprocess.Popen(self.argv_for(args), **kwargs)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(tmp_path, port, save, token="s3cret", clients=1, **extra):
    engine = FakeEngine()
    engine.images[REF] = pinned_inspect(blob_size=extra.pop("blob_size", 0))
    params = dict(ref=REF, content_hash=HASH, rootfs=None, config=None, bind="127.0.0.1", port=port, token=token,
                  clients=clients, idle_timeout=3, max_seconds=60, spool_dir=str(tmp_path / "spool"), docker_cli=None,
                  ready_file=str(tmp_path / "ready.json"), max_connections=0, keepalive=0.1)
    params.update(extra)
    module = FakeModule(params, responder=engine)
    server = ImageServer(module, StreamDocker(module, lambda args: save))
    outcome = {}

    def run():
        try:
            outcome.update(server.run())
        except LanekitError as err:
            outcome["error"] = str(err)

    thread = threading.Thread(target=run)
    thread.start()
    for _attempt in range(100):  # the role, too, starts the nodes once the server said it listens
        if os.path.exists(params["ready_file"]):
            break
        time.sleep(0.05)
    return thread, outcome, module


class LoadingNode:
    """A node whose docker load writes what it reads to a file and, like docker, tags what the
    archive's manifest.json names (read as a tar reader does: up to the first end marker, PAX
    headers honoured). Every docker load run is logged, with the bytes it read."""

    def __init__(self, tmp_path, name="node", base=False, blob_size=0):
        self.blob_size = blob_size
        self.pin = image_pin(pinned_inspect(blob_size=blob_size))
        self.out = tmp_path / f"loaded-{name}.tar"
        self.log = tmp_path / f"loads-{name}.log"
        self.tags_file = tmp_path / f"tags-{name}.txt"
        self.spool_dir = tmp_path / f"spool-{name}"
        self.engine = FakeEngine()
        self.name = name
        self.removed = set()
        if base:
            self.engine.add("lanekit/thin:old", labels={"io.lanekit.content-hash": "b" * 64}, layers=layer_diffs()[:1])

    def tagged(self):
        tags = self.tags_file.read_text().split() if self.tags_file.exists() else []
        return [tag for tag in dict.fromkeys(tags) if tag not in self.removed]

    def loads(self):
        """How many bytes each docker load run read, in order."""
        return [int(line) for line in self.log.read_text().split()] if self.log.exists() else []

    def responder(self, argv):
        if argv[1:3] == ["image", "inspect"] and argv[3:] == [REF]:
            if REF not in self.tagged():
                return 1, "[]", "Error: No such image"
            return 0, json.dumps([pinned_inspect(blob_size=self.blob_size)]), ""
        if argv[1:3] == ["image", "ls"] and "--format" in argv:
            return 0, "\n".join(sorted(set(self.engine.images) | set(self.tagged()))), ""
        if argv[1:4] == ["image", "rm", "--no-prune"]:
            self.removed.add(argv[4])
            self.engine.images.pop(argv[4], None)
            return 0, "", ""
        return self.engine(argv)

    def load_argv(self):
        return [sys.executable, "-c", LOAD_SCRIPT, str(self.out), str(self.log), str(self.tags_file)]

    def run(self, port, token="s3cret", **extra):
        load = self.load_argv()
        params = dict(ref=REF, content_hash=HASH, rootfs=self.pin["rootfs"], config=self.pin["config"], method="stream",
                      registry_ref=None, source=f"127.0.0.1:{port}", token=token, client_name=self.name,
                      connect_timeout=10, stream_timeout=10, delta=True, probe="arrival",
                      probe_command=["/bin/sh", "-c", "true"], probe_timeout=10, docker_cli=None,
                      spool_dir=str(self.spool_dir))
        params.update(extra)
        self.module = FakeModule(params, responder=self.responder)
        self.docker = StreamDocker(self.module, lambda args: load)
        return ImageDistributor(self.module, self.docker).run()


LOAD_SCRIPT = r"""
import json, sys, tarfile
# Like docker load: a tar reader (PAX headers honoured) up to the archive's first end marker, whose
# manifest.json tags at once, whatever follows on stdin; then the rest is drained.
out, log, tags = sys.argv[1:4]
seen = bytearray()
class Tee:
    def read(self, size=-1):
        data = sys.stdin.buffer.read(size)
        seen.extend(data)
        return data
manifest = None
try:
    with tarfile.open(fileobj=Tee(), mode="r|") as tar:
        for member in tar:
            if member.name == "manifest.json":
                manifest = json.load(tar.extractfile(member))
except (tarfile.TarError, ValueError):
    pass
if manifest:
    with open(tags, "a") as handle:
        handle.write("".join(tag + "\n" for tag in manifest[0].get("RepoTags") or []))
seen.extend(sys.stdin.buffer.read())
open(out, "wb").write(seen)
open(log, "a").write(f"{len(seen)}\n")
"""


@pytest.mark.parametrize("clients", [1, 3])
def test_stream_from_server_to_nodes(tmp_path, clients):
    port = free_port()
    thread, outcome, _module = start_server(tmp_path, port, save_argv(blob_size=3 << 20), clients=clients,
                                            blob_size=3 << 20)
    results = []
    for index in range(clients):
        node = LoadingNode(tmp_path, f"node-{index}", blob_size=3 << 20)
        node.out.parent.mkdir(exist_ok=True)
        results.append(node.run(port, delta=False))
        assert node.tagged() == [REF]
    thread.join(timeout=60)
    assert all(r["action"] == "loaded" and r["bytes"] > 3 << 20 and r["probe"]["ready"] for r in results)
    assert outcome["loaded"] == clients and outcome["refused"] == 0
    assert json.loads((tmp_path / "ready.json").read_text())["listening"] is True
    assert not os.listdir(tmp_path / "spool")  # the spool is removed when the server ends


def test_a_client_with_a_wrong_secret_is_refused_and_does_not_end_the_server(tmp_path):
    port = free_port()
    thread, outcome, _module = start_server(tmp_path, port, save_argv(), idle_timeout=2)
    intruder = LoadingNode(tmp_path, "intruder")
    with pytest.raises(LanekitError, match="refused the image source"):
        intruder.run(port, token="guess", delta=False)
    assert not intruder.out.exists()  # docker load never started
    node = LoadingNode(tmp_path, "node")
    assert node.run(port, delta=False)["action"] == "loaded"
    thread.join(timeout=30)
    assert outcome["loaded"] == 1 and outcome["refused"] == 1


def fake_server(port, reply):
    """A process that took the port first and answers whatever ``reply`` sends."""
    listener = socket.create_server(("127.0.0.1", port))
    listener.settimeout(10)

    def serve():
        try:
            conn, _addr = listener.accept()
            with conn:
                conn.settimeout(5)
                reply(conn)
        except OSError:
            pass
        finally:
            listener.close()

    thread = threading.Thread(target=serve)
    thread.start()
    return thread


def evil_tar():
    return subprocess.run(save_argv(tags=(REF, "ubuntu:22.04")), capture_output=True, check=True).stdout


@pytest.mark.parametrize("speaks", ["v1", "v2"])
def test_a_fake_server_on_the_port_is_refused_and_nothing_is_tagged(tmp_path, speaks):
    from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
        AUTH,
        MAGIC,
        json_frame,
        new_nonce,
        read_json,
    )

    def reply(conn):
        if speaks == "v1":  # the old protocol: a JSON line, then the frames of any tar it likes
            conn.recv(65536)
            data = evil_tar()
            conn.sendall(b'{"ok": true, "skipped_layers": 0}\n' + len(data).to_bytes(8, "big") + data + bytes(8))
        else:
            read_json(conn)
            conn.sendall(json_frame(AUTH, {"magic": MAGIC, "nonce": new_nonce(), "proof": "1" * 64}))
            conn.recv(65536)

    port = free_port()
    thread = fake_server(port, reply)
    node = LoadingNode(tmp_path)
    with pytest.raises(LanekitError, match="refused the image source .* could not prove|refused the image source .* protocol"):
        node.run(port, delta=False)
    thread.join(timeout=10)
    assert not node.out.exists() and node.tagged() == []


def test_a_stream_altered_on_the_way_is_refused_and_nothing_is_tagged(tmp_path):
    port, front = free_port(), free_port()
    thread, _outcome, _module = start_server(tmp_path, port, save_argv(blob_size=1 << 20), blob_size=1 << 20,
                                             idle_timeout=2)
    listener = socket.create_server(("127.0.0.1", front))

    def relay():  # an on-path attacker that flips one byte deep inside the image data
        conn, _addr = listener.accept()
        upstream = socket.create_connection(("127.0.0.1", port))
        seen = {"n": 0}

        def pipe(src, dst, flip):
            try:
                while True:
                    data = bytearray(src.recv(65536))
                    if not data:
                        break
                    if flip and seen["n"] < 200000 <= seen["n"] + len(data):
                        data[200000 - seen["n"]] ^= 0x01
                    if flip:
                        seen["n"] += len(data)
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for sock in (src, dst):
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        threads = [threading.Thread(target=pipe, args=(conn, upstream, False)),
                   threading.Thread(target=pipe, args=(upstream, conn, True))]
        for item in threads:
            item.start()
        for item in threads:
            item.join()
        listener.close()

    relay_thread = threading.Thread(target=relay)
    relay_thread.start()
    node = LoadingNode(tmp_path, blob_size=1 << 20)
    with pytest.raises(LanekitError, match="refused the stream from .* altered"):
        node.run(front, delta=False)
    relay_thread.join(timeout=30)
    thread.join(timeout=30)
    assert node.tagged() == []  # docker load was killed before the manifest reached it


@pytest.mark.parametrize("save,match", [
    (save_argv(tags=(REF, "ubuntu:22.04")), "not only the pinned"),
    (save_argv(entrypoint=("/bin/sh", "-c", "evil")), "configuration"),
])
def test_a_served_archive_naming_another_tag_or_config_is_refused(tmp_path, save, match):
    port = free_port()
    thread, _outcome, _module = start_server(tmp_path, port, save, idle_timeout=2)
    node = LoadingNode(tmp_path)
    with pytest.raises(LanekitError, match=match):
        node.run(port, delta=False)
    thread.join(timeout=30)
    assert node.tagged() == []


def test_a_slow_save_still_updates_a_node_by_delta(tmp_path):
    port = free_port()
    # The save takes 6 s, three times the node's stall timeout: keep-alive frames carry it through
    # (every 0.1 s: twenty to a timeout, so a loaded machine does not starve them; with a 1 s timeout a
    # make check beside a scenario once lost the delta to a stall and fell back to the whole image).
    thread, outcome, _module = start_server(tmp_path, port, save_argv(delay=6.0), keepalive=0.1)
    node = LoadingNode(tmp_path, base=True)
    result = node.run(port, stream_timeout=2.0)
    thread.join(timeout=30)
    assert result["action"] == "loaded" and result["skipped_layers"] == 1 and node.tagged() == [REF]
    with tarfile.open(node.out) as tar:
        assert "layer0/layer.tar" not in tar.getnames() and "layer1/layer.tar" in tar.getnames()
    assert outcome["served"][0]["skipped_layers"] == 1 and not node.module.warnings


def test_a_delta_that_stalls_falls_back_to_the_whole_stream(tmp_path):
    port = free_port()
    # No keep-alive within the node's stall timeout (a source that says nothing while it saves): the
    # shortened stream times out. The save writes only once the node has given up on it and said so
    # (the release file below), so the whole stream flows at once: no race with a loaded machine's
    # scheduler (a fixed 2 s save against a 1.5 s timeout lost the whole stream, too, in a CI run).
    release = tmp_path / "save-may-write"
    save = save_argv(delay=str(release))
    thread, _outcome, _module = start_server(tmp_path, port, save, keepalive=60.0, idle_timeout=30)
    node = LoadingNode(tmp_path, base=True)

    def release_after_the_fallback_warning():
        for _tick in range(3000):
            module = getattr(node, "module", None)  # run() makes it
            if module and any("loading the whole image instead" in w for w in module.warnings):
                release.touch()
                return
            time.sleep(0.01)

    releaser = threading.Thread(target=release_after_the_fallback_warning, daemon=True)
    releaser.start()
    result = node.run(port, stream_timeout=2.0)
    thread.join(timeout=30)
    releaser.join(timeout=30)
    assert result["action"] == "loaded" and result["skipped_layers"] == 0 and node.tagged() == [REF]
    assert any("loading the whole image instead" in w for w in node.module.warnings)


def test_a_server_that_cannot_bind_fails_and_says_so_in_its_ready_file(tmp_path):
    holder = socket.create_server(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    try:
        thread, outcome, _module = start_server(tmp_path, port, save_argv())
        thread.join(timeout=30)
    finally:
        holder.close()
    assert "cannot listen on 127.0.0.1" in outcome["error"] and "image_stream_port" in outcome["error"]
    ready = json.loads((tmp_path / "ready.json").read_text())
    assert ready["listening"] is False and "cannot listen" in ready["error"]


def test_connections_beyond_the_cap_are_closed(tmp_path, monkeypatch):
    from ansible_collections.lanekit.serving.plugins.module_utils._image import _stream_server
    monkeypatch.setattr(_stream_server, "AUTH_TIMEOUT", 1.0)
    port = free_port()
    thread, outcome, _module = start_server(tmp_path, port, save_argv(), max_connections=1, idle_timeout=1)
    first = socket.create_connection(("127.0.0.1", port))
    time.sleep(0.3)
    second = socket.create_connection(("127.0.0.1", port))
    second.settimeout(5)
    assert second.recv(10) == b""  # closed at once
    first.close()
    second.close()
    thread.join(timeout=30)
    assert outcome["refused"] >= 2  # the one beyond the cap and the silent one


def test_a_spool_left_by_a_killed_server_is_removed(tmp_path):
    from ansible_collections.lanekit.serving.plugins.modules.image_serve import stale_spools
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    for name in ("stream-aaaaaaaaaaaa-4000000.tar", f"stream-aaaaaaaaaaaa-{os.getpid()}.tar", "other.tar"):
        (spool / name).write_bytes(b"x")
    assert stale_spools(str(spool), alive=lambda pid: False) == [str(spool / "stream-aaaaaaaaaaaa-4000000.tar")]
    port = free_port()
    thread, _outcome, _module = start_server(tmp_path, port, save_argv(), clients=1, idle_timeout=1)
    thread.join(timeout=30)
    assert os.listdir(spool) == ["other.tar"]  # the dead server's spool went, a file it did not name stayed


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
    thread, outcome, _module = start_server(tmp_path, free_port(), save_argv())
    thread.join(timeout=30)
    assert f"spool directory (spool_dir) {spool} belongs to uid" in outcome["error"] or "writable" in outcome["error"]
    assert os.listdir(spool) == []


# -- issue 22: nothing reaches docker load before it is proven; a failed load leaves no tag of its own
def save_bytes_argv(path):
    """A docker save that prints the bytes of ``path`` (a builder whose save was tampered with, or a
    token holder serving what it likes)."""
    return [sys.executable, "-c", "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())", str(path)]


def test_an_archive_hiding_another_behind_a_pax_size_never_reaches_docker_load(tmp_path):
    from tests.unit.plugins.module_utils._image.test__targate import crafted, hidden_archive
    genuine = subprocess.run(save_argv(), capture_output=True, check=True).stdout
    evil = tmp_path / "evil.tar"
    evil.write_bytes(crafted(outer=genuine, hidden=hidden_archive()))
    port = free_port()
    thread, _outcome, _module = start_server(tmp_path, port, save_bytes_argv(evil), idle_timeout=2)
    node = LoadingNode(tmp_path)
    with pytest.raises(LanekitError, match="not only the pinned.*docker load never saw it"):
        node.run(port, delta=False)
    thread.join(timeout=30)
    assert node.loads() == [] and node.tagged() == []  # docker load never ran: no evil tag, no tag at all
    assert os.listdir(node.spool_dir) == []  # the private spool is gone with the task


def test_a_load_that_fails_after_tagging_leaves_no_new_tag(tmp_path):
    port = free_port()
    thread, _outcome, _module = start_server(tmp_path, port, save_argv(), idle_timeout=2)
    node = LoadingNode(tmp_path, base=True)
    # A docker load that applied a tag of its own and then failed.
    tagging_then_failing = [sys.executable, "-c", "import sys; sys.stdin.buffer.read(); "
                            f"open({str(node.tags_file)!r}, 'a').write(chr(10) + 'other/extra:1' + chr(10)); sys.exit(1)"]
    node.load_argv = lambda: tagging_then_failing
    with pytest.raises(LanekitError, match="docker load on .* failed"):
        node.run(port, delta=False)
    thread.join(timeout=30)
    assert node.tagged() == [] and "other/extra:1" in node.removed
    assert "lanekit/thin:old" in node.engine.images  # a tag that was there before the load stays


def test_a_stream_checked_in_a_private_spool_still_loads(tmp_path):
    port = free_port()
    thread, _outcome, _module = start_server(tmp_path, port, save_argv(blob_size=1 << 20), blob_size=1 << 20)
    node = LoadingNode(tmp_path, blob_size=1 << 20)
    result = node.run(port, delta=False)
    thread.join(timeout=30)
    assert result["action"] == "loaded" and node.tagged() == [REF]
    assert node.loads() == [len(subprocess.run(save_argv(blob_size=1 << 20), capture_output=True, check=True).stdout)]
    assert (os.stat(node.spool_dir).st_mode & 0o777) == 0o700 and os.listdir(node.spool_dir) == []


# -- issue 22: unproven connections cannot hold the server -------------------------------------------
def test_a_slow_loris_is_dropped_at_the_handshake_deadline(tmp_path, monkeypatch):
    from ansible_collections.lanekit.serving.plugins.module_utils._image import _stream_server
    monkeypatch.setattr(_stream_server, "AUTH_TIMEOUT", 1.0)
    port = free_port()
    thread, outcome, _module = start_server(tmp_path, port, save_argv(), idle_timeout=1)
    loris = socket.create_connection(("127.0.0.1", port))
    trickle = b"A" + (100).to_bytes(8, "big") + b"{" * 100  # a hello frame, one byte every 0.3 s
    start = time.monotonic()
    dropped_after = None
    for byte in trickle:
        try:
            loris.sendall(bytes([byte]))
            loris.settimeout(0.3)
            if loris.recv(100) is not None:  # the server said something or closed
                dropped_after = time.monotonic() - start
                break
        except TimeoutError:
            continue
        except OSError:
            dropped_after = time.monotonic() - start
            break
        if time.monotonic() - start > 5:
            break
    loris.close()
    thread.join(timeout=30)
    # Each byte came well within the old per-read timeout; the deadline counts the whole handshake.
    assert dropped_after is not None and 0.8 < dropped_after < 2.5
    assert outcome["refused"] >= 1


def test_one_address_holds_at_most_two_unproven_connections_and_a_node_is_still_served(tmp_path):
    from ansible_collections.lanekit.serving.plugins.module_utils._image._stream_server import PREAUTH_PER_PEER
    port = free_port()
    thread, outcome, _module = start_server(tmp_path, port, save_argv(), idle_timeout=2)
    held = [socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0))
            for _slot in range(PREAUTH_PER_PEER)]
    time.sleep(0.3)
    extra = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0))
    extra.settimeout(2)
    assert extra.recv(10) == b""  # the N+1th from that address is closed at once
    node = LoadingNode(tmp_path)  # from 127.0.0.1, while the two are held
    assert node.run(port, delta=False)["action"] == "loaded"
    for sock in (*held, extra):
        sock.close()
    thread.join(timeout=30)
    assert outcome["loaded"] == 1 and outcome["refused"] >= 1


def test_an_acknowledgement_with_a_wrong_mac_is_refused(tmp_path):
    from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
        AUTH,
        END,
        ack_mac,
        client_handshake,
        json_frame,
        read_head,
        recv_exact,
    )
    port = free_port()
    thread, outcome, _module = start_server(tmp_path, port, save_argv(), idle_timeout=1)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(10)
    key = client_handshake(sock, "s3cret", "forger", {"content_hash": HASH, "have": []})
    while True:
        kind, length = read_head(sock)
        recv_exact(sock, length)
        if kind == END:
            break
    ack = {"loaded": True, "error": "", "retry": False}
    mac = ack_mac(key, ack)
    ack["mac"] = mac[:-1] + ("0" if mac[-1] != "0" else "1")  # one hex digit off
    sock.sendall(json_frame(AUTH, ack))
    sock.close()
    thread.join(timeout=30)
    record = outcome["served"][0]
    assert record["client"] == "forger" and not record["acked"] and not record["loaded"]
    assert "not signed with this connection's key" in record["error"] and outcome["loaded"] == 0


# -- the builder's per-node signature on the plain stream too ------------------------------------------
ORIGIN = "o" * 64


@pytest.mark.parametrize("base", [False, True])  # the whole archive, and the shortened (delta) stream
def test_a_stream_node_checks_the_builder_s_signature_for_it(tmp_path, base):
    from ansible_collections.lanekit.serving.plugins.module_utils._image._relay import origin_key
    port = free_port()
    thread, outcome, _module = start_server(tmp_path, port, save_argv(), origin_secret=ORIGIN, origin_nodes=["node"])
    node = LoadingNode(tmp_path, base=base)
    result = node.run(port, delta=base, origin_key=origin_key(ORIGIN, "node"))
    thread.join(timeout=30)
    assert result["action"] == "loaded" and result["skipped_layers"] == (1 if base else 0) and node.tagged() == [REF]


def test_a_token_holder_serving_an_altered_layer_is_refused_before_docker_load(tmp_path):
    """Every node holds the stream's secret, so one of them in the path can make a stream whose
    digest matches; it cannot sign for this node, and docker load never sees the bytes."""
    from ansible_collections.lanekit.serving.plugins.module_utils._image._relay import origin_key, origin_map
    from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
        DATA,
        HEADER,
        StreamMac,
        server_handshake,
    )
    genuine = subprocess.run(save_argv(), capture_output=True, check=True).stdout
    altered = bytearray(genuine)
    altered[2000] ^= 0x01  # inside the first layer: the gate cannot tell, the signature can
    signatures = origin_map(ORIGIN, ["node"], REF, HASH, len(genuine), hashlib.sha256(genuine).hexdigest())

    def reply(conn):
        _request, _client, key = server_handshake(conn, "s3cret")
        mac = StreamMac(key)
        conn.sendall(mac.frame(HEADER, b'{"ok": true, "offset": 0, "skipped_layers": 0}'))
        conn.sendall(mac.frame(b"S", json.dumps(signed_size(len(genuine))).encode()))  # the builder's, passed on
        conn.sendall(mac.frame(DATA, bytes(altered)))
        conn.sendall(mac.end_frame({"total": len(genuine), "origin": signatures}))
        conn.recv(1000)

    port = free_port()
    thread = fake_server(port, reply)
    node = LoadingNode(tmp_path)
    with pytest.raises(LanekitError, match="not the one the builder sent.*docker load never saw it"):
        node.run(port, delta=False, origin_key=origin_key(ORIGIN, "node"))
    thread.join(timeout=10)
    assert node.loads() == [] and node.tagged() == []


# -- issue 38, item 4: no byte beyond the size the builder announced ----------------------------------
def signed_size(total, names=("node",)):
    """The builder's announcement of the archive's size, signed for each node with its origin key."""
    from ansible_collections.lanekit.serving.plugins.module_utils._image._relay import origin_key
    body = "\0".join(["lanekit-image-size/1", REF, HASH, str(total)]).encode()
    return {"bytes": total, "origin": {name: hmac.new(origin_key(ORIGIN, name).encode(), body, hashlib.sha256).hexdigest()
                                       for name in names}}


def test_the_builder_announces_a_signed_size_before_any_data_and_never_sends_beyond_it(tmp_path):
    from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
        AUTH,
        DATA,
        END,
        ack_mac,
        client_handshake,
        json_frame,
        read_head,
        recv_exact,
    )
    genuine = subprocess.run(save_argv(blob_size=1 << 20), capture_output=True, check=True).stdout
    port = free_port()
    thread, _outcome, _module = start_server(tmp_path, port, save_argv(blob_size=1 << 20), blob_size=1 << 20,
                                             origin_secret=ORIGIN, origin_nodes=["node"], idle_timeout=2)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(10)
    announced, data, frames = None, 0, []
    try:
        key = client_handshake(sock, "s3cret", "node", {"content_hash": HASH, "have": []})
        while True:
            kind, length = read_head(sock)
            payload = recv_exact(sock, length)
            frames.append(kind)
            if kind == b"S":
                announced = json.loads(payload)
                assert announced == signed_size(announced["bytes"])  # signed for this node by the builder
            elif kind == DATA:
                data += length
                assert announced is not None and data <= announced["bytes"]
            elif kind == END:
                break
        ack = {"loaded": True, "error": "", "retry": False}
        sock.sendall(json_frame(AUTH, dict(ack, mac=ack_mac(key, ack))))
    finally:
        sock.close()
        thread.join(timeout=30)
    assert frames.index(b"S") < frames.index(DATA) and data == len(genuine)
    assert announced["bytes"] == len(genuine)  # the last announcement, once the save finished, is exact


def test_a_source_that_sends_more_than_the_builder_announced_is_refused_and_nothing_is_kept(tmp_path):
    """A token holder on the builder's address forwards the builder's announced size, then sends
    on and on: the node takes the announced bytes, refuses the next frame and says who and why."""
    from ansible_collections.lanekit.serving.plugins.module_utils._image._relay import origin_key
    from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
        DATA,
        HEADER,
        StreamMac,
        server_handshake,
    )
    genuine = subprocess.run(save_argv(), capture_output=True, check=True).stdout

    def reply(conn):
        _request, _client, key = server_handshake(conn, "s3cret")
        mac = StreamMac(key)
        try:
            conn.sendall(mac.frame(HEADER, b'{"ok": true, "offset": 0, "skipped_layers": 0}'))
            conn.sendall(mac.frame(b"S", json.dumps(signed_size(len(genuine))).encode()))
            conn.sendall(mac.frame(DATA, genuine))
            for _mib in range(16):  # bounded only so the old code ends too
                conn.sendall(mac.frame(DATA, bytes(1 << 20)))
            conn.sendall(mac.end_frame({"total": len(genuine) + (16 << 20), "origin": {}}))
            conn.recv(1000)
        except OSError:
            pass

    port = free_port()
    thread = fake_server(port, reply)
    node = LoadingNode(tmp_path)
    with pytest.raises(LanekitError) as failed:
        node.run(port, delta=False, origin_key=origin_key(ORIGIN, "node"))
    thread.join(timeout=10)
    message = str(failed.value)
    assert f"refused the stream from 127.0.0.1:{port}: the source sent more than the {len(genuine)} bytes " \
           f"the builder announced" in message and "docker load never saw it" in message
    assert node.loads() == [] and node.tagged() == [] and os.listdir(node.spool_dir) == []
