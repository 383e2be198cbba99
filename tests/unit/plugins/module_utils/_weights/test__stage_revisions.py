# Copyright: lanekit developers
# Apache-2.0
"""Per-revision staging (module_utils/_weights/_stage_revisions.py through weights_stage.stage): one directory per
revision, an atomic ``current`` switch, a failed stage that changes nothing, migration of a flat
directory by hard links, and removal of only the revisions nothing reads."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._weights import _stage_revisions as revs
from ansible_collections.lanekit.serving.plugins.modules import weights_stage

REV_A = "a" * 40
REV_B = "b" * 40
REV_C = "c" * 40


def source(tmp_path: Path, name: str, seed: int) -> Path:
    src = tmp_path / name
    src.mkdir()
    (src / "params.json").write_text(json.dumps({"seed": seed}))
    (src / "model-00001.safetensors").write_bytes(bytes([seed]) * (1 << 20))
    (src / "model-00002.safetensors").write_bytes(bytes([seed + 1]) * (1 << 19))
    return src


def params(dest: str, src: Path, revision: str | None, root: Path, **more) -> dict:
    spec = weights_stage.argument_spec()
    p = {k: v.get("default") for k, v in spec.items()}
    p.update(dest=dest, source="local", local_path=str(src), revision=revision, model_id="org/m", root=str(root),
             allow_patterns=None, ignore_patterns=None, release_written_pages=False)
    p.update(more)
    return p


def stage(dest, src, revision, root, check=False, **more):
    return weights_stage.stage(params(dest, src, revision, root, **more), check, lambda msg: None)


def inodes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in directory.iterdir() if p.is_file()}


@pytest.fixture()
def layout(tmp_path):
    root = tmp_path / "nfs"
    root.mkdir()
    model = root / "org" / "m"
    return root, model


def test_paths_and_keys():
    assert revs.revision_path("/nfs/org/m/", REV_A) == f"/nfs/org/m/.revisions/{REV_A}"
    assert revs.revision_path("/nfs/org/m", None) == "/nfs/org/m/.revisions/unpinned"
    assert revs.split_revision_path(f"/nfs/org/m/.revisions/{REV_A}/") == ("/nfs/org/m", REV_A)
    assert revs.split_revision_path("/nfs/org/m") is None
    for bad in ("../x", "a/b", "unpinned", ".hidden"):
        with pytest.raises(LanekitError, match="cannot name a revision directory"):
            revs.revision_key(bad)


def test_a_new_revision_goes_to_its_own_directory_and_current_switches(tmp_path, layout):
    root, model = layout
    ra, rb = revs.revision_path(str(model), REV_A), revs.revision_path(str(model), REV_B)
    first = stage(ra, source(tmp_path, "a", 1), REV_A, root)
    assert first["changed"] and first["revisions"]["current"] == REV_A and first["revisions"]["previous"] is None
    assert os.readlink(model / "current") == f".revisions/{REV_A}"
    before = inodes(Path(ra))
    content = (Path(ra) / "model-00001.safetensors").read_bytes()

    second = stage(rb, source(tmp_path, "b", 7), REV_B, root)
    assert second["files_fetched"] == 3 and second["revisions"] == {
        "model_dir": str(model), "current": REV_B, "previous": REV_A, "migrated_files": [],
        "removed_revisions": [], "removed_legacy_files": []}
    assert os.readlink(model / "current") == f".revisions/{REV_B}"
    # the running lane's revision: not a file replaced, not a byte changed
    assert inodes(Path(ra)) == before and (Path(ra) / "model-00001.safetensors").read_bytes() == content

    again = stage(rb, tmp_path / "b", REV_B, root)
    assert not again["changed"]


def test_a_failed_stage_leaves_current_and_the_previous_revision_intact(tmp_path, layout):
    root, model = layout
    ra, rb = revs.revision_path(str(model), REV_A), revs.revision_path(str(model), REV_B)
    stage(ra, source(tmp_path, "a", 1), REV_A, root)
    before = inodes(Path(ra))
    bad = source(tmp_path, "b", 7)
    # the source vouches for a digest its file does not have: the copy fails verification
    (bad / "SHA256SUMS").write_text("0" * 64 + "  model-00001.safetensors\n")
    with pytest.raises(LanekitError):
        stage(rb, bad, REV_B, root)
    assert os.readlink(model / "current") == f".revisions/{REV_A}"
    assert inodes(Path(ra)) == before
    assert not (Path(rb) / "MANIFEST.json").exists(), "an incomplete revision carries no manifest"


def test_a_flat_staged_directory_migrates_by_hard_links_without_copying(tmp_path, layout):
    root, model = layout
    src = source(tmp_path, "a", 1)
    flat = stage(str(model), src, None, root)  # the layout before revisions
    assert flat["files_fetched"] == 3 and "revisions" not in flat
    rev = revs.revision_path(str(model), None)

    check = stage(rev, src, None, root, check=True)
    assert check["would_fetch_bytes"] == 0 and sorted(check["revisions"]["migrated_files"]) == sorted(
        ["params.json", "model-00001.safetensors", "model-00002.safetensors"])
    assert not os.path.exists(model / ".revisions") and not os.path.lexists(model / "current")

    migrated = stage(rev, src, None, root)
    assert migrated["files_fetched"] == 0 and migrated["bytes_hashed"] == 0, "the journal vouches for the links"
    assert migrated["revisions"]["current"] == "unpinned"
    for name in ("model-00001.safetensors", "params.json"):
        assert os.stat(Path(rev) / name).st_ino == os.stat(model / name).st_ino
    # the flat names stay while a rank may still read them (unknown here: in_use unset)
    assert (model / "MANIFEST.json").exists()

    # once nothing reads the model directory itself, the flat names go; the revision keeps the bytes
    gc = stage(rev, src, None, root, in_use=[rev])
    assert sorted(gc["revisions"]["removed_legacy_files"]) == sorted(migrated["revisions"]["migrated_files"])
    assert not (model / "model-00001.safetensors").exists() and not (model / "MANIFEST.json").exists()
    assert (Path(rev) / "model-00001.safetensors").stat().st_nlink == 1


def test_only_revisions_nothing_reads_are_removed(tmp_path, layout):
    root, model = layout
    paths = {r: revs.revision_path(str(model), r) for r in (REV_A, REV_B, REV_C)}
    for seed, rev in enumerate((REV_A, REV_B), start=1):
        stage(paths[rev], source(tmp_path, rev[:1], seed), rev, root)
    # unknown readers: nothing is removed
    r = stage(paths[REV_C], source(tmp_path, "c", 9), REV_C, root)
    assert r["revisions"]["removed_revisions"] == [] and os.path.isdir(paths[REV_A])
    # A is read by a rank: kept; then nothing reads it and it is neither current (C) nor previous (C)
    r = stage(paths[REV_C], tmp_path / "c", REV_C, root, in_use=[paths[REV_A]])
    assert r["revisions"]["removed_revisions"] == [REV_B]
    # a revision being staged (its staging lock present) is never removed
    busy = Path(paths[REV_A]) / ".lanekit" / "lock"
    busy.write_text("{}")
    r = stage(paths[REV_C], tmp_path / "c", REV_C, root, in_use=[])
    assert r["revisions"]["removed_revisions"] == [] and os.path.isdir(paths[REV_A])
    busy.unlink()
    r = stage(paths[REV_C], tmp_path / "c", REV_C, root, in_use=[], check=True)
    assert r["revisions"]["removed_revisions"] == [REV_A] and os.path.isdir(paths[REV_A])
    r = stage(paths[REV_C], tmp_path / "c", REV_C, root, in_use=[])
    assert r["revisions"]["removed_revisions"] == [REV_A] and not os.path.exists(paths[REV_A])
    assert sorted(os.listdir(model / ".revisions")) == [REV_C]


def test_a_path_of_another_revision_and_a_foreign_current_are_refused(tmp_path, layout):
    root, model = layout
    src = source(tmp_path, "a", 1)
    with pytest.raises(LanekitError, match="names revision .* but the lane pins"):
        stage(revs.revision_path(str(model), REV_B), src, REV_A, root)
    (model / "current").mkdir(parents=True)
    with pytest.raises(LanekitError, match="is not a symlink"):
        stage(revs.revision_path(str(model), REV_A), src, REV_A, root)
    os.rmdir(model / "current")
    os.symlink("/etc", model / ".revisions")
    with pytest.raises(LanekitError, match="is a symlink"):
        stage(revs.revision_path(str(model), REV_A), src, REV_A, root)
    assert not os.path.lexists(model / "current")


# -- whoever can write the model directory cannot turn the garbage collection into a deletion elsewhere --
def test_a_flat_manifest_naming_a_file_outside_is_refused_and_the_file_kept(tmp_path, layout):
    root, model = layout
    model.mkdir(parents=True)
    outside = tmp_path / "x"
    outside.write_text("not weights")
    rel = os.path.relpath(outside, model)  # ../../../x
    (model / "MANIFEST.json").write_text(json.dumps({"files": [{"path": rel, "size": 1}]}))
    rev = revs.revision_path(str(model), None)
    with pytest.raises(LanekitError, match=rf"The manifest {model / 'MANIFEST.json'} lists files\[0\]\.path '{rel}'"):
        stage(rev, source(tmp_path, "a", 1), None, root, in_use=[rev])
    with pytest.raises(LanekitError, match=r"files\[0\]\.path"):
        revs.collect_garbage(str(model), set(), in_use=[])
    assert outside.read_text() == "not weights"


def test_garbage_collection_deletes_through_directory_fds_and_never_follows_a_link(tmp_path, layout):
    root, model = layout
    (model / ".revisions" / "old" / "sub").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    (outside / "sub").mkdir(parents=True)
    for victim in (outside / "f", outside / "sub" / "f"):
        victim.write_text("keep")
    # a flat manifest whose entry is reached through a directory link planted in D
    os.symlink(outside, model / "sub")
    (model / "MANIFEST.json").write_text(json.dumps({"files": [{"path": "sub/f", "size": 4}]}))
    # and an old revision holding links to the outside, as files and as a directory
    os.symlink(outside / "f", model / ".revisions" / "old" / "f")
    os.symlink(outside / "sub", model / ".revisions" / "old" / "sub" / "d")
    removed, legacy = revs.collect_garbage(str(model), set(), in_use=[])
    assert removed == ["old"] and legacy == []
    assert not os.path.lexists(model / ".revisions" / "old")
    assert (outside / "f").read_text() == "keep" and (outside / "sub" / "f").read_text() == "keep"
    assert not (model / "MANIFEST.json").exists() and os.path.islink(model / "sub")
