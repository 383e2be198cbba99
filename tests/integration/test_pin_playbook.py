"""Issue 23: ansible-playbook lanekit.serving.pin writes the upstream digest into the image spec, only when it
differs, keeps the comments, and with --check --diff shows the change and writes nothing.

The registry is a stub `docker` on PATH that prints a canned manifest list (no docker is run)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.unit.helpers.plans import REPO

PLAYBOOK = os.path.join(REPO, "playbooks", "pin.yml")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
LANE = "tiny-llama-cpu-2x-vllm"
IMAGE = "tiny-llama-cpu-vllm"
AMD = "sha256:" + "d" * 64

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook is not beside python")


def _repo(tmp_path, manifest):
    work = tmp_path / "repo"
    (work / "lanes").mkdir(parents=True)
    shutil.copy(os.path.join(REPO, "lanes", f"{LANE}.yml"), work / "lanes")
    shutil.copytree(os.path.join(REPO, "images", IMAGE), work / "images" / IMAGE)
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "manifest.json").write_text(json.dumps(manifest))
    (stub / "docker").write_text(f"#!/bin/sh\n[ \"$1 $2 $3 $4\" = 'buildx imagetools inspect --raw' ] || exit 3\n"
                                 f"cat {stub / 'manifest.json'}\n")
    (stub / "docker").chmod(0o755)
    return work, str(stub)


def _run(work, stub, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=stub + os.pathsep + os.environ.get("PATH", ""))
    argv = [ANSIBLE_PLAYBOOK, PLAYBOOK, "-i", "localhost,", "-e", f"lane={LANE}", "-e", "pin_model=false", *extra]
    return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=180, check=False)


def test_pin_writes_the_digest_once_and_check_mode_only_shows_it(tmp_path):
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": [{"digest": AMD, "platform": {"os": "linux", "architecture": "amd64"}},
                              {"digest": "sha256:" + "e" * 64, "platform": {"os": "linux", "architecture": "arm64"}}]}
    work, stub = _repo(tmp_path, manifest)
    spec = work / "images" / IMAGE / "image.yml"
    before = spec.read_text()

    check = _run(work, stub, "--check", "--diff")
    assert check.returncode == 0, check.stdout + check.stderr
    assert spec.read_text() == before
    assert f'+    amd64: "{AMD}"' in check.stdout
    assert "changed=1" in check.stdout

    run = _run(work, stub)
    assert run.returncode == 0, run.stdout + run.stderr
    after = spec.read_text()
    assert after == before.replace("    amd64:\n", f'    amd64: "{AMD}"\n')
    assert "# Left empty on purpose" in after
    assert "upstream.digests.amd64: null ->" in run.stdout

    again = _run(work, stub)
    assert again.returncode == 0 and "changed=0" in again.stdout
    assert "already pinned" in again.stdout
    assert spec.read_text() == after


def test_an_architecture_the_registry_lacks_is_one_sentence(tmp_path):
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": [{"digest": AMD, "platform": {"os": "linux", "architecture": "arm64"}}]}
    work, stub = _repo(tmp_path, manifest)
    run = _run(work, stub)
    out = " ".join(run.stdout.split())
    assert run.returncode != 0
    assert "vllm/vllm-openai-cpu:v0.32.0 has no linux/amd64 image (it offers linux/arm64)" in out
    assert "Traceback" not in run.stdout + run.stderr


def test_a_switch_that_is_no_boolean_is_refused_not_read_as_false(tmp_path):
    """Issue 37: -e pin_image=nope was coerced to false by '| bool' and the run pinned nothing, rc 0."""
    work, stub = _repo(tmp_path, {"schemaVersion": 2, "manifests": []})
    spec = work / "images" / IMAGE / "image.yml"
    before = spec.read_text()
    run = _run(work, stub, "-e", "pin_image=nope")
    out = " ".join(run.stdout.split())
    assert run.returncode != 0, out[-2000:]
    assert "image" in out and "nope" in out and "Traceback" not in run.stdout + run.stderr
    assert spec.read_text() == before
