"""The baked SGLang patch, run as the image build runs it, against a copy of the target's shape."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.unit.helpers.docker import IMAGES

SCRIPT = os.path.join(IMAGES, "mistral-large4-sglang", "patches", "patch_barrier_timeout.py")
TARGET = os.path.join("sglang", "srt", "model_executor", "model_runner_components", "load_model_utils.py")
SHAPE = """\
import logging

logger = logging.getLogger(__name__)

UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480


def post_load_barrier(group, dist):
    dist.monitored_barrier(group=group, timeout=UNBALANCED_MODEL_LOADING_TIMEOUT_S)
"""


def package(tmp_path, text=SHAPE):
    """A fake installed sglang package holding load_model_utils.py; returns (site dir, target)."""
    site = tmp_path / "site"
    target = site / TARGET
    target.parent.mkdir(parents=True)
    for directory in [site / "sglang", *[p for p in target.parents if str(p).startswith(str(site / "sglang"))]]:
        (directory / "__init__.py").touch()
    target.write_text(text)
    cache = target.parent / "__pycache__"
    cache.mkdir()
    (cache / "load_model_utils.cpython-311.pyc").write_bytes(b"stale")
    return site, target


def run(site, *args):
    env = dict(os.environ, PYTHONPATH=str(site))
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env, check=False)


def timeout_in(site, env_value=None):
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_UNBALANCED_LOAD_TIMEOUT_S"}
    env["PYTHONPATH"] = str(site)
    if env_value is not None:
        env["SGLANG_UNBALANCED_LOAD_TIMEOUT_S"] = env_value
    code = ("import sglang.srt.model_executor.model_runner_components.load_model_utils as m; "
            "print(m.UNBALANCED_MODEL_LOADING_TIMEOUT_S)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return int(out.stdout.strip())


def test_patch_finds_the_installed_package_and_reads_the_env(tmp_path):
    site, target = package(tmp_path)
    done = run(site)
    assert done.returncode == 0, done.stderr
    assert "SGLANG_UNBALANCED_LOAD_TIMEOUT_S" in done.stdout
    text = target.read_text()
    assert 'environ.get("SGLANG_UNBALANCED_LOAD_TIMEOUT_S", "480")' in text
    assert "UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480\n" not in text
    assert not list((target.parent / "__pycache__").iterdir())  # stale bytecode removed
    assert timeout_in(site) == 480
    assert timeout_in(site, "7200") == 7200
    # Only the one line changed.
    assert [line for line in text.splitlines() if line not in SHAPE.splitlines()] == \
        [line for line in text.splitlines() if "lanekit patch_barrier_timeout" in line]


def test_patch_keeps_indentation_and_trailing_comment(tmp_path):
    site, target = package(tmp_path, SHAPE.replace("UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480",
                                                   "UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480  # seconds"))
    assert run(site, str(target)).returncode == 0
    line = next(ln for ln in target.read_text().splitlines() if ln.startswith("UNBALANCED_MODEL_LOADING_TIMEOUT_S"))
    assert line.endswith("# seconds")


@pytest.mark.parametrize("text, words", [
    (SHAPE.replace("UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480\n", ""), "was not found"),
    (SHAPE.replace("= 480", "= 600"), "assigned differently than expected"),
])
def test_missing_or_changed_line_fails_loudly(tmp_path, text, words):
    site, target = package(tmp_path, text)
    done = run(site, str(target))
    assert done.returncode == 1
    assert "cannot patch" in done.stderr and words in done.stderr
    assert target.read_text() == text  # untouched


def test_already_patched_file_fails_loudly(tmp_path):
    site, target = package(tmp_path)
    assert run(site, str(target)).returncode == 0
    patched = target.read_text()
    again = run(site, str(target))
    assert again.returncode == 1
    assert "already patched" in again.stderr
    assert target.read_text() == patched


def test_missing_target_file_or_package_fails_loudly(tmp_path):
    done = run(tmp_path, str(tmp_path / "nowhere.py"))
    assert done.returncode == 1 and "does not exist" in done.stderr
    done = run(tmp_path)  # no sglang package importable
    assert done.returncode == 1 and "not importable" in done.stderr
