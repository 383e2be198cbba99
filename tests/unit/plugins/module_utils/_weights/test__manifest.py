"""Manifest build/diff, SHA256SUMS and the journal (pure, stat-only logic)."""
from __future__ import annotations

import hashlib
import json
import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._weights import _manifest as m


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(path, data: bytes):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
    return os.stat(path)


def test_manifest_is_deterministic_and_sorted():
    entries = [{"path": "b.safetensors", "size": 3, "sha256": sha(b"bbb")},
               {"path": "a.json", "size": 1, "sha256": sha(b"a")}]
    one = m.dumps_manifest(m.build_manifest("org/x", "f" * 40, {"kind": "local"}, entries))
    two = m.dumps_manifest(m.build_manifest("org/x", "f" * 40, {"kind": "local"}, list(reversed(entries))))
    assert one == two
    doc = json.loads(one)
    assert [f["path"] for f in doc["files"]] == ["a.json", "b.safetensors"]
    assert doc["bytes_total"] == 4 and doc["files_total"] == 2
    assert doc["files_digest"] == m.files_digest(entries)


def test_manifest_refuses_entry_without_sha():
    with pytest.raises(LanekitError, match="without its sha256"):
        m.build_manifest("x", None, {}, [{"path": "a", "size": 1, "sha256": None}])


def test_sums_round_trip_matches_sha256sum_format():
    man = m.build_manifest("x", None, {}, [{"path": "dir/a b.bin", "size": 1, "sha256": sha(b"a")}])
    text = m.render_sums(man).decode()
    assert text == f"{sha(b'a')}  dir/a b.bin\n"
    assert m.parse_sums(text) == {"dir/a b.bin": sha(b"a")}
    assert m.parse_sums(f"{sha(b'q')} *bin.x\n") == {"bin.x": sha(b"q")}
    with pytest.raises(LanekitError, match="line 1"):
        m.parse_sums("nonsense\n")


@pytest.mark.parametrize("bad", ["/abs", "../up", "a/../b", "a//b", ".lanekit/x", "MANIFEST.json", ""])
def test_relpath_checks(bad):
    with pytest.raises(LanekitError):
        m.check_relpath(bad)


def test_is_commit():
    assert m.is_commit("0123456789abcdef0123456789abcdef01234567")
    for bad in ("main", "v1.0", "0123456", "0123456789ABCDEF0123456789ABCDEF01234567", None):
        assert not m.is_commit(bad)


def test_journal_last_entry_wins_and_torn_line_is_ignored(tmp_path):
    j = m.Journal(str(tmp_path / ".lanekit" / "journal.jsonl"))
    st = write(str(tmp_path / "a"), b"abc")
    j.record("a", 3, sha(b"zzz"), st, "r")
    j.record("a", 3, sha(b"abc"), st, "r")
    j.record("b", 1, sha(b"b"), st, "r")
    j.forget("b")
    j.close()
    with open(j.path, "ab") as fh:
        fh.write(b'{"path": "c", "size": 1, "sha2')  # killed mid-append
    j2 = m.Journal(j.path).load()
    assert set(j2.entries) == {"a"}
    assert j2.get("a")["sha256"] == sha(b"abc")
    assert j2.torn_lines == 1
    j2.compact(["a"])
    with open(j.path) as fh:
        assert len(fh.read().splitlines()) == 1


def _specs(tmp_path, files):
    return [m.FileSpec(p, len(d), sha256=sha(d)) for p, d in files.items()]


def test_plan_diff_classifies_every_case(tmp_path):
    dest = str(tmp_path / "w")
    files = {"ok.bin": b"ok", "missing.bin": b"mm", "short.bin": b"long", "link.bin": b"ll",
             "unjournaled.bin": b"uu", "stale.bin": b"ss", "badsha.bin": b"bb"}
    j = m.Journal(os.path.join(dest, ".lanekit", "journal.jsonl"))
    for name in ("ok.bin", "unjournaled.bin", "stale.bin", "badsha.bin"):
        write(os.path.join(dest, name), files[name])
    write(os.path.join(dest, "short.bin"), b"lo")
    os.symlink(os.path.join(dest, "ok.bin"), os.path.join(dest, "link.bin"))
    j.record("ok.bin", 2, sha(b"ok"), os.stat(os.path.join(dest, "ok.bin")), "r")
    st = os.stat(os.path.join(dest, "stale.bin"))
    j.record("stale.bin", 2, sha(b"ss"), st, "r")
    os.utime(os.path.join(dest, "stale.bin"), ns=(st.st_atime_ns, st.st_mtime_ns + 5))
    j.record("badsha.bin", 2, sha(b"other"), os.stat(os.path.join(dest, "badsha.bin")), "r")
    plans = {p.spec.path: p for p in m.plan_files(_specs(tmp_path, files), dest, j)}
    assert plans["ok.bin"].action == "ok"
    assert plans["missing.bin"].action == "fetch" and plans["missing.bin"].reason == "missing"
    assert plans["short.bin"].action == "fetch" and "size 2" in plans["short.bin"].reason
    assert plans["link.bin"].action == "fetch" and "symlink" in plans["link.bin"].reason
    assert plans["unjournaled.bin"].action == "hash"
    assert plans["stale.bin"].action == "hash"
    assert plans["badsha.bin"].action == "fetch"
    full = {p.spec.path: p.action for p in m.plan_files(_specs(tmp_path, files), dest, j, verify="full")}
    assert full["ok.bin"] == "hash" and full["missing.bin"] == "fetch"


def test_plan_uses_previous_manifest_for_sources_without_digests(tmp_path):
    dest = str(tmp_path / "w")
    write(os.path.join(dest, "a.bin"), b"aa")
    old = m.build_manifest("x", "r", {}, [{"path": "a.bin", "size": 2, "sha256": sha(b"aa")}])
    j = m.Journal(os.path.join(dest, ".lanekit", "journal.jsonl"))
    plan = m.plan_files([m.FileSpec("a.bin", 2)], dest, j, old)[0]
    assert plan.action == "hash" and plan.expected_sha256 == sha(b"aa")
    # another size: the old digest says nothing about the new content
    plan = m.plan_files([m.FileSpec("a.bin", 3)], dest, j, old)[0]
    assert plan.action == "fetch" and plan.expected_sha256 is None


def test_extra_files_ignores_own_names(tmp_path):
    dest = str(tmp_path / "w")
    for name in ("a.bin", "config.json", "sub/b.bin", "MANIFEST.json", "SHA256SUMS", ".lanekit/journal.jsonl"):
        write(os.path.join(dest, name), b"x")
    assert m.extra_files(dest, ["a.bin", "sub/b.bin"]) == ["config.json"]


def test_journal_appends_never_follow_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / ".lanekit").mkdir()
    os.symlink(victim, tmp_path / ".lanekit" / "journal.jsonl")
    journal = m.Journal(str(tmp_path / ".lanekit" / "journal.jsonl"))
    with pytest.raises(OSError):
        journal.record("a", 1, "0" * 64, os.stat(victim), None)
    assert victim.read_text() == "keep\n"


@pytest.mark.parametrize("doc", [
    {"files": [{"path": "../../../etc/x", "size": 1}]},  # the flat, pre-revision manifest
    {"schema": "lanekit.weights.manifest/1", "files": [{"path": "a", "size": 1}, {"path": "/etc/x", "size": 1}]},
    {"schema": "lanekit.weights.manifest/1", "files": [{"path": "a//b", "size": 1}]},
    {"files": [{"path": "a/\u0000b", "size": 1}]},
    {"files": [{"path": "", "size": 1}]},
])
def test_every_manifest_version_is_refused_when_a_path_leaves_its_directory(tmp_path, doc):
    path = tmp_path / "MANIFEST.json"
    path.write_text(json.dumps(doc))
    index = len(doc["files"]) - 1
    with pytest.raises(LanekitError, match=rf"The manifest {path} lists files\[{index}\]\.path .* nothing is linked or "
                                           r"deleted by it: remove that manifest"):
        m.load_manifest(str(path))
