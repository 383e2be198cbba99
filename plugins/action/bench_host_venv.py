# Copyright: lanekit developers
# Apache-2.0
"""Make the pinned bench virtualenv on a bench_host, offline, once.

One job: the venv. Delegated to the bench host, it reads that host's Python, CPU and C library,
downloads the binary wheels of requirements-bench.txt for exactly that target on the controller
(once: a cache keyed by the requirements' hash and the target), copies them over, creates the venv
``--without-pip`` and installs them with ``--no-index`` (the downloaded pip wheel runs the install),
then writes a marker. A venv whose marker matches is left alone (changed: false).
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
from typing import Any

from ansible.errors import AnsibleError

from ansible_collections.lanekit.serving.plugins.module_utils._bench import _host as bhost
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.plugin_utils import _become_files as becomefiles
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction

ARGUMENT_SPEC = dict(
    host=dict(type="str", required=True),
    requirements=dict(type="path", required=True),
    cache=dict(type="path", required=True),
    controller_python=dict(type="path", required=True),
    venv=dict(type="str", default=""),
    python=dict(type="str", default="python3"),
)
_COMPLETE = "COMPLETE"
_REQUIREMENTS_NAME = "requirements-bench.txt"


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    TRANSFERS_FILES = True

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        self._vars = task_vars
        return self._run(args, result)

    def lanekit_cleanup(self, args: dict[str, Any]) -> None:
        self._remove_tmp_path(self._connection._shell.tmpdir)

    def _module(self, name: str, module_args: dict, what: str, host: str) -> dict:
        out = self._execute_module(module_name=name, module_args=module_args, task_vars=self._vars)
        if out.get("failed") or out.get("rc", 0) != 0:
            detail = (out.get("stderr") or out.get("msg") or "").strip().splitlines()[-1:] or ["no output"]
            raise LanekitError(f"bench_host {host}: {what} failed ({detail[0][:300]}).")
        return out

    def _run(self, args: dict, result: dict) -> dict:
        host = args["host"]
        try:
            with open(args["requirements"], encoding="utf-8") as fh:
                requirements = fh.read()
        except OSError as exc:
            raise LanekitError(f"The bench requirements {args['requirements']} cannot be read ({exc.strerror}); "
                               "set bench_requirements to the collection's requirements-bench.txt.") from exc
        probe_out = self._module("ansible.builtin.command", {"argv": [args["python"], "-c", bhost.PROBE]},
                                 f"reading its {args['python']}", host)
        try:
            probe = json.loads(probe_out["stdout"].strip().splitlines()[-1])
        except (ValueError, IndexError) as exc:
            raise LanekitError(f"bench_host {host}: its {args['python']} printed no platform description.") from exc
        problem = bhost.refusal(probe, host)
        if problem:
            raise LanekitError(problem)
        req_hash = bhost.requirements_hash(requirements)
        venv = args["venv"] or f"{probe['home']}/.cache/lanekit/bench-venv"
        marker_path, marker = f"{venv}/{bhost.MARKER}", bhost.marker_text(req_hash, probe)
        result.update(venv=venv, target=bhost.wheel_tag(probe), python=probe["python"],
                      runs_root=f"{probe['home']}/.cache/lanekit/bench-runs")

        current = self._execute_module(module_name="ansible.builtin.slurp", module_args={"src": marker_path},
                                       task_vars=self._vars)
        if not current.get("failed") and base64.b64decode(current.get("content", "")).decode(errors="replace") == marker:
            result.update(changed=False, msg=f"bench venv on {host} ({venv}) is current.")
            return result
        if self._play_context.check_mode:
            result.update(changed=True, msg=f"Check mode: the bench venv on {host} would be (re)installed.")
            return result

        wheels = self._wheels(args, req_hash, probe)
        remote_wheels = f"{venv}.wheels"
        self._module("ansible.builtin.file", {"path": remote_wheels, "state": "absent"}, "clearing old wheels", host)
        names = sorted(os.listdir(wheels))
        # Written as the become user (the venv's directory is root's), all in one module call.
        try:
            becomefiles.put_many(self, self._vars, [os.path.join(wheels, n) for n in names if n != _COMPLETE],
                                 remote_wheels)
        except AnsibleError as exc:
            raise LanekitError(f"bench_host {host}: copying the wheels failed ({exc}).") from exc
        self._module("ansible.builtin.command", {"argv": bhost.venv_argv(args["python"], venv)},
                     "creating the virtualenv", host)
        self._module("ansible.builtin.command",
                     {"argv": bhost.install_argv(venv, remote_wheels, bhost.pip_wheel(names), _REQUIREMENTS_NAME)},
                     "installing the bench wheels offline", host)
        self._module("ansible.builtin.command",
                     {"argv": [f"{venv}/bin/python", "-c", "import sys; open(sys.argv[1], 'w').write(sys.argv[2])",
                               marker_path, marker]}, "writing the install marker", host)
        self._module("ansible.builtin.file", {"path": remote_wheels, "state": "absent"}, "removing the wheels", host)
        result.update(changed=True, msg=f"bench venv installed on {host} ({venv}, {len(names) - 2} wheels).")
        return result

    def _wheels(self, args: dict, req_hash: str, probe: dict) -> str:
        """The controller's wheel directory for this target, downloaded once."""
        target = bhost.cache_dir(args["cache"], req_hash, probe)
        if os.path.isfile(os.path.join(target, _COMPLETE)):
            return target
        os.makedirs(args["cache"], mode=0o755, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".download-", dir=args["cache"])
        try:
            argv = bhost.download_argv(args["controller_python"], args["requirements"], staging, probe)
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)  # noqa: S603
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                raise LanekitError(f"pip download of the bench wheels for {bhost.wheel_tag(probe)} failed "
                                   f"({tail[0][:300]}); the controller needs its package index once, or put the "
                                   f"wheels in {target} yourself.")
            shutil.copyfile(args["requirements"], os.path.join(staging, _REQUIREMENTS_NAME))
            atomic_write(os.path.join(staging, _COMPLETE), bhost.marker_text(req_hash, probe))
            shutil.rmtree(target, ignore_errors=True)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return target
