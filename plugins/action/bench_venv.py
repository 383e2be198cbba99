# Copyright: lanekit developers
# Apache-2.0
"""The bench tools' virtualenv on the controller: found, or made once on first use.

One job: the venv the bench runs from (plugin_utils/_bench/_venv.py chooses it). A ``bench_venv``
the user names is used as it is (refused with a sentence when it lacks a tool); the checkout's
``.venv-bench`` is used when ``make venv-bench`` made it; otherwise the pinned requirements the
collection ships are installed into ``${XDG_CACHE_HOME:-~/.cache}/lanekit/bench-venv-<hash>`` with
the controller's Python (``-m venv``, then the venv's pip), saying so first since it takes minutes.
A venv whose marker matches is left alone (changed: false).
"""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from typing import Any

from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils._bench import _api as api
from ansible_collections.lanekit.serving.plugins.module_utils._bench import _host as bhost
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _venv as bvenv

display = Display()

ARGUMENT_SPEC = dict(
    requirements=dict(type="path", required=True),
    venv=dict(type="str", default=""),
    checkout_venv=dict(type="str", default=""),
    python=dict(type="str", default=""),
    create=dict(type="bool", default=True),
)


def _current(venv: str, req_hash: str) -> bool:
    """The venv is complete for these pins: its marker (written last) matches and the tools are there."""
    try:
        with open(os.path.join(venv, bvenv.MARKER), encoding="utf-8") as fh:
            marker = fh.read()
    except OSError:
        return False
    return marker == bvenv.marker_text(req_hash) and not api.venv_problem(venv)


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        return self._run(args, result)

    def _run(self, args: dict, result: dict) -> dict:
        requirements = args["requirements"]
        try:
            with open(requirements, encoding="utf-8") as fh:
                req_hash = bhost.requirements_hash(fh.read())
        except OSError as exc:
            raise LanekitError(f"The bench requirements {requirements} cannot be read ({exc.strerror}); set "
                               "bench_requirements to the collection's requirements-bench.txt.") from exc
        root = bvenv.cache_root(os.environ, os.path.expanduser("~"))
        choice = bvenv.choose(args["venv"], args["checkout_venv"], root, req_hash,
                              lambda path: not api.venv_problem(path))
        venv = choice["venv"]
        result.update(changed=False, venv=venv, source=choice["source"], wheel_cache=choice["wheel_cache"],
                      ready=True)
        if choice["source"] != "cache":
            problem = api.venv_problem(venv, requirements)
            if problem:
                raise LanekitError(problem)
            result["msg"] = f"bench tools from {venv} ({choice['source']})."
            return result
        if _current(venv, req_hash):
            result["msg"] = f"bench tools from {venv} (made on first use; current)."
            return result
        if not args["create"]:
            result.update(ready=False, msg=f"no bench virtualenv yet at {venv}.")
            return result
        if self._play_context.check_mode:
            result.update(changed=True, ready=False, msg=f"Check mode: the bench tools' virtualenv {venv} would be made.")
            return result
        os.makedirs(root, mode=0o700, exist_ok=True)
        # Two first runs at once on one controller: the second waits, then finds the venv made.
        with open(f"{venv}.lock", "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if _current(venv, req_hash):
                result["msg"] = f"bench tools from {venv} (made by another run meanwhile)."
                return result
            return self._make(args, result, venv, req_hash)

    def _make(self, args: dict, result: dict, venv: str, req_hash: str) -> dict:
        python, requirements = args["python"] or sys.executable, args["requirements"]
        display.display(f"bench: making the bench tools' virtualenv {venv} (first use, once per pinned set): "
                        f"pip install -r {requirements}, some 55 packages, a few minutes.")
        proc = subprocess.run(bvenv.create_argv(python, venv), capture_output=True, text=True,  # noqa: S603
                              timeout=600, check=False)
        if proc.returncode != 0:
            raise LanekitError(bvenv.create_failure(python, venv, proc.stderr + proc.stdout))
        proc = subprocess.run(bvenv.install_argv(venv, requirements), capture_output=True, text=True,  # noqa: S603
                              timeout=3600, check=False)
        if proc.returncode != 0:
            raise LanekitError(bvenv.install_failure(venv, requirements, proc.stderr + proc.stdout))
        problem = api.venv_problem(venv, requirements)
        if problem:
            raise LanekitError(problem)
        # Last: a venv without it was interrupted and is made again.
        atomic_write(os.path.join(venv, bvenv.MARKER), bvenv.marker_text(req_hash))
        result.update(changed=True, msg=f"bench tools installed in {venv} (from {requirements}).")
        return result
