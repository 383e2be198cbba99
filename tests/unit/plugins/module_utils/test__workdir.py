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
    assert made == str(tmp_path / "lanekit" / "images")
    assert mode_of(made) == 0o700 and mode_of(tmp_path / "lanekit") == 0o700
    assert os.lstat(made).st_uid == os.geteuid()


def test_an_own_readable_directory_is_used_and_its_mode_left_alone(tmp_path):
    # lanekit chmods only what it made: a chmod of a directory it found could land on someone's /etc.
    work = tmp_path / "work"
    work.mkdir(mode=0o755)
    (work / "keep").write_text("x")
    assert private_dir(str(work)) == str(work) and mode_of(work) == 0o755
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


def plant(shared, name, target, owner=None):
    """A link ``shared/name -> target`` in a sticky /tmp-like directory, owned by ``owner``."""
    link = shared / name
    os.symlink(target, link)
    if owner is not None:
        os.lchown(link, owner, owner)
    return link


@pytest.fixture
def sticky(tmp_path):
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    return shared


@pytest.fixture
def victim(tmp_path):
    """The operator's own directory (a fake home): 0755 with a .ssh inside, like the reproduction."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("key")
    os.chmod(home, 0o755)
    return home


@pytest.mark.parametrize("owner", [None, OTHER_UID])
def test_a_symlink_planted_as_the_work_directory_is_refused_and_its_target_untouched(sticky, victim, owner):
    if owner is not None and os.geteuid() != 0:
        pytest.skip("lchown to another uid needs root")
    link = plant(sticky, "lanekit", victim, owner)
    with pytest.raises(LanekitError, match=rf"The work directory {link} is a symlink \(to {victim}, owned by uid \d+\)"):
        private_dir(str(link))
    assert mode_of(victim) == 0o755 and (victim / ".ssh" / "id_ed25519").exists()


def test_a_symlink_planted_to_a_directory_open_to_all_is_refused(sticky, tmp_path):
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir()
    os.chmod(elsewhere, 0o777)
    with pytest.raises(LanekitError, match="is a symlink"):
        private_dir(str(plant(sticky, "lanekit", elsewhere)))
    assert mode_of(elsewhere) == 0o777


@root_only
def test_a_parent_symlink_of_another_user_is_refused_before_anything_is_made(sticky, victim):
    link = plant(sticky, "lanekit", victim, OTHER_UID)
    with pytest.raises(LanekitError, match=rf"{link} is a symlink owned by uid {OTHER_UID}"):
        private_dir(str(link / "images"))
    assert not (victim / "images").exists() and mode_of(victim) == 0o755


def test_a_parent_symlink_of_root_or_this_user_is_followed_and_its_target_checked(tmp_path):
    # A system link such as /var -> /private/var on macOS; the result names the real directory.
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    os.symlink(real, tmp_path / "var")
    made = private_dir(str(tmp_path / "var" / "work"))
    assert made == str(real / "work") and mode_of(made) == 0o700
    os.chmod(real, 0o777)  # the target is checked like any parent
    with pytest.raises(LanekitError, match=rf"the directory above it, {real}, belongs to uid \d+ with mode 0777"):
        private_dir(str(tmp_path / "var" / "other"))
    assert not (real / "other").exists()


def test_dot_dot_is_refused():
    with pytest.raises(LanekitError, match=r"contains '\.\.'"):
        private_dir("/var/tmp/../etc/lanekit")


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
