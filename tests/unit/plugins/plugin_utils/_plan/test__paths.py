"""Issue 38 (item 11): lanes/ and images/ are read only when no other user can change them (_plan/_paths.py):
a lanes folder, a lane file or an image spec that another user owns or may write is refused, with the path
and the fix, before anything is planned from it."""
from __future__ import annotations

import os
import shutil

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._paths import check_not_shared, find_spec_dir
from tests.unit.helpers.plans import IMAGES, LANES, VLLM, plan

NOBODY = 65534
# A group that is nobody's private group (no user is named so): group-writable is then writable by others.
SHARED_GID = 64999


def _team(tmp_path):
    """A team's working directory with its own copy of lanes/ and images/, as the operator's own."""
    team = tmp_path / "team"
    team.mkdir()
    shutil.copytree(LANES, team / "lanes")
    shutil.copytree(IMAGES, team / "images")
    for root, dirs, files in os.walk(team):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    return team


def _plan_from(team):
    return plan(VLLM, lanes_dir=find_spec_dir("lanes", None, None, str(team), "/nonexistent"),
                images_dir=find_spec_dir("images", None, None, str(team), "/nonexistent"))


def test_a_team_folder_of_ones_own_is_planned(tmp_path):
    built, findings = _plan_from(_team(tmp_path))
    assert built is not None and findings["errors"] == []


@pytest.mark.parametrize("part, label", [("lanes", "the lanes folder"), ("images", "the images folder"),
                                         (f"lanes/{VLLM}.yml", "the lane file"),
                                         ("images/mistral-large4-vllm", "the lane's image spec folder"),
                                         ("images/mistral-large4-vllm/image.yml", "the lane's image spec")])
def test_a_part_others_can_write_is_refused_with_the_path_and_chmod(tmp_path, part, label):
    team = _team(tmp_path)
    path = team / part
    path.chmod(0o757 if path.is_dir() else 0o646)
    with pytest.raises(LanekitError) as refused:
        _plan_from(team)
    assert str(refused.value).startswith(f"{path} ({label}) is writable by other users (mode 0")
    assert f"run chmod go-w {path}, then run again." in str(refused.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user or group needs root")
def test_a_folder_of_another_user_or_writable_by_a_shared_group_is_refused(tmp_path):
    team = _team(tmp_path)
    os.chown(team / "lanes", NOBODY, -1)
    with pytest.raises(LanekitError, match=r"the lanes folder\): it belongs to user .*, neither you .* nor root.*"
                                           r"run chown "):
        _plan_from(team)
    os.chown(team / "lanes", 0, SHARED_GID)
    (team / "lanes").chmod(0o775)
    with pytest.raises(LanekitError, match=r"is writable by other users \(mode 0775, group gid 64999\)"):
        _plan_from(team)
    # A link to the operator's own folder is followed; a link another user planted is not.
    link = tmp_path / "link-lanes"
    os.symlink(LANES, link)
    os.lchown(link, NOBODY, -1)
    with pytest.raises(LanekitError, match="the link belongs to user"):
        check_not_shared(str(link), "the lanes folder")


def test_a_user_private_group_may_write_its_owners_folder(tmp_path, monkeypatch):
    """Debian and Ubuntu give each user a group of their own and umask 002, so a checkout is 0775 there."""
    import grp
    import pwd
    team = _team(tmp_path)
    (team / "lanes").chmod(0o775)
    me = os.geteuid()
    gid = os.stat(team / "lanes").st_gid
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: pwd.struct_passwd(("alice", "x", uid, gid, "", "/", "/bin/sh")))
    monkeypatch.setattr(grp, "getgrgid", lambda g: grp.struct_group(("alice", "x", g, [])))
    check_not_shared(str(team / "lanes"), "the lanes folder")
    monkeypatch.setattr(grp, "getgrgid", lambda g: grp.struct_group(("alice", "x", g, ["bob"])))
    with pytest.raises(LanekitError, match="writable by other users"):
        check_not_shared(str(team / "lanes"), "the lanes folder")
    assert me == os.geteuid()


# Issue 37, item 5: where the lane came from.

def test_the_users_repository_is_found_from_the_working_directory_or_above_the_inventory(tmp_path):
    from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._paths import reports_root, user_root

    repo = tmp_path / "repo"
    (repo / "lanes").mkdir(parents=True)
    (repo / "inventories" / "x").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert user_root(str(repo), []) == str(repo)
    assert user_root(str(repo / "inventories"), [str(repo / "inventories" / "x")]) == str(repo)
    assert user_root(str(elsewhere), []) is None
    assert reports_root(None, "/opt/ansible_collections/lanekit/serving/playbooks", str(repo / "inventories"),
                        str(repo)) == str(repo / "reports")


def test_a_lane_the_users_folder_lacks_falls_back_to_the_collections_copy_and_none_names_both(tmp_path):
    from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane
    from tests.unit.helpers.plans import IMAGES, LANES, VLLM, spark8_hosts

    mine = tmp_path / "lanes"
    mine.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(mine, 0o755)
    plan, _findings = plan_lane([str(mine), LANES], [str(tmp_path / "images"), IMAGES], VLLM, spark8_hosts())
    assert plan is not None and plan["lane"] == VLLM
    with pytest.raises(LanekitError) as err:
        plan_lane([str(mine), LANES], [IMAGES], "no-such-lane", spark8_hosts())
    text = str(err.value)
    assert f"{mine}/no-such-lane.yml" in text and f"{LANES}/no-such-lane.yml" in text and VLLM in text
