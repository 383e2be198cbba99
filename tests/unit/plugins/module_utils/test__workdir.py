"""Private work directories (module_utils/_workdir.py): made 0700, or refused when another user
owns them or can write to them or to a directory above them."""
from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._workdir import private_dir

OTHER_UID = 4242
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


def mode_of(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_missing_directories_are_made_private(tmp_path):
    made = private_dir(str(tmp_path / "lanekit" / "images"))
    assert made == os.path.realpath(tmp_path / "lanekit" / "images")
    assert mode_of(made) == 0o700 and mode_of(tmp_path / "lanekit") == 0o700
    assert os.lstat(made).st_uid == os.geteuid()


def test_an_own_readable_directory_is_tightened_and_kept(tmp_path):
    work = tmp_path / "work"
    work.mkdir(mode=0o755)
    (work / "keep").write_text("x")
    assert private_dir(str(work)) == str(work) and mode_of(work) == 0o700
    assert (work / "keep").read_text() == "x"


@pytest.mark.parametrize("perm", [0o777, 0o770, 0o1777, 0o722])
def test_a_directory_others_can_write_is_refused(tmp_path, perm):
    work = tmp_path / "work"
    work.mkdir()
    os.chmod(work, perm)
    with pytest.raises(LanekitError, match=rf"{work} belongs to uid \d+ with mode {perm:04o}"):
        private_dir(str(work), what="spool directory")
    assert mode_of(work) == perm  # refused, not silently repaired


@root_only
def test_a_directory_of_another_user_is_refused(tmp_path):
    work = tmp_path / "work"
    work.mkdir(mode=0o700)
    os.chown(work, OTHER_UID, OTHER_UID)
    with pytest.raises(LanekitError, match=f"belongs to uid {OTHER_UID}"):
        private_dir(str(work))


@root_only
def test_a_parent_another_user_owns_is_refused(tmp_path):
    parent = tmp_path / "home-of-someone"
    parent.mkdir(mode=0o755)
    os.chown(parent, OTHER_UID, OTHER_UID)
    with pytest.raises(LanekitError, match=f"above it, {parent}, belongs to uid {OTHER_UID}"):
        private_dir(str(parent / "work"))
    assert not (parent / "work").exists()


def test_a_group_writable_parent_without_sticky_bit_is_refused(tmp_path):
    parent = tmp_path / "shared"
    parent.mkdir()
    os.chmod(parent, 0o775)
    with pytest.raises(LanekitError, match="directory above it"):
        private_dir(str(parent / "work"))
    os.chmod(parent, 0o1777)  # sticky like /tmp: others cannot rename our directory away
    assert mode_of(private_dir(str(parent / "work"))) == 0o700


def test_a_symlink_planted_in_a_sticky_directory_is_not_followed_to_another_owner(tmp_path):
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir()
    os.chmod(elsewhere, 0o777)
    os.symlink(elsewhere, shared / "lanekit")
    with pytest.raises(LanekitError, match="mode 0777"):
        private_dir(str(shared / "lanekit"))


def test_check_mode_creates_and_changes_nothing(tmp_path):
    assert private_dir(str(tmp_path / "absent"), create=False) == str(tmp_path / "absent")
    assert not (tmp_path / "absent").exists()
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o755)
    private_dir(str(loose), create=False)
    assert mode_of(loose) == 0o755
    os.chmod(loose, 0o777)
    with pytest.raises(LanekitError):
        private_dir(str(loose), create=False)


def test_a_relative_path_is_a_sentence():
    with pytest.raises(LanekitError, match="absolute"):
        private_dir("var/tmp/lanekit")
