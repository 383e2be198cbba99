"""install.sh lays out the entry points an image needs (checked with DESTDIR, no root writes)."""
from __future__ import annotations

import os
import subprocess

import pytest
from standin_helpers import PY, STANDIN, base_env

INSTALL = os.path.join(STANDIN, "install.sh")


def install(engine, dest):
    env = base_env({"DESTDIR": str(dest), "PYTHON": PY})
    r = subprocess.run(["sh", INSTALL, engine], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r
    site = next(line.split("=", 1)[1] for line in (dest / "etc" / "lanekit-standin").read_text().splitlines()
                if line.startswith("site="))
    return str(dest) + site


def run(argv, site, **kw):
    return subprocess.run(argv, env=base_env(pythonpath=[site]), capture_output=True, text=True, timeout=30, check=False,
                          **kw)


def test_install_vllm(tmp_path):
    site = install("vllm", tmp_path)
    vllm = tmp_path / "usr" / "local" / "bin" / "vllm"
    assert os.access(vllm, os.X_OK)
    r = run([str(vllm), "--version"], site)
    assert r.returncode == 0 and r.stdout.strip().endswith("lanekit.standin")
    r = run([str(vllm), "serve", "/m", "--no-such-flag"], site)
    # real vLLM 0.32.0: the top-level parser reports it (tests/fixtures/real_vllm/bogus_flag)
    assert r.returncode == 2 and "vllm: error: unrecognized arguments: --no-such-flag" in r.stderr
    assert r.stderr.startswith("usage: vllm [-h] [-v]\n")
    router = tmp_path / "usr" / "local" / "bin" / "vllm-router"  # the P/D router of the recipes
    r = run([str(router), "--version"], site)
    assert r.returncode == 0 and r.stdout.strip().endswith("lanekit.standin")


def test_install_sglang(tmp_path):
    site = install("sglang", tmp_path)
    entry = tmp_path / "opt" / "nvidia" / "nvidia_entrypoint.sh"
    sglang = tmp_path / "usr" / "local" / "bin" / "sglang"
    assert os.access(entry, os.X_OK) and os.access(sglang, os.X_OK)
    lmu = os.path.join(site, "sglang", "srt", "model_executor", "model_runner_components", "load_model_utils.py")
    with open(lmu, encoding="utf-8") as fh:
        assert "UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480  # leave more time for post data processing\n" in fh.read()
    r = run([str(entry), "python3", "-m", "sglang.launch_server", "--model-path", "/m", "--bad"], site)
    assert r.returncode == 2 and "launch_server.py: error: unrecognized arguments: --bad" in r.stderr
    assert "stand-in" in r.stdout                     # the wrapper's banner, then exec
    r = run([str(entry), str(sglang), "version"], site)
    assert r.returncode == 0 and "lanekit.standin" in r.stdout


def test_install_rejects_unknown_engine(tmp_path):
    r = subprocess.run(["sh", INSTALL, "trtllm"], env=base_env({"DESTDIR": str(tmp_path)}), capture_output=True,
                       text=True, timeout=30, check=False)
    assert r.returncode == 2 and "usage:" in r.stderr


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_reinstall_is_clean(tmp_path, engine):
    install(engine, tmp_path)
    site = install(engine, tmp_path)
    assert not any("__pycache__" in root for root, _dirs, _files in os.walk(os.path.join(site, "lanekit_standin")))
