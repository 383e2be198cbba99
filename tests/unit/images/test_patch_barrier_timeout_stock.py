"""The baked SGLang patch, run against a copy of load_model_utils.py's shape."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.unit.helpers.plans import REPO

PATCH = os.path.join(REPO, "images", "mistral-large4-sglang", "patches", "patch_barrier_timeout.py")

STOCK = '''import logging

import torch.distributed as dist

UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480  # leave more time for post data processing


def wait_for_all_ranks(group):
    dist.monitored_barrier(group=group, timeout=UNBALANCED_MODEL_LOADING_TIMEOUT_S, wait_all_ranks=True)
'''


def write(tmp_path, text):
    target = tmp_path / "load_model_utils.py"
    target.write_text(text)
    return target


def run_patch(path):
    return subprocess.run([sys.executable, PATCH, str(path)], capture_output=True, text=True, check=False)


def load_constant(path, env):
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        # Evaluate only the module-level assignment (the file's torch import is not available here).
        line = next(ln for ln in path.read_text().splitlines() if ln.startswith("UNBALANCED_MODEL_LOADING_TIMEOUT_S"))
        namespace = {}
        exec(compile(line, str(path), "exec"), namespace)  # noqa: S102 - test-only
        return namespace["UNBALANCED_MODEL_LOADING_TIMEOUT_S"]
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_patch_reads_env_with_default_480(tmp_path):
    target = write(tmp_path, STOCK)
    proc = run_patch(target)
    assert proc.returncode == 0, proc.stderr
    text = target.read_text()
    assert "SGLANG_UNBALANCED_LOAD_TIMEOUT_S" in text
    assert "# leave more time for post data processing" in text  # the rest of the line is kept
    assert "timeout=UNBALANCED_MODEL_LOADING_TIMEOUT_S" in text  # the barrier still uses the constant
    assert load_constant(target, {}) == 480
    assert load_constant(target, {"SGLANG_UNBALANCED_LOAD_TIMEOUT_S": "7200"}) == 7200


def test_patch_refuses_already_patched_file(tmp_path):
    target = write(tmp_path, STOCK)
    assert run_patch(target).returncode == 0
    before = target.read_text()
    proc = run_patch(target)
    assert proc.returncode == 1
    assert "already patched" in proc.stderr
    assert target.read_text() == before


@pytest.mark.parametrize("text, reason", [
    (STOCK.replace("UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480", "UNBALANCED_MODEL_LOADING_TIMEOUT_S = 600"),
     "assigned differently"),
    (STOCK.replace("UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480  # leave more time for post data processing\n", ""),
     "was not found"),
])
def test_patch_fails_loudly_when_upstream_changed(tmp_path, text, reason):
    target = write(tmp_path, text)
    proc = run_patch(target)
    assert proc.returncode == 1
    assert reason in proc.stderr
    assert target.read_text() == text  # nothing half-written


def test_patch_fails_when_target_missing(tmp_path):
    proc = run_patch(tmp_path / "nope.py")
    assert proc.returncode == 1
    assert "does not exist" in proc.stderr
