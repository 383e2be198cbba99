#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Run the bench tools detached on a bench_host, and hand their files back: one step per call."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_exec
short_description: Run the bench tools detached on a bench host and return their output files
version_added: 0.2.0
description:
  - Runs on the bench host (the M(lanekit.serving.bench_run) action calls it there, one O(mode)
    per call; it is not meant to be used on its own).
  - V(prepare) creates the run's private directory (mode 0700) with a HOME, the tool's working
    directory, C(inputs/) and C(raw/).
  - V(start) starts O(argv) detached (its own session; stdout to C(raw/tool-eval-bench.log),
    stderr to C(raw/tool-eval-bench-events.jsonl)) with exactly O(env) as its environment, and
    returns its process id. A small wrapper records the exit code in the run directory.
  - V(poll) says whether it still runs (and its exit code when it ended) and returns the bytes
    appended to the named C(raw/) files since the given offsets (base64), for the live progress line.
  - V(stop) ends the run's process group (SIGTERM, then SIGKILL after 20 seconds).
  - V(collect) returns every file under C(raw/) (base64) and the tool versions installed in O(venv).
  - V(cleanup) removes the run directory.
  - V(api) checks from the bench host that the lane's API lists its model (the gate's API half).
options:
  mode:
    description: The step.
    type: str
    required: true
    choices: [prepare, start, poll, stop, collect, cleanup, api]
  root:
    description: The run's directory on the bench host.
    type: path
    required: true
  argv:
    description: The command (V(start)).
    type: list
    elements: str
  env:
    description:
      - The command's whole environment (V(start)), without the API key (every value of a C(no_log)
        mapping would be masked wherever it appears in the output, a pid included).
    type: dict
  pid:
    description: The process id V(start) returned (V(poll), V(stop)).
    type: int
  offsets:
    description: File name under C(raw/) -> bytes already read (V(poll)).
    type: dict
    default: {}
  venv:
    description: The bench virtualenv on the host (V(collect) reads its tool versions).
    type: path
  base_url:
    description: The lane's API base URL (V(api)).
    type: str
  model:
    description: The served model name (V(api)).
    type: str
  api_key:
    description: The lane's API key, if it has one (V(api); V(start) adds it to O(env) as C(TOOL_EVAL_API_KEY)).
    type: str
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
  idempotent:
    support: none
    details: Each mode is one step of a run.
"""

EXAMPLES = r"""
---
- name: Remove a run directory left on the bench host
  lanekit.serving.bench_exec:
    mode: cleanup
    root: /root/.cache/lanekit/bench-runs/20261130T120000Z
"""

RETURN = r"""
pid:
  description: The started process (V(start)).
  returned: mode start
  type: int
running:
  description: Whether the process still runs (V(poll)).
  returned: mode poll
  type: bool
rc:
  description: The tool's exit code once it ended (V(poll)); null while it runs or when it was killed.
  returned: mode poll
  type: int
chunks:
  description: File name -> {offset, data (base64)} of the bytes appended since O(offsets) (V(poll)).
  returned: mode poll
  type: dict
files:
  description: Path under C(raw/) -> content (base64) (V(collect)).
  returned: mode collect
  type: dict
tools:
  description: Tool name -> installed version in O(venv) (V(collect)).
  returned: mode collect
  type: dict
check:
  description: The API check's result as the bench host sees it (V(api)).
  returned: mode api
  type: dict
"""

import base64
import json
import os
import shutil
import signal
import sys
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lanekit.serving.plugins.module_utils._bench import _api as api
from ansible_collections.lanekit.serving.plugins.module_utils._bench import _host as bhost

# The detached wrapper: runs the tool, then records its exit code atomically (stdlib only), through a
# temporary file mkstemp creates (unpredictable name, O_EXCL: nothing planted there is written through).
_WRAPPER = (
    "import json, os, subprocess, sys, tempfile\n"
    "rc = subprocess.call(json.loads(sys.argv[1]))\n"
    "fd, tmp = tempfile.mkstemp(dir=os.path.dirname(sys.argv[2]) or '.')\n"
    "with os.fdopen(fd, 'w') as fh:\n"
    "    fh.write(str(rc))\n"
    "os.replace(tmp, sys.argv[2])\n"
)
# A poll returns at most this much of one file (the progress files grow by small lines).
_CHUNK_MAX = 4 << 20


def _prepare(paths: dict) -> dict:
    for key in ("root", "home", "cache", "work", "inputs", "raw"):
        os.makedirs(paths[key], mode=0o700, exist_ok=True)
        os.chmod(paths[key], 0o700)
    return {"changed": True, "paths": paths}


def _spawn_detached(argv: list, env: dict, cwd: str, stdout_path: str, stderr_path: str) -> int:
    """Fork a session leader that execs ``argv`` and outlives this module (run_command would wait for it).

    The classic daemon start (as ansible's own async wrapper does): the child leaves our session,
    so the run's process group can be stopped as one, and this module returns at once.
    """
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; it only execs or exits
        try:
            os.setsid()
            os.chdir(cwd)
            stdin = os.open(os.devnull, os.O_RDONLY)
            # in the run's 0700 directory; O_NOFOLLOW all the same (a link there is never written through)
            out = os.open(stdout_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            for fd, target in ((stdin, 0), (out, 1), (err, 2)):
                os.dup2(fd, target)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    return pid


def _start(module: AnsibleModule, paths: dict) -> dict:
    argv, env = module.params["argv"] or [], dict(module.params["env"] or {})
    if not argv:
        module.fail_json(msg="bench_exec mode=start needs argv.")
    if module.params["api_key"]:
        env["TOOL_EVAL_API_KEY"] = module.params["api_key"]
    pid = _spawn_detached([sys.executable, "-c", _WRAPPER, json.dumps(argv), paths["rc"]],
                          {str(k): str(v) for k, v in env.items()}, paths["work"], paths["log"], paths["events"])
    return {"changed": True, "pid": pid}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A finished child of nobody here is a zombie only until init reaps it; /proc says which.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _read_rc(paths: dict) -> int | None:
    try:
        with open(paths["rc"], encoding="ascii") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def _poll(module: AnsibleModule, paths: dict) -> dict:
    rc = _read_rc(paths)
    pid = module.params["pid"]
    running = rc is None and pid is not None and _alive(pid)
    chunks = {}
    for name, offset in (module.params["offsets"] or {}).items():
        path = os.path.join(paths["raw"], os.path.basename(str(name)))
        try:
            with open(path, "rb") as fh:
                fh.seek(int(offset))
                data = fh.read(_CHUNK_MAX)
        except OSError:
            continue
        chunks[name] = {"offset": int(offset), "data": base64.b64encode(data).decode("ascii")}
    return {"changed": False, "running": running, "rc": rc, "chunks": chunks}


def _stop(module: AnsibleModule) -> dict:
    pid = module.params["pid"]
    if pid is None:
        module.fail_json(msg="bench_exec mode=stop needs pid.")
    for sig, wait_s in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.5)
        if not _alive(pid):
            break
    return {"changed": True}


def _collect(module: AnsibleModule, paths: dict) -> dict:
    files = {}
    for dirpath, _dirs, names in os.walk(paths["raw"]):
        for name in names:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as fh:
                files[os.path.relpath(full, paths["raw"])] = base64.b64encode(fh.read()).decode("ascii")
    tools = api.tool_versions(module.params["venv"]) if module.params["venv"] else {}
    return {"changed": False, "files": files, "tools": tools}


def argument_spec() -> dict:
    return dict(
        mode=dict(type="str", required=True,
                  choices=["prepare", "start", "poll", "stop", "collect", "cleanup", "api"]),
        root=dict(type="path", required=True),
        argv=dict(type="list", elements="str"),
        env=dict(type="dict"),
        pid=dict(type="int"),
        offsets=dict(type="dict", default={}),
        venv=dict(type="path"),
        base_url=dict(type="str"),
        model=dict(type="str"),
        api_key=dict(type="str", no_log=True),
    )


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        supports_check_mode=False,
    )
    paths = bhost.run_paths(module.params["root"])
    mode = module.params["mode"]
    try:
        if mode == "prepare":
            result = _prepare(paths)
        elif mode == "start":
            result = _start(module, paths)
        elif mode == "poll":
            result = _poll(module, paths)
        elif mode == "stop":
            result = _stop(module)
        elif mode == "collect":
            result = _collect(module, paths)
        elif mode == "api":
            check = api.check_api(module.params["base_url"] or "", module.params["model"] or "", module.params["api_key"])
            result = {"changed": False, "check": check}
        else:
            shutil.rmtree(paths["root"], ignore_errors=True)
            result = {"changed": True}
    except OSError as exc:
        module.fail_json(msg=f"bench_exec {mode} in {paths['root']} failed: {exc}.")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
