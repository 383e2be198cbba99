"""weights_stage with a local source: atomic staging, journal resume, repair, idempotence."""
from __future__ import annotations

import hashlib
import json
import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_sources import LocalSource
from ansible_collections.lanekit.serving.plugins.module_utils._weights._staging import Stager

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
    # prune removes only what a previous stage put there: a file placed by hand is kept and named
    r = stage(src, dest, ignore_patterns=["*.pth"], prune=True)
    assert r["pruned"] == [] and r["kept_extra_files"] == ["config.json"] and not r["changed"]
    r = stage(src, dest, ignore_patterns=["*.pth", "consolidated-00002*"], prune=True, check_mode=True)
    assert r["would_prune_files"] == ["consolidated-00002-of-00002.safetensors"] and r["changed"]
    r = stage(src, dest, ignore_patterns=["*.pth", "consolidated-00002*"], prune=True)
    assert r["pruned"] == ["consolidated-00002-of-00002.safetensors"] and r["changed"]
    assert os.path.isfile(os.path.join(dest, "config.json"))


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
    with pytest.raises(LanekitError, match="not a directory under"):
        stage(src, str(root) + "/org/..", root=str(root))  # the root itself
    (root / "file").write_text("x")
    with pytest.raises(LanekitError, match="exists and is not a directory"):
        stage(src, str(root / "file"), root=str(root))
    with pytest.raises(LanekitError, match="mounted"):
        stage(src, str(tmp_path / "nope" / "m"), root=str(tmp_path / "nope"))


# -- nothing outside the source is read, nothing outside the destination is touched -----------------
@pytest.mark.parametrize("kind", ["file", "dir", "root"])
def test_a_link_out_of_the_source_is_refused_naming_link_and_target(tmp_path, kind):
    src, dest = tmp_path / "src", tmp_path / "model"
    make_source(str(src), n=1)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shadow").write_text("root-only")
    target = {"file": outside / "shadow", "dir": outside, "root": "/"}[kind]
    os.symlink(target, src / "leak")
    with pytest.raises(LanekitError) as err:
        stage(str(src), str(dest))
    assert f"{src}/leak -> {os.path.realpath(target)}" in str(err.value)
    assert "\n" not in str(err.value)
    assert not dest.exists()


def test_a_source_manifest_or_sums_linked_out_of_the_source_is_not_read(tmp_path):
    src = tmp_path / "src"
    make_source(str(src), n=1)
    (tmp_path / "secret").write_text("root:$6$hash:19000:0:99999:7:::\n")
    os.symlink(tmp_path / "secret", src / "SHA256SUMS")
    with pytest.raises(LanekitError) as err:
        stage(str(src), str(tmp_path / "model"))
    assert "SHA256SUMS -> " in str(err.value) and "$6$" not in str(err.value)


def test_links_inside_the_source_are_followed(tmp_path):
    src, dest = tmp_path / "src", str(tmp_path / "model")
    files = make_source(str(src), n=1)
    (src / "sub").mkdir()
    os.symlink("../params.json", src / "sub" / "params.json")
    os.symlink(src / "sub", src / "alias")  # absolute, still inside: walked once (as alias/, sorted first)
    r = stage(str(src), dest)
    staged = {f["path"] for f in json.load(open(os.path.join(dest, "MANIFEST.json")))["files"]}
    assert "alias/params.json" in staged and r["changed"]
    assert open(os.path.join(dest, "alias", "params.json"), "rb").read() == files["params.json"]
    assert not os.path.islink(os.path.join(dest, "alias"))


def test_a_hub_snapshot_may_not_reach_past_its_blobs(tmp_path):
    cache = tmp_path / "hub" / "models--org--m"
    (cache / "blobs").mkdir(parents=True)
    snap = cache / "snapshots" / REV
    snap.mkdir(parents=True)
    (cache / "blobs" / "abc").write_bytes(b"{}")
    os.symlink("../../blobs/abc", snap / "params.json")
    (tmp_path / "hub" / "token").write_text("hf_x")
    os.symlink("../../../token", snap / "token.json")
    with pytest.raises(LanekitError, match="token.json -> "):
        stage(str(snap), str(tmp_path / "model"))


@pytest.mark.parametrize("dest_rel", ["nfs/../escape", "nfs/link/model"])
def test_a_destination_that_resolves_outside_the_root_is_refused(tmp_path, dest_rel):
    src = str(tmp_path / "src")
    make_source(src, n=1)
    (tmp_path / "nfs").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "nfs" / "link")
    with pytest.raises(LanekitError, match="not a directory under the weights root"):
        stage(src, str(tmp_path / dest_rel), root=str(tmp_path / "nfs"))
    assert not (tmp_path / "escape").exists() and os.listdir(tmp_path / "elsewhere") == []


def test_prune_is_refused_over_another_model_below(tmp_path):
    src, root = str(tmp_path / "src"), tmp_path / "nfs"
    make_source(src, n=1)
    root.mkdir()
    stage(src, str(root / "org" / "a"), root=str(root))
    with pytest.raises(LanekitError, match=f"{root}/org/a/MANIFEST.json below it is another staged model"):
        stage(src, str(root / "org"), root=str(root), prune=True, check_mode=True)
    with pytest.raises(LanekitError, match="prune is refused"):
        stage(src, str(root / "org"), root=str(root), prune=True)
    assert sums_ok(str(root / "org" / "a"))


def test_a_planted_state_link_is_refused_and_its_target_untouched(tmp_path):
    src, dest = str(tmp_path / "src"), tmp_path / "model"
    make_source(src, n=1)
    dest.mkdir()
    victim = tmp_path / "victim"
    (victim / "tmp").mkdir(parents=True)
    (victim / "tmp" / "keep.conf").write_text("x")
    os.symlink(victim, dest / ".lanekit")
    with pytest.raises(LanekitError, match=r"\.lanekit in the weights destination is a symlink"):
        stage(src, str(dest))
    assert os.listdir(victim / "tmp") == ["keep.conf"] and os.listdir(victim) == ["tmp"]


def test_a_directory_link_inside_the_destination_is_not_written_through(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "model"
    make_source(str(src), n=1)
    (src / "sub").mkdir()
    (src / "sub" / "passwd").write_text("replaced")
    dest.mkdir()
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    (elsewhere / "passwd").write_text("original")
    os.symlink(elsewhere, dest / "sub")
    with pytest.raises(LanekitError, match="sub in the weights destination is a symlink"):
        stage(str(src), str(dest))
    assert (elsewhere / "passwd").read_text() == "original"
    assert not os.path.exists(dest / "MANIFEST.json")


def test_a_scratch_dir_others_can_write_is_refused(tmp_path):
    src = str(tmp_path / "src")
    make_source(src, n=1)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    os.chmod(scratch, 0o777)
    with pytest.raises(LanekitError, match=rf"scratch directory \(scratch_dir\) {scratch} belongs to uid"):
        stage(src, str(tmp_path / "model"), scratch_dir=str(scratch))


@pytest.mark.parametrize("swap", ["directory", "file", "root"])
def test_a_source_part_swapped_for_a_link_after_the_walk_is_not_copied(tmp_path, monkeypatch, swap):
    # The source's owner swaps etc/ for a link to /etc between the walk and the copy (root reads):
    # each component is opened O_NOFOLLOW from the root's fd and must be the inode the walk saw.
    src, dest = tmp_path / "src", tmp_path / "model"
    make_source(str(src), n=1)
    (src / "etc").mkdir()
    (src / "etc" / "shadow").write_text("weights-ish")
    elsewhere = tmp_path / "real-etc"
    elsewhere.mkdir()
    (elsewhere / "shadow").write_text("root:$6$secret")
    walk = LocalSource.list_files

    def walk_then_swap(self):
        specs = walk(self)
        if swap == "directory":
            os.rename(src / "etc", tmp_path / "etc-was")
            os.symlink(elsewhere, src / "etc")
        elif swap == "file":
            os.unlink(src / "etc" / "shadow")
            os.link(elsewhere / "shadow", src / "etc" / "shadow")  # same name, another inode
        else:
            os.rename(src, tmp_path / "src-was")
            os.symlink(tmp_path / "src-was", src)  # the walked root itself replaced by another directory entry
            os.rename(tmp_path / "src-was" / "etc", tmp_path / "etc-was")
            os.symlink(elsewhere, tmp_path / "src-was" / "etc")
        return specs

    monkeypatch.setattr(LocalSource, "list_files", walk_then_swap)
    with pytest.raises(LanekitError) as err:
        stage(str(src), str(dest), workers=1)
    message = str(err.value)
    assert message.startswith(f"The weights source file {src}/etc/shadow changed after the source was listed")
    assert "\n" not in message
    copied = [os.path.join(root, name) for root, _dirs, names in os.walk(dest) for name in names]
    assert not any(open(path, "rb").read() == b"root:$6$secret" for path in copied)


@pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="O_DIRECT is Linux-only")
@pytest.mark.parametrize("direct_io", [True, False])
def test_direct_io_decides_how_the_copies_are_written(tmp_path, monkeypatch, direct_io):
    """weights_stage direct_io (issue #28): on by default, off writes every copy through the cache;
    either way the staged files are the source's bytes."""
    src, dest = str(tmp_path / "src"), str(tmp_path / "nfs" / "model")
    files = make_source(src, n=2)
    os.makedirs(os.path.dirname(dest))
    real, first = os.open, {}

    def spy(path, flag, *args, **kw):
        if str(path).endswith(".part"):
            first.setdefault(str(path), flag)  # a refused O_DIRECT open is retried without it
        return real(path, flag, *args, **kw)

    monkeypatch.setattr(os, "open", spy)
    stage(src, dest, direct_io=direct_io)
    assert len(first) == len(files)
    assert {bool(flag & os.O_DIRECT) for flag in first.values()} == {direct_io} and sums_ok(dest)


def test_a_node_that_writes_the_export_cannot_send_the_stagers_writes_elsewhere(tmp_path):
    """Issue 38 item 1: links planted where the stager's temporary files go (for every pid it could
    have, read from its lock) and a state directory swapped for a link leave everything outside alone."""
    src, dest = str(tmp_path / "src"), str(tmp_path / "nfs" / "model")
    make_source(src, n=2, size=4096)
    os.makedirs(dest)
    outside = tmp_path / "root-only"
    outside.mkdir()
    for name in ("SHA256SUMS", "MANIFEST.json"):
        for pid in [os.getpid()] + list(range(2, 300)):
            os.symlink(str(outside / name), os.path.join(dest, f".{name}.tmp-{pid}"))
    r = stage(src, dest)
    assert r["changed"] and sums_ok(dest)
    assert os.listdir(outside) == [], "root wrote outside the model directory through a planted link"
    for name in ("SHA256SUMS", "MANIFEST.json"):
        assert not os.path.islink(os.path.join(dest, name))
    # the lock says who holds it to the staging runs only
    assert not os.path.exists(os.path.join(dest, ".lanekit", "lock"))


def test_the_staging_lock_is_private_to_its_owner(tmp_path):
    from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_io import StageLock

    lock = StageLock(str(tmp_path / ".lanekit" / "lock"))
    lock.acquire()
    assert os.stat(lock.path).st_mode & 0o777 == 0o600
    lock.release()


def test_a_manifest_swapped_for_a_link_is_refused_not_followed(tmp_path):
    """Issue 38 item 7: MANIFEST.json linked to another file (or /dev/zero) is refused by name."""
    src, dest = str(tmp_path / "src"), str(tmp_path / "nfs" / "model")
    make_source(src, n=2, size=4096)
    os.makedirs(dest)
    stage(src, dest)
    real = os.path.join(dest, "MANIFEST.json")
    os.rename(real, str(tmp_path / "elsewhere.json"))
    os.symlink(str(tmp_path / "elsewhere.json"), real)
    from ansible_collections.lanekit.serving.plugins.module_utils._weights._manifest import load_manifest

    with pytest.raises(LanekitError, match="MANIFEST.json is a symbolic link"):
        load_manifest(real)
