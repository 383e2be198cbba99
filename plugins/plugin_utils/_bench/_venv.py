# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The bench tools' virtualenv on the controller: which one a run uses, and how it is made.

Three places, in this order: the ``bench_venv`` a user names (used as it is); the checkout's
``.venv-bench`` when ``make venv-bench`` made it (CI and developers); otherwise a venv the bench
makes itself on first use in the user's cache, ``${XDG_CACHE_HOME:-~/.cache}/lanekit/
bench-venv-<hash>``. The hash is that of the pinned requirements the collection ships
(requirements-bench.txt), so a collection upgrade that moves a pin gets a fresh venv beside the
old one instead of a half-upgraded one, and an installed collection (possibly read-only, replaced
on upgrade) is never written into. A marker written last (the requirements' hash) tells a
complete venv from one whose install was interrupted.

Pure: no I/O beyond the ``has_tools`` callable the caller passes, no Ansible imports.
"""
from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping

MARKER = ".lanekit-bench-installed"


def cache_root(environ: Mapping[str, str], home: str) -> str:
    """``$XDG_CACHE_HOME/lanekit``, or ``~/.cache/lanekit`` (the XDG spec ignores a relative value)."""
    xdg = environ.get("XDG_CACHE_HOME", "")
    base = xdg if xdg.startswith("/") else posixpath.join(home, ".cache")
    return posixpath.join(base, "lanekit")


def cached_venv(root: str, req_hash: str) -> str:
    return posixpath.join(root, f"bench-venv-{req_hash[:16]}")


def choose(configured: str, checkout_venv: str, root: str, req_hash: str,
           has_tools: Callable[[str], bool]) -> dict[str, str]:
    """{venv, source, wheel_cache}: the venv a run uses and where a bench host's wheels are kept.

    source is 'configured' (bench_venv), 'checkout' (a `make venv-bench` one) or 'cache' (made here).
    """
    if configured:
        return {"venv": configured, "source": "configured", "wheel_cache": posixpath.join(root, "bench-wheels")}
    if checkout_venv and has_tools(checkout_venv):
        # The checkout keeps its wheels beside it, as before (CI's cache stays where it was).
        checkout = posixpath.dirname(checkout_venv.rstrip("/"))
        return {"venv": checkout_venv, "source": "checkout",
                "wheel_cache": posixpath.join(checkout, ".cache", "bench-wheels")}
    return {"venv": cached_venv(root, req_hash), "source": "cache",
            "wheel_cache": posixpath.join(root, "bench-wheels")}


def marker_text(req_hash: str) -> str:
    return f"{req_hash}\n"


def create_argv(python: str, venv: str) -> list[str]:
    # --clear: a venv whose install was interrupted (no marker) is made again from nothing.
    return [python, "-m", "venv", "--clear", venv]


def install_argv(venv: str, requirements: str) -> list[str]:
    return [posixpath.join(venv, "bin", "python"), "-m", "pip", "install", "--quiet",
            "--disable-pip-version-check", "-r", requirements]


def create_failure(python: str, venv: str, output: str) -> str:
    """The sentence for a venv that could not be created (ensurepip missing is the usual cause)."""
    tail = (output.strip().splitlines() or ["no output"])[-1][:300]
    fix = ("install python3-venv (Debian, Ubuntu) for that Python, or set bench_venv to a virtualenv "
           "that has requirements-bench.txt installed")
    if "ensurepip" in output:
        return f"{python} cannot create the bench virtualenv {venv} with pip (no ensurepip): {fix}."
    return f"Creating the bench virtualenv {venv} with {python} failed ({tail}): {fix}."


def install_failure(venv: str, requirements: str, output: str) -> str:
    tail = (output.strip().splitlines() or ["no output"])[-1][:300]
    return (f"pip install -r {requirements} into the bench virtualenv {venv} failed ({tail}); the controller needs "
            "its package index once (pip's configuration: index-url, find-links, proxy), then runs reuse the venv.")
