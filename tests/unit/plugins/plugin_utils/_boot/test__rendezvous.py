# Copyright: lanekit developers
# Apache-2.0
"""The rendezvous directory (plugin_utils/_boot/_rendezvous.py) the lane-wide actions share between hosts."""
from __future__ import annotations

import os
import stat
import tempfile

import pytest
from ansible.errors import AnsibleError

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rendezvous import Rendezvous


def test_rendezvous_files_are_private_and_whole(tmp_path):
    rdv = Rendezvous(str(tmp_path / "rdv"))
    rdv.put_host("spark-01", {"tick": 3, "ranks": {}})
    assert rdv.get_host("spark-01") == {"tick": 3, "ranks": {}}
    assert stat.S_IMODE(os.stat(tmp_path / "rdv" / "hosts" / "spark-01.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "rdv").st_mode) == 0o700
    assert os.listdir(tmp_path / "rdv" / "hosts") == ["spark-01.json"]
    assert rdv.collect(["spark-01", "spark-02"], 3, 0.0) == {"spark-01": {"tick": 3, "ranks": {}}}


def test_the_shared_temp_base_is_made_private_or_refused(tmp_path, monkeypatch):
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(shared))
    base = shared / f"lanekit-lane-wait-{os.getuid()}"
    root = Rendezvous.default_root("task-1")
    assert os.path.dirname(root) == str(base) and stat.S_IMODE(os.stat(base).st_mode) == 0o700
    os.chmod(base, 0o777)  # as if another user had made it first, open to all
    with pytest.raises(AnsibleError, match=f"rendezvous directory {base} belongs to uid"):
        Rendezvous.default_root("task-2")


@pytest.mark.parametrize("owner", [None, 4242])
def test_a_planted_link_as_the_base_is_refused_and_nothing_is_chmod_ed_or_pruned(tmp_path, monkeypatch, owner):
    # Another local user plants $TMPDIR/lanekit-lane-wait-<uid> -> the operator's home: the home
    # keeps its mode and its old subdirectories (.ssh) are not pruned as stale meeting points.
    if owner is not None and os.geteuid() != 0:
        pytest.skip("lchown to another uid needs root")
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    os.chmod(home, 0o755)
    old = 1_000_000_000
    os.utime(home / ".ssh", (old, old))
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(shared))
    link = shared / f"lanekit-lane-wait-{os.getuid()}"
    os.symlink(home, link)
    if owner is not None:
        os.lchown(link, owner, owner)
    with pytest.raises(AnsibleError, match=f"rendezvous directory {link} is a symlink"):
        Rendezvous.default_root("task-1")
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o755 and (home / ".ssh").is_dir()
