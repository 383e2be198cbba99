# Copyright: lanekit developers
# Apache-2.0
"""Issue 23: bench_lane from an installed collection (no checkout, no `make venv-bench`) makes its pinned
tools' venv itself, once, in the user's cache, and says so; the checkout's .venv-bench keeps working.

pip and venv are faked (subprocess.run records the argv and lays out what they would): nothing is downloaded.
"""
from __future__ import annotations

import fnmatch
import os
import shutil
import sys

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.action import bench_venv as bv
from ansible_collections.lanekit.serving.plugins.module_utils._bench import _host as bhost
from ansible_collections.lanekit.serving.plugins.modules import bench_venv as bv_doc
from tests.unit.helpers.lane_fakes import action_module
from tests.unit.helpers.plans import REPO


def _executable(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("#!/bin/sh\n")
    os.chmod(path, 0o755)


class FakeTools:
    """subprocess.run for `python -m venv` and `pip install`: records argv, creates what they would."""

    def __init__(self, pip_rc=0, pip_installs=True):
        self.calls = []
        self.pip_rc = pip_rc
        self.pip_installs = pip_installs

    def __call__(self, argv, **kwargs):
        assert kwargs.get("check") is False and isinstance(argv, list)
        self.calls.append(argv)
        if argv[1:3] == ["-m", "venv"]:
            venv = argv[-1]
            shutil.rmtree(venv, ignore_errors=True)
            _executable(os.path.join(venv, "bin", "python"))
            rc, err = 0, ""
        else:
            venv = os.path.dirname(os.path.dirname(argv[0]))
            if self.pip_installs:
                for tool in ("tool-eval-bench", "llama-benchy"):
                    _executable(os.path.join(venv, "bin", tool))
            rc, err = self.pip_rc, "ERROR: Could not find a version that satisfies the requirement llama-benchy==0.4.0"
        return type("Proc", (), {"returncode": rc, "stdout": "", "stderr": err if rc else ""})()


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """An installed collection (its shipped requirements-bench.txt, no .venv-bench) and an empty user cache."""
    coll = tmp_path / "collections" / "ansible_collections" / "lanekit" / "serving"
    coll.mkdir(parents=True)
    shutil.copy(os.path.join(REPO, "requirements-bench.txt"), coll / "requirements-bench.txt")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    fake = FakeTools()
    monkeypatch.setattr(bv.subprocess, "run", fake)
    return coll, fake


def _run(coll, check_mode=False, **extra):
    args = {"requirements": str(coll / "requirements-bench.txt"), "checkout_venv": str(coll / ".venv-bench"), **extra}
    return action_module(bv.ActionModule, args, check_mode=check_mode).run(task_vars={})


def _expected_venv(tmp_path):
    with open(os.path.join(REPO, "requirements-bench.txt"), encoding="utf-8") as fh:
        digest = bhost.requirements_hash(fh.read())
    return str(tmp_path / "cache" / "lanekit" / f"bench-venv-{digest[:16]}")


def test_argument_spec_matches_the_documentation():
    documented = yaml.safe_load(bv_doc.DOCUMENTATION)["options"]
    assert set(documented) == set(bv.ARGUMENT_SPEC)
    for name, spec in bv.ARGUMENT_SPEC.items():
        assert documented[name].get("type") == spec["type"], name
        assert documented[name].get("default") == spec.get("default"), name


def test_an_installed_collection_makes_its_venv_once_in_the_user_cache_and_says_so(installed, tmp_path, capsys):
    coll, fake = installed
    before = sorted(os.listdir(coll))
    result = _run(coll)
    venv = _expected_venv(tmp_path)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] and result["venv"] == venv and result["source"] == "cache" and result["ready"]
    assert result["wheel_cache"] == str(tmp_path / "cache" / "lanekit" / "bench-wheels")
    requirements = str(coll / "requirements-bench.txt")
    assert fake.calls == [[sys.executable, "-m", "venv", "--clear", venv],
                          [f"{venv}/bin/python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           "-r", requirements]]
    out = capsys.readouterr().out
    assert f"bench: making the bench tools' virtualenv {venv} (first use" in out and requirements in out
    assert sorted(os.listdir(coll)) == before  # nothing written into the installed collection
    # The second run finds it complete: no venv, no pip, no change.
    again = _run(coll)
    assert not again["changed"] and again["venv"] == venv and len(fake.calls) == 2


def test_an_interrupted_install_is_made_again_and_a_failed_pip_says_what_to_fix(installed, tmp_path):
    coll, fake = installed
    venv = _expected_venv(tmp_path)
    _executable(os.path.join(venv, "bin", "python"))  # a venv from an interrupted first run: no marker
    fake.pip_rc, fake.pip_installs = 1, False
    result = _run(coll)
    assert result["failed"] and fake.calls[0][1:4] == ["-m", "venv", "--clear"]
    assert result["msg"].startswith(f"pip install -r {coll}/requirements-bench.txt into the bench virtualenv {venv} "
                                    "failed (ERROR: Could not find a version")
    assert not os.path.exists(os.path.join(venv, bv.bvenv.MARKER))
    fake.pip_rc, fake.pip_installs = 0, True
    assert _run(coll)["changed"] and os.path.isfile(os.path.join(venv, bv.bvenv.MARKER))


def test_the_checkout_venv_made_by_make_venv_bench_is_used_as_before(installed):
    coll, fake = installed
    for tool in ("python", "tool-eval-bench", "llama-benchy"):
        _executable(str(coll / ".venv-bench" / "bin" / tool))
    result = _run(coll)
    assert not result["changed"] and result["source"] == "checkout" and result["venv"] == str(coll / ".venv-bench")
    assert result["wheel_cache"] == str(coll / ".cache" / "bench-wheels")
    assert fake.calls == []


def test_a_named_venv_is_used_as_it_is_and_refused_without_the_tools(installed, tmp_path):
    coll, fake = installed
    result = _run(coll, venv=str(tmp_path / "mine"))
    assert result["failed"] and fake.calls == []
    assert result["msg"] == (f"The bench virtualenv {tmp_path}/mine lacks tool-eval-bench, llama-benchy, python: install "
                             f"the pinned tools into it ({tmp_path}/mine/bin/python -m pip install -r "
                             f"{coll}/requirements-bench.txt), or leave bench_venv unset and the bench makes its own "
                             "on first use.")


def test_check_mode_and_create_false_make_nothing(installed, tmp_path):
    coll, fake = installed
    checked = _run(coll, check_mode=True)
    assert checked["changed"] and not checked["ready"] and checked["msg"].startswith("Check mode:")
    found = _run(coll, create=False)
    assert not found["changed"] and not found["ready"] and found["venv"] == _expected_venv(tmp_path)
    assert fake.calls == [] and not (tmp_path / "cache").exists()


def test_no_ensurepip_names_the_package_to_install(installed, tmp_path, monkeypatch):
    coll, _fake = installed

    def no_ensurepip(argv, **kwargs):
        return type("Proc", (), {"returncode": 1, "stdout": "", "stderr": "Error: Command '['x', '-m', 'ensurepip', "
                                 "'--upgrade', '--default-pip']' returned non-zero exit status 1."})()

    monkeypatch.setattr(bv.subprocess, "run", no_ensurepip)
    result = _run(coll, python="/usr/bin/python3")
    assert result["msg"] == (f"/usr/bin/python3 cannot create the bench virtualenv {_expected_venv(tmp_path)} with pip "
                             "(no ensurepip): install python3-venv (Debian, Ubuntu) for that Python, or set bench_venv "
                             "to a virtualenv that has requirements-bench.txt installed.")


def test_the_pinned_requirements_ship_and_the_role_finds_them_from_its_own_path():
    with open(os.path.join(REPO, "galaxy.yml"), encoding="utf-8") as fh:
        ignored = yaml.safe_load(fh)["build_ignore"]
    assert not [p for p in ignored if fnmatch.fnmatch("requirements-bench.txt", p)]
    with open(os.path.join(REPO, "roles", "bench", "defaults", "main.yml"), encoding="utf-8") as fh:
        defaults = yaml.safe_load(fh)
    # From role_path, not playbook_dir: a user's own playbook including the role finds them too.
    assert defaults["bench_requirements"] == "{{ role_path | dirname | dirname }}/requirements-bench.txt"
    assert defaults["bench_venv"] == "" and defaults["bench_wheel_cache"] == ""


@pytest.mark.parametrize("xdg, expected", [("/x/cache", "/x/cache/lanekit"), ("", "/home/u/.cache/lanekit"),
                                           ("relative", "/home/u/.cache/lanekit")])
def test_cache_root_follows_xdg(xdg, expected):
    assert bv.bvenv.cache_root({"XDG_CACHE_HOME": xdg}, "/home/u") == expected


def test_the_bench_role_finds_or_makes_the_venv_before_anything_uses_it():
    with open(os.path.join(REPO, "roles", "bench", "tasks", "main.yml"), encoding="utf-8") as fh:
        tasks = yaml.safe_load(fh)
    modules = [next(k for k in task if k.startswith(("lanekit.", "ansible."))) for task in tasks]
    first = modules.index("lanekit.serving.bench_venv")
    made = tasks[first]
    assert made["register"] == "bench_controller" and made["run_once"]
    assert made["lanekit.serving.bench_venv"]["checkout_venv"] == "{{ role_path | dirname | dirname }}/.venv-bench"
    for name, key in (("lanekit.serving.bench_host_venv", "controller_python"), ("lanekit.serving.bench_run", "venv"),
                      ("lanekit.serving.bench_report", "venv")):
        users = [i for i, module in enumerate(modules) if module == name and key in tasks[i][name]]
        assert users and all(i > first for i in users), name
        assert all("bench_controller.venv" in tasks[i][name][key] for i in users), name


def test_a_second_first_run_waits_for_the_first_and_reuses_its_venv(installed, tmp_path, monkeypatch):
    coll, fake = installed
    venv = _expected_venv(tmp_path)

    def other_run_finishes_while_we_wait(_fh, _op):
        for tool in ("python", "tool-eval-bench", "llama-benchy"):
            _executable(os.path.join(venv, "bin", tool))
        with open(os.path.join(coll, "requirements-bench.txt"), encoding="utf-8") as fh:
            digest = bhost.requirements_hash(fh.read())
        with open(os.path.join(venv, bv.bvenv.MARKER), "w", encoding="utf-8") as fh:
            fh.write(bv.bvenv.marker_text(digest))

    monkeypatch.setattr(bv.fcntl, "flock", other_run_finishes_while_we_wait)
    result = _run(coll)
    assert not result["changed"] and result["venv"] == venv and fake.calls == []
    assert result["msg"] == f"bench tools from {venv} (made by another run meanwhile)."
