"""weights_stage with a local source: atomic staging, journal resume, repair, idempotence."""
from __future__ import annotations

import hashlib
import json
import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._stage_sources import LocalSource
from ansible_collections.lanekit.serving.plugins.module_utils._staging import Stager

REV = "0123456789abcdef0123456789abcdef01234567"


def make_source(root, n=4, size=1 << 20):
    os.makedirs(root, exist_ok=True)
    files = {}
    for i in range(1, n + 1):
        name = f"consolidated-{i:05d}-of-{n:05d}.safetensors"
        data = os.urandom(size + i)
        files[name] = data
    files["params.json"] = json.dumps({"dim": 8}).encode()
    files["tekken.json"] = json.dumps({"vocab": []}).encode()
    for name, data in files.items():
        with open(os.path.join(root, name), "wb") as fh:
            fh.write(data)
    return files


def stage(src, dest, **kw):
    kw.setdefault("revision", REV)
    kw.setdefault("workers", 2)
    return Stager(LocalSource(src, kw.pop("allow_patterns", None), kw.pop("ignore_patterns", None)),
                  dest, model_id="org/model", **kw).run()


def sums_ok(dest):
    with open(os.path.join(dest, "SHA256SUMS")) as fh:
        for line in fh:
            digest, name = line.rstrip("\n").split("  ", 1)
            with open(os.path.join(dest, name), "rb") as f:
                assert hashlib.sha256(f.read()).hexdigest() == digest, name
    return True


def test_stage_then_rerun_only_stats(tmp_path):
    src, dest = str(tmp_path / "src"), str(tmp_path / "nfs" / "model")
    files = make_source(src)
    os.makedirs(os.path.dirname(dest))
    r = stage(src, dest)
    assert r["changed"] and r["files_fetched"] == len(files)
    assert r["bytes_fetched"] == sum(len(d) for d in files.values())
    assert r["phases"]["fetch"]["gib_per_s"] > 0
    man = json.load(open(os.path.join(dest, "MANIFEST.json")))
    assert man["revision"] == REV and man["model_id"] == "org/model" and man["source"]["kind"] == "local"
    assert {f["path"] for f in man["files"]} == set(files)
    assert sums_ok(dest)
    assert os.listdir(os.path.join(dest, ".lanekit", "tmp")) == []
    r2 = stage(src, dest)
    assert not r2["changed"]
    assert r2["files_fetched"] == 0 and r2["bytes_hashed"] == 0  # stats only


def test_check_mode_reports_bytes_and_writes_nothing(tmp_path):
    src, dest = str(tmp_path / "src"), str(tmp_path / "model")
    files = make_source(src)
    r = stage(src, dest, check_mode=True)
    assert r["changed"] and r["would_fetch_bytes"] == sum(len(d) for d in files.values())
    assert not os.path.exists(dest)


def test_symlink_farm_is_resolved_to_real_files(tmp_path):
    # a Hub cache snapshot: snapshots/<rev>/<file> -> ../../blobs/<sha>
    cache = tmp_path / "hub" / "models--org--m"
    (cache / "blobs").mkdir(parents=True)
    snap = cache / "snapshots" / REV
    snap.mkdir(parents=True)
    for name, data in {"a.safetensors": os.urandom(4096), "params.json": b"{}"}.items():
        blob = cache / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        os.symlink(os.path.relpath(blob, snap), snap / name)
    dest = str(tmp_path / "model")
    r = stage(str(snap), dest)
    assert r["files_fetched"] == 2
    for name in ("a.safetensors", "params.json"):
        assert not os.path.islink(os.path.join(dest, name))
        assert os.path.isfile(os.path.join(dest, name))
    assert sums_ok(dest)


def test_dangling_source_symlink_is_named(tmp_path):
    src = tmp_path / "src"
    make_source(str(src), n=1)
    os.symlink(str(tmp_path / "gone"), src / "consolidated-00009-of-00009.safetensors")
    with pytest.raises(LanekitError, match="consolidated-00009-of-00009.safetensors"):
        stage(str(src), str(tmp_path / "model"))


def test_flipped_byte_full_verify_repairs_only_that_file(tmp_path):
    src, dest = str(tmp_path / "src"), str(tmp_path / "model")
    make_source(src)
    stage(src, dest)
    victim = os.path.join(dest, "consolidated-00002-of-00004.safetensors")
    st = os.stat(victim)
    with open(victim, "r+b") as fh:  # bit rot: same size, same mtime
        fh.seek(1000)
        b = fh.read(1)
        fh.seek(1000)
        fh.write(bytes([b[0] ^ 1]))
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    quick = stage(src, dest)
    assert not quick["changed"]  # stats cannot see bit rot: that is what verify=full is for
    check = stage(src, dest, verify="full", check_mode=True)
    assert check["would_repair_files"] == ["consolidated-00002-of-00004.safetensors"]
    assert check["changed"]
    full = stage(src, dest, verify="full")
    assert full["changed"] and full["repaired"] == ["consolidated-00002-of-00004.safetensors"]
    assert full["files_fetched"] == 1 and full["files_hashed"] == 6
    assert sums_ok(dest)
    assert not stage(src, dest, verify="full")["changed"]


def test_resume_after_a_killed_run(tmp_path):
    """State a run killed mid-way leaves behind: some files placed and journaled, one partial
    temp file, no manifest. The re-run fetches only what is missing and hashes nothing."""
    src, dest = str(tmp_path / "src"), str(tmp_path / "model")
    files = make_source(src)
    stage(src, dest)
    os.unlink(os.path.join(dest, "MANIFEST.json"))
    os.unlink(os.path.join(dest, "SHA256SUMS"))
    os.unlink(os.path.join(dest, "consolidated-00004-of-00004.safetensors"))
    part = os.path.join(dest, ".lanekit", "tmp", "consolidated-00004-of-00004.safetensors.dead.part")
    with open(part, "wb") as fh:
        fh.write(b"half")
    with open(os.path.join(dest, ".lanekit", "journal.jsonl"), "ab") as fh:
        fh.write(b'{"path": "consol')  # torn line of the killed run
    r = stage(src, dest)
    assert r["changed"]
    assert r["files_fetched"] == 1 and r["bytes_fetched"] == len(files["consolidated-00004-of-00004.safetensors"])
    assert r["bytes_hashed"] == 0
    assert os.listdir(os.path.join(dest, ".lanekit", "tmp")) == []
    assert sums_ok(dest)


def test_file_without_journal_entry_is_hashed_not_copied(tmp_path):
    src, dest = str(tmp_path / "src"), str(tmp_path / "model")
    make_source(src, n=2)
    stage(src, dest)
    os.unlink(os.path.join(dest, ".lanekit", "journal.jsonl"))
    r = stage(src, dest)
    assert not r["changed"] and r["files_fetched"] == 0 and r["files_hashed"] == 4


def test_source_sums_are_enforced(tmp_path):
    src, dest = str(tmp_path / "src"), str(tmp_path / "model")
    files = make_source(src, n=1)
    with open(os.path.join(src, "SHA256SUMS"), "w") as fh:
        for name, data in files.items():
            digest = hashlib.sha256(data).hexdigest()
            if name == "params.json":
                digest = "0" * 64
            fh.write(f"{digest}  {name}\n")
    with pytest.raises(LanekitError, match="params.json .*sha256"):
        stage(src, dest)
    assert not os.path.exists(os.path.join(dest, "params.json"))  # never a bad file under a final name
    assert not os.path.exists(os.path.join(dest, "MANIFEST.json"))


def test_source_manifest_revision_must_match(tmp_path):
    src, dest = str(tmp_path / "src"), str(tmp_path / "model")
    make_source(src, n=1)
    stage(src, dest)
    mirror = str(tmp_path / "model")  # a staged dir is a valid source: its manifest pins a revision
    with pytest.raises(LanekitError, match="revision"):
        stage(mirror, str(tmp_path / "other"), revision="f" * 40)
    r = stage(mirror, str(tmp_path / "copy"))
    assert r["changed"] and r["files_total"] == 3


def test_patterns_and_extra_files(tmp_path):
    src, dest = str(tmp_path / "src"), str(tmp_path / "model")
    make_source(src, n=2)
    with open(os.path.join(src, "consolidated.pth"), "wb") as fh:
        fh.write(b"x")
    r = stage(src, dest, ignore_patterns=["*.pth"])
    assert "consolidated.pth" not in {f["path"] for f in r["files"]}
    with open(os.path.join(dest, "config.json"), "w") as fh:
        fh.write("{}")
    r = stage(src, dest, ignore_patterns=["*.pth"])
    assert r["extra_files"] == ["config.json"] and not r["changed"]
    r = stage(src, dest, ignore_patterns=["*.pth"], prune=True)
    assert r["pruned"] == ["config.json"] and r["changed"]


def test_relative_or_missing_paths_are_sentences(tmp_path):
    with pytest.raises(LanekitError, match="absolute"):
        stage(str(tmp_path), "relative/dir")
    with pytest.raises(LanekitError, match="does not exist"):
        stage(str(tmp_path / "nope"), str(tmp_path / "model"))
    with pytest.raises(LanekitError, match="mounted"):
        stage(str(tmp_path), str(tmp_path / "no" / "such" / "model"))


def test_root_allows_creating_nested_model_dirs(tmp_path):
    src = str(tmp_path / "src")
    make_source(src, n=1)
    root = tmp_path / "nfs"
    root.mkdir()
    dest = str(root / "org" / "model")
    r = stage(src, dest, root=str(root))
    assert r["changed"] and os.path.isfile(os.path.join(dest, "MANIFEST.json"))
    with pytest.raises(LanekitError, match="not a directory under"):
        stage(src, str(tmp_path / "elsewhere" / "m"), root=str(root))
    with pytest.raises(LanekitError, match="mounted"):
        stage(src, str(tmp_path / "nope" / "m"), root=str(tmp_path / "nope"))
