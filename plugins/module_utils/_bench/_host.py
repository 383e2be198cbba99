# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The bench tools on a ``bench_host``: what its virtualenv is built from, and where a run lives there.

The bench virtualenv on a bench host is made offline: the controller downloads the pinned wheels of
requirements-bench.txt once, for the bench host's own Python, CPU and C library (``pip download
--only-binary=:all:``, kept in a cache keyed by the requirements' hash and that tag), copies them
over, and the host installs them with ``--no-index`` into a venv created ``--without-pip`` (the pip
wheel that was downloaded beside them runs the install). A marker in the venv records the
requirements' hash and tag, so a second run installs nothing. A run gets a private directory
on the host (HOME with llama-benchy's corpus cache, the tool's working directory, the tokenizer,
the raw outputs) that is fetched back and removed.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Mapping
from typing import Any

# Printed by the bench host's python3 (argv, no shell): what the wheels must be built for.
PROBE = (
    "import json, os, platform, sys; "
    "libc = platform.libc_ver(); "
    "print(json.dumps({'python': '%d.%d' % sys.version_info[:2], 'implementation': sys.implementation.name, "
    "'machine': platform.machine(), 'system': platform.system(), 'libc': libc[0], 'libc_version': libc[1], "
    "'home': os.path.expanduser('~'), 'executable': sys.executable}))"
)
MARKER = ".lanekit-bench-installed"
# manylinux_2_17 is manylinux2014, the oldest glibc wheels the pinned tools publish for.
_OLDEST_GLIBC_MINOR = 17


def requirements_hash(text: str) -> str:
    """sha256 of the requirements' meaningful lines (comments and blank lines do not count)."""
    lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    return hashlib.sha256("\n".join(sorted(x for x in lines if x)).encode()).hexdigest()


def refusal(probe: Mapping[str, Any], host: str) -> str:
    """A sentence when the bench host cannot hold the bench venv, else ''."""
    if probe.get("system") != "Linux" or probe.get("libc") != "glibc":
        return (f"bench_host {host} runs {probe.get('system')} with {probe.get('libc') or 'an unknown C library'}: "
                "the bench wheels exist for Linux with glibc only; name a Linux (glibc) bench_host.")
    if probe.get("implementation") != "cpython":
        return f"bench_host {host}'s python3 is {probe.get('implementation')}, not CPython: name a host with CPython 3.10 or later."
    major, _sep, minor = str(probe.get("python", "")).partition(".")
    if not (major.isdigit() and minor.isdigit()) or (int(major), int(minor)) < (3, 10):
        return f"bench_host {host} has Python {probe.get('python')}; the bench tools need Python 3.10 or later there."
    if not re.fullmatch(r"\d+\.\d+", str(probe.get("libc_version", ""))):
        return f"bench_host {host} reports no glibc version; name a Linux (glibc) bench_host."
    if probe.get("machine") not in ("x86_64", "aarch64"):
        return f"bench_host {host} is {probe.get('machine')}; the bench wheels exist for x86_64 and aarch64 only."
    return ""


def wheel_tag(probe: Mapping[str, Any]) -> str:
    """The cache key of one target: 'cp311-x86_64-glibc2.36'."""
    return f"cp{str(probe['python']).replace('.', '')}-{probe['machine']}-glibc{probe['libc_version']}"


def wheel_platforms(machine: str, glibc: str) -> list[str]:
    """Every manylinux tag a host with this glibc installs, newest first (pip takes them as given)."""
    minor = int(glibc.split(".")[1])
    tags = [f"manylinux_2_{m}_{machine}" for m in range(minor, _OLDEST_GLIBC_MINOR - 1, -1)]
    return tags + [f"manylinux2014_{machine}"]


def download_argv(python: str, requirements: str, dest: str, probe: Mapping[str, Any]) -> list[str]:
    """The controller's ``pip download`` for the bench host's target (binary wheels only, and pip itself)."""
    pyver = str(probe["python"])
    argv = [python, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--only-binary=:all:",
            "--implementation", "cp", "--python-version", pyver, "--abi", f"cp{pyver.replace('.', '')}"]
    for tag in wheel_platforms(str(probe["machine"]), str(probe["libc_version"])):
        argv += ["--platform", tag]
    return argv + ["--dest", dest, "-r", requirements, "pip"]


def cache_dir(cache_root: str, req_hash: str, probe: Mapping[str, Any]) -> str:
    return posixpath.join(cache_root, f"{req_hash[:16]}-{wheel_tag(probe)}")


def marker_text(req_hash: str, probe: Mapping[str, Any]) -> str:
    return f"{req_hash} {wheel_tag(probe)}\n"


def pip_wheel(names: list[str]) -> str:
    """The downloaded pip wheel's file name (it runs the install on the host)."""
    found = sorted(n for n in names if re.fullmatch(r"pip-[^-]+-py3-none-any\.whl", n))
    if not found:
        raise ValueError("no pip wheel among the downloaded bench wheels")
    return found[-1]


def venv_argv(python: str, venv: str) -> list[str]:
    # --without-pip: Debian's python3 has no ensurepip without python3-venv; pip runs from its wheel.
    return [python, "-m", "venv", "--without-pip", "--clear", venv]


def install_argv(venv: str, wheels: str, pip_name: str, requirements_name: str) -> list[str]:
    return [posixpath.join(venv, "bin", "python"), posixpath.join(wheels, pip_name, "pip"), "install", "--quiet",
            "--disable-pip-version-check", "--no-index", "--find-links", wheels,
            "-r", posixpath.join(wheels, requirements_name)]


def run_paths(root: str) -> dict[str, str]:
    """Where one run lives on the bench host (all under ``root``, a private directory)."""
    home = posixpath.join(root, "home")
    raw = posixpath.join(root, "raw")
    return {
        "root": root, "home": home, "cache": posixpath.join(home, ".cache", "llama-benchy"),
        "work": posixpath.join(home, "work"), "inputs": posixpath.join(root, "inputs"), "raw": raw,
        "tokenizer": posixpath.join(root, "inputs", "tokenizer.json"), "rc": posixpath.join(root, "rc"),
        "json_file": posixpath.join(raw, "tool-eval-bench.json"),
        "output_dir": posixpath.join(raw, "tool-eval-bench-runs"),
        "progress_path": posixpath.join(raw, "llama-benchy-progress.jsonl"),
        "events": posixpath.join(raw, "tool-eval-bench-events.jsonl"),
        "log": posixpath.join(raw, "tool-eval-bench.log"),
    }
