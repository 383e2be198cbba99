# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The controller-side meeting point of one lane task's worker processes.

One job: let the workers of one task (one Ansible fork per lane node) exchange files on the
controller: each host's latest report, the coordinator's heartbeat and its verdict. The
directory is private to the user (``$TMPDIR/lanekit-lane-wait-<uid>/<playbook pid>-<task uuid>/``,
0700, files 0600) and written atomically, so a reader never sees half a report. Old meeting
points are pruned after a day.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleError

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.module_utils._workdir import private_dir

FILE_MODE = 0o600
DIR_MODE = 0o700


def _read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


class Rendezvous:
    """Reports, heartbeat and verdict of one task's workers, as files in one directory."""

    def __init__(self, root: str) -> None:
        self.root = root
        for path in (root, os.path.join(root, "hosts"), os.path.join(root, "exits")):
            os.makedirs(path, mode=DIR_MODE, exist_ok=True)

    @staticmethod
    def default_root(task_uuid: str) -> str:
        base = os.path.join(tempfile.gettempdir(), f"lanekit-lane-wait-{os.getuid()}")
        try:
            # $TMPDIR is shared: a directory of this name made first by another user is refused.
            base = private_dir(base, "rendezvous directory", mode=DIR_MODE)
        except LanekitError as exc:
            raise AnsibleError(str(exc)) from None
        Rendezvous.prune(base)
        # The playbook's pid (our parent) keeps two runs of one task apart.
        return os.path.join(base, f"{os.getppid()}-{task_uuid}")

    @staticmethod
    def prune(base: str, max_age_s: float = 86400.0) -> None:
        now = time.time()
        try:
            entries = os.listdir(base)
        except OSError:
            return
        for name in entries:
            path = os.path.join(base, name)
            try:
                # lstat: an entry is judged (and rmtree refuses a link) as it is, never through a link.
                if now - os.lstat(path).st_mtime > max_age_s:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                continue

    def _write(self, rel: str, obj: Any) -> None:
        atomic_write(os.path.join(self.root, rel), json.dumps(obj, default=str), mode=FILE_MODE)

    def put_host(self, host: str, report: Mapping[str, Any]) -> None:
        self._write(os.path.join("hosts", host + ".json"), report)

    def get_host(self, host: str) -> dict | None:
        return _read_json(os.path.join(self.root, "hosts", host + ".json"))

    def put_verdict(self, verdict: Mapping[str, Any]) -> None:
        self._write("verdict.json", verdict)

    def get_verdict(self) -> dict | None:
        return _read_json(os.path.join(self.root, "verdict.json"))

    def put_exit(self, host: str, exits: Mapping[str, Any]) -> None:
        """A host saw a rank exit at the event (its ``time`` and ``events``)."""
        self._write(os.path.join("exits", host + ".json"), exits)

    def exits(self) -> dict[str, dict]:
        """{host: its latest exit note}, for the coordinator to judge an exit between polls."""
        folder = os.path.join(self.root, "exits")
        try:
            names = os.listdir(folder)
        except OSError:
            return {}
        out = {}
        for name in names:
            if name.endswith(".json"):
                doc = _read_json(os.path.join(folder, name))
                if doc is not None:
                    out[name[:-5]] = doc
        return out

    def heartbeat(self) -> None:
        self._write("coordinator.json", {"time": time.time()})

    def heartbeat_age(self) -> float | None:
        beat = _read_json(os.path.join(self.root, "coordinator.json"))
        if not beat:
            return None
        return time.time() - float(beat.get("time", 0))

    def collect(self, hosts: list[str], tick: int, timeout_s: float,
                sleep: Callable[[float], None] = time.sleep) -> dict[str, dict]:
        """Every host's latest report, waiting up to timeout_s for reports of this tick."""
        deadline = time.monotonic() + timeout_s
        reports: dict[str, dict] = {}
        while True:
            for host in hosts:
                report = self.get_host(host)
                if report is not None:
                    reports[host] = report
            fresh = [h for h in hosts if h in reports and int(reports[h].get("tick", -1)) >= tick]
            if len(fresh) == len(hosts) or time.monotonic() >= deadline:
                return reports
            sleep(0.5)
