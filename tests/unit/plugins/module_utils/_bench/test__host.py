# Copyright: lanekit developers
# Apache-2.0
"""The bench host's venv recipe: target, wheel download, offline install, idempotence marker, run paths."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._bench import _host as bhost

SPARK = {"python": "3.11", "implementation": "cpython", "machine": "x86_64", "system": "Linux", "libc": "glibc",
         "libc_version": "2.36", "home": "/root", "executable": "/usr/bin/python3"}


def test_the_probe_describes_this_python():
    out = json.loads(subprocess.run([sys.executable, "-c", bhost.PROBE], capture_output=True, text=True,
                                    check=True).stdout)
    assert out["python"] == f"{sys.version_info[0]}.{sys.version_info[1]}" and out["implementation"] == "cpython"
    assert set(out) == set(SPARK)


def test_requirements_hash_ignores_comments_and_order():
    a = "# pins\ntool-eval-bench==3.0.0\nllama-benchy==0.4.0  # the grid\n\n"
    b = "llama-benchy==0.4.0\ntool-eval-bench==3.0.0\n"
    assert bhost.requirements_hash(a) == bhost.requirements_hash(b)
    assert bhost.requirements_hash(a) != bhost.requirements_hash(b.replace("0.4.0", "0.4.1"))


def test_wheel_platforms_cover_every_glibc_down_to_manylinux2014():
    tags = bhost.wheel_platforms("aarch64", "2.36")
    assert tags[0] == "manylinux_2_36_aarch64" and tags[-2:] == ["manylinux_2_17_aarch64", "manylinux2014_aarch64"]
    assert len(tags) == 36 - 17 + 2


def test_download_argv_pins_the_target_and_takes_binary_wheels_only():
    argv = bhost.download_argv("/c/.venv-bench/bin/python", "/c/requirements-bench.txt", "/cache/x", SPARK)
    assert argv[:4] == ["/c/.venv-bench/bin/python", "-m", "pip", "download"]
    assert "--only-binary=:all:" in argv
    assert argv[argv.index("--python-version") + 1] == "3.11" and argv[argv.index("--abi") + 1] == "cp311"
    assert argv[argv.index("--platform") + 1] == "manylinux_2_36_x86_64"
    assert argv[-5:] == ["--dest", "/cache/x", "-r", "/c/requirements-bench.txt", "pip"]


def test_cache_and_marker_name_the_requirements_and_the_target():
    h = bhost.requirements_hash("tool-eval-bench==3.0.0\n")
    assert bhost.cache_dir("/cache", h, SPARK) == f"/cache/{h[:16]}-cp311-x86_64-glibc2.36"
    assert bhost.marker_text(h, SPARK) == f"{h} cp311-x86_64-glibc2.36\n"
    assert bhost.marker_text(h, SPARK) != bhost.marker_text(h, dict(SPARK, python="3.12"))


def test_the_install_runs_pip_from_its_wheel_without_an_index():
    assert bhost.venv_argv("python3", "/v") == ["python3", "-m", "venv", "--without-pip", "--clear", "/v"]
    argv = bhost.install_argv("/v", "/v.wheels", "pip-26.3-py3-none-any.whl", "requirements-bench.txt")
    assert argv[:3] == ["/v/bin/python", "/v.wheels/pip-26.3-py3-none-any.whl/pip", "install"]
    assert "--no-index" in argv and argv[argv.index("--find-links") + 1] == "/v.wheels"
    assert argv[-2:] == ["-r", "/v.wheels/requirements-bench.txt"]
    assert bhost.pip_wheel(["numpy-2.0-cp311-cp311-manylinux_2_17_x86_64.whl", "pip-26.3-py3-none-any.whl"]) == \
        "pip-26.3-py3-none-any.whl"
    with pytest.raises(ValueError):
        bhost.pip_wheel(["numpy-2.0-cp311-cp311-manylinux_2_17_x86_64.whl"])


@pytest.mark.parametrize(("change", "words"), [
    ({"system": "Darwin", "libc": ""}, "Linux (glibc)"),
    ({"libc": "musl"}, "Linux (glibc)"),
    ({"python": "3.9"}, "Python 3.10 or later"),
    ({"implementation": "pypy"}, "CPython"),
    ({"machine": "ppc64le"}, "x86_64 and aarch64"),
    ({"libc_version": ""}, "no glibc version"),
])
def test_hosts_that_cannot_hold_the_venv_are_refused_with_a_sentence(change, words):
    text = bhost.refusal(dict(SPARK, **change), "spark-02")
    assert text.startswith("bench_host spark-02") and words in text


def test_a_debian_spark_node_is_fine():
    assert bhost.refusal(SPARK, "spark-02") == ""


def test_run_paths_stay_under_the_run_root():
    paths = bhost.run_paths("/root/.cache/lanekit/bench-runs/lane-20261130T120000Z")
    assert all(p.startswith("/root/.cache/lanekit/bench-runs/lane-20261130T120000Z") for p in paths.values())
    assert paths["cache"] == paths["home"] + "/.cache/llama-benchy" and paths["work"] == paths["home"] + "/work"
