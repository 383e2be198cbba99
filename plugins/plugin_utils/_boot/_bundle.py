# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The failure bundle on the controller: ``<lane reports dir>/<UTC timestamp>/``.

One job: lay out and write the evidence of a failed boot (every rank's log tail, full log and
``docker inspect``, each node's memory, the plan, the verdict and the status history). Several
worker processes write into one bundle at once, each its own ranks' files; a ``.done/<host>``
marker tells the coordinator a host has finished. Logs may hold secrets (tokens in argv or
env), so files are written 0600 and directories 0700, and the lane's known secrets
(``lanekit_api_key``, ``lanekit_secret_env``) are replaced in every file, fetched ones included
(``rank_status`` already redacts them on the node; this is the second lock).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.module_utils._redact import redact_text

FILE_MODE = 0o600
DIR_MODE = 0o700


def _makedirs(path: str) -> None:
    """Create ``path`` and its missing parents 0700 (makedirs' mode only reaches the leaf)."""
    if not path or os.path.isdir(path):
        return
    _makedirs(os.path.dirname(path))
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        pass


def new_bundle_dir(lane_reports_dir: str, now: float | None = None) -> str:
    """``<lane_reports_dir>/<UTC timestamp>``, made unique (``-2``, ``-3``...), created 0700."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))
    _makedirs(lane_reports_dir)
    path = os.path.join(lane_reports_dir, stamp)
    candidate, n = path, 1
    while True:
        try:
            os.mkdir(candidate, DIR_MODE)
            return candidate
        except FileExistsError:
            n += 1
            candidate = f"{path}-{n}"


def secret_args(template: Callable[[Any], Any], task_vars: Mapping[str, Any], plan: Mapping[str, Any]) -> dict:
    """rank_status's secret arguments from ``lanekit_api_key`` and ``lanekit_secret_env`` (``template``
    resolves a raw variable, e.g. a vault value). Empty when the lane has no secrets."""
    def var(name: str) -> Any:
        value = task_vars.get(name)
        return None if value in (None, "") else template(value)
    key, env = var("lanekit_api_key"), var("lanekit_secret_env")
    record = plan.get("secrets") or {}
    out: dict = {}
    if key:
        out["api_key"] = str(key)
    values = [str(v) for v in (env.values() if isinstance(env, Mapping) else []) if v not in (None, "")]
    if values:
        out["secret_values"] = values
    names = list(record.get("env_names") or []) + ([record["api_key_env"]] if record.get("api_key") else [])
    if names:
        out["secret_env_names"] = names
    return out


class Bundle:
    """One failure bundle; paths are relative to its root. ``secrets``: values replaced in every file."""

    def __init__(self, root: str, secrets: list[str] | None = None) -> None:
        self.root = root
        self.secrets = [s for s in secrets or [] if s]

    def path(self, *parts: str) -> str:
        full = os.path.join(self.root, *parts)
        _makedirs(os.path.dirname(full))
        return full

    @staticmethod
    def rank_dir(rank: int | str, host: str) -> str:
        return os.path.join("ranks", f"r{rank}-{host}")

    def write_text(self, rel: str, text: str) -> str:
        path = self.path(rel)
        text = redact_text(text, self.secrets)
        atomic_write(path, text if text.endswith("\n") or not text else text + "\n", mode=FILE_MODE)
        return path

    def write_json(self, rel: str, obj: Any) -> str:
        return self.write_text(rel, json.dumps(obj, indent=2, sort_keys=True, default=str))

    def write_rank(self, rank: int, host: str, status: Mapping[str, Any], tail: list[str]) -> None:
        base = self.rank_dir(rank, host)
        self.write_text(os.path.join(base, "log-tail.txt"), "\n".join(tail))
        self.write_json(os.path.join(base, "status.json"), status)

    def _fetch(self, fetch: Callable[[str, str], None], remote: str, local: str) -> str:
        fetch(remote, local)
        if os.path.exists(local):
            os.chmod(local, FILE_MODE)
            if self.secrets:
                self._redact_file(local)
        return local

    def _redact_file(self, path: str) -> None:
        tmp = path + ".redacting"
        with open(path, encoding="utf-8", errors="replace") as src, open(tmp, "w", encoding="utf-8") as dst:
            os.chmod(tmp, FILE_MODE)
            for line in src:
                dst.write(redact_text(line, self.secrets))
        os.replace(tmp, path)

    def fetch_rank_files(self, rank: int | str, host: str, container: str, remote_files: list[str],
                         fetch: Callable[[str, str], None]) -> list[str]:
        """Copy a node's full log and inspect of one container into the rank's folder."""
        names = {container + ".log": "full.log", container + ".inspect.json": "inspect.json"}
        written = []
        base = self.rank_dir(rank, host)
        for remote in remote_files:
            local_name = names.get(os.path.basename(remote))
            if local_name is not None:
                written.append(self._fetch(fetch, remote, self.path(base, local_name)))
        return written

    def fetch_host_files(self, host: str, remote_files: list[str], fetch: Callable[[str, str], None]) -> list[str]:
        return [self._fetch(fetch, remote, self.path("hosts", host, "meminfo.txt"))
                for remote in remote_files if os.path.basename(remote) == "meminfo.txt"]

    def write_summary(self, plan: Any, verdict: Mapping[str, Any], message: str, history: list[str]) -> None:
        self.write_json("plan.json", plan)
        self.write_json("verdict.json", verdict)
        self.write_text("summary.txt", message)
        self.write_text("status-history.log", "\n".join(history))

    def mark_done(self, host: str, note: str = "") -> None:
        self.write_text(os.path.join(".done", host), note or "ok")

    def done_hosts(self) -> set[str]:
        try:
            return {name for name in os.listdir(os.path.join(self.root, ".done")) if not name.startswith(".")}
        except OSError:
            return set()
