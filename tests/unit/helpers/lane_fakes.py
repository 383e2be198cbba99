# Copyright: lanekit developers
# Apache-2.0
"""A fake node for the lane-wide actions: answers rank_status from a script of polls."""
from __future__ import annotations

import os
import posixpath
import shutil

STARTED = "2026-10-30T06:00:00.000000000Z"


PLAN = {
    "lane": "mistral-large4-nvfp4-8x-sglang", "engine": "sglang",
    "api": {"host": "spark-01", "address": "10.10.10.1", "port": 30000, "served_model_name": "mistral-large-4"},
    "boot": {"budget_s": 4800, "stall_s": 600, "poll_s": 1},
    "rendezvous_port": 25000, "barrier_timeout_s": 4800.0, "reports_dir": "",
    "hosts": {"spark-01": [0, 1]},
    "ranks": [
        {"host": "spark-01", "node_rank": 0, "role": "head", "container_name": "lk-r0", "health_port": 30000,
         "fabric_ip": "10.10.10.1", "spec_hash": "h0"},
        {"host": "spark-01", "node_rank": 1, "role": "worker", "container_name": "lk-r1", "health_port": 30000,
         "fabric_ip": "10.10.10.1", "spec_hash": "h1"},
    ],
}

TWO_NODES = dict(PLAN, hosts={"spark-01": [0], "spark-02": [1]}, ranks=[
    dict(PLAN["ranks"][0]), dict(PLAN["ranks"][1], host="spark-02", fabric_ip="10.10.10.2"),
])


def inspect(state="running", code=0, started=STARTED):
    return {"Id": "abc", "Name": "/x", "State": {"Status": state, "Running": state == "running", "ExitCode": code,
            "StartedAt": started, "FinishedAt": STARTED, "OOMKilled": False, "Error": ""},
            "RestartCount": 0, "Config": {"Image": "lanekit/mistral-large4-sglang:0123456789ab", "Labels": {}}}


class FakeShell:
    def join_path(self, *parts):
        return os.path.join(*parts)


class FakeConnection:
    def __init__(self, node_dir):
        self._shell = FakeShell()
        self.node_dir = node_dir
        self.fetched = []

    def fetch_file(self, remote, local):
        shutil.copyfile(remote, local)
        self.fetched.append((remote, local))


class FakeAction:
    """Stands in for ActionBase: answers rank_status from a script of polls."""

    def __init__(self, node_dir, script):
        self._connection = FakeConnection(node_dir)
        self.script = script
        self.calls = []
        self.removed = []

    def on_node(self, remote):
        """Where the fake node keeps a remote absolute path (under node_dir, never the real /)."""
        return os.path.join(self._connection.node_dir, "root", remote.lstrip("/"))

    def _execute_module(self, module_name, module_args, task_vars):
        if module_name == "lanekit.serving.file_chunk":  # become_files.fetch reads a node's file a chunk at a time
            from ansible_collections.lanekit.serving.plugins.modules.file_chunk import read_chunk
            return read_chunk(self.on_node(module_args["path"]), module_args["offset"], module_args["size"])
        if module_name == "ansible.builtin.file":
            assert module_args["state"] == "absent"
            self.removed.append(module_args["path"])
            shutil.rmtree(self.on_node(module_args["path"]), ignore_errors=True)
            return {"changed": True}
        assert module_name == "lanekit.serving.rank_status"
        self.calls.append(module_args)
        if module_args.get("bundle_dir"):
            bundle_dir = module_args["bundle_dir"]
            os.makedirs(self.on_node(bundle_dir), exist_ok=True)
            files = []
            for name in module_args["containers"]:
                for suffix, text in ((".log", "full log of " + name), (".inspect.json", "{}")):
                    path = posixpath.join(bundle_dir, name + suffix)
                    with open(self.on_node(path), "w") as handle:
                        handle.write(text)
                    files.append(path)
            path = posixpath.join(bundle_dir, "meminfo.txt")
            with open(self.on_node(path), "w") as handle:
                handle.write("MemTotal: 125000000 kB\nMemFree: 1600000 kB\n")
            return {"containers": [], "bundle_files": files + [path], "now": 0}
        polls = [c for c in self.calls if not c.get("bundle_dir")]
        return self.script[min(len(polls), len(self.script)) - 1](module_args)

    def _make_tmp_path(self):
        path = os.path.join(self._connection.node_dir, "tmp")
        os.makedirs(path, exist_ok=True)
        return path

    def _remove_tmp_path(self, path, force=False):
        shutil.rmtree(path, ignore_errors=True)


def container(name, lines, state="running", code=0):
    return {"name": name, "exists": True, "inspect": inspect(state, code), "lines": lines, "log_error": ""}


def action_module(cls, args, check_mode=False):
    """An action plugin instance for ``args``, with a mocked connection (for argument handling)."""
    from unittest.mock import MagicMock

    from ansible.playbook.play_context import PlayContext
    from ansible.playbook.task import Task

    task = Task()
    task.args = dict(args)
    task.action = "lanekit.serving.test"
    play_context = PlayContext()
    play_context.check_mode = check_mode
    return cls(task, MagicMock(), play_context, loader=MagicMock(), templar=MagicMock(), shared_loader_obj=MagicMock())
