# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Whose is the port the lane's API key would go to? The check a node makes before it sends the key.

One job: a probe on a node sends the lane's key to a port (the API, 127.0.0.1 or the head's own
address); a local user who bound that port first (before the rank started, after it crashed,
while the watch restarts it) would receive the key. Before the key goes out, this finds the
listening sockets a connection to the address reaches (``/proc/net/tcp``, ``/proc/net/tcp6``),
the processes holding them (``/proc/<pid>/fd`` links to ``socket:[inode]``), and checks that each
belongs to the rank's container: it descends from the container's init (``State.Pid`` of
``docker inspect``) or lives in that init's cgroup or beneath it. ``key_refusal`` is ``""`` when
the key may go, otherwise the sentence that names the port, the process and the fix.

The rank containers use the host network, so their sockets are in this node's tables. Reading
other users' ``fd`` links needs root (the collection's node tasks run with become). Standard
library only.
"""
from __future__ import annotations

import ipaddress
import os
import socket
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._boot._proc_net import hex_address

PROC = "/proc"
LISTEN = "0A"
# How far up the parent chain a holder is followed to the container's init (a deep tree is not a rank's).
MAX_DEPTH = 64


@dataclass(frozen=True)
class RankContainer:
    """The container whose engine must hold the port: its name, full id and init pid on this node."""

    name: str
    id: str = ""
    pid: int = 0
    exists: bool = False

    @classmethod
    def of(cls, name: str, inspect: Mapping[str, Any] | None) -> RankContainer:
        """From its ``docker inspect`` object (None: the container does not exist)."""
        if not inspect:
            return cls(name)
        state = inspect.get("State") or {}
        pid = int(state.get("Pid") or 0) if state.get("Running") else 0
        return cls(name, str(inspect.get("Id") or ""), pid, True)

    def label(self) -> str:
        if not self.exists:
            return f"the rank container {self.name} (it does not exist)"
        return f"the rank container {self.name}" + ("" if self.pid > 0 else " (it does not run)")


def listeners(port: int, proc: str) -> list[tuple[str, int]]:
    """(address, socket inode) of every socket listening on ``port`` in this network namespace."""
    found = []
    for table in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", table), encoding="ascii") as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != LISTEN:
                continue
            address, _sep, hex_port = fields[1].partition(":")
            if int(hex_port, 16) == port:
                found.append((hex_address(address), int(fields[9])))
    return found


def _targets(host: str) -> set[str]:
    """The addresses a connection to ``host`` may go to (a name is resolved as the probe resolves it)."""
    try:
        return {_plain(host)}
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return set()
    return {_plain(str(info[4][0])) for info in infos}


def _plain(address: str) -> str:
    parsed = ipaddress.ip_address(address.split("%")[0])
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped:
        parsed = parsed.ipv4_mapped
    return str(parsed)


def facing(sockets: list[tuple[str, int]], targets: set[str]) -> list[tuple[str, int]]:
    """The listeners a connection to one of ``targets`` may reach: the same address, or a wildcard.

    An IPv6 wildcard takes IPv4 connections too unless it is IPv6-only, which /proc does not show:
    it counts for both, so a squatter there is never overlooked.
    """
    ipv4 = any(":" not in t for t in targets)
    return [(address, inode) for address, inode in sockets
            if address in targets or address == "::" or (address == "0.0.0.0" and ipv4)]


def holders(inodes: set[int], proc: str) -> tuple[dict[int, list[int]], int]:
    """{inode: pids holding it} over every process, and how many processes' fds could not be read."""
    found: dict[int, list[int]] = {inode: [] for inode in inodes}
    unreadable = 0
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        fd_dir = os.path.join(proc, entry, "fd")
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            unreadable += 1
            continue
        except OSError:
            continue  # the process ended meanwhile
        for fd in fds:
            try:
                link = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if link.startswith("socket:[") and link.endswith("]"):
                inode = int(link[8:-1])
                if inode in found:
                    found[inode].append(int(entry))
    return found, unreadable


def _status(pid: int, proc: str) -> dict[str, str]:
    try:
        with open(os.path.join(proc, str(pid), "status"), encoding="utf-8", errors="replace") as handle:
            return {k: v.strip() for k, _sep, v in (line.partition(":") for line in handle)}
    except OSError:
        return {}


def _cgroups(pid: int, proc: str) -> dict[str, str]:
    """{hierarchy (``id:controllers``): path} of /proc/<pid>/cgroup (one ``0::`` line on cgroup v2)."""
    try:
        with open(os.path.join(proc, str(pid), "cgroup"), encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return {}
    return {hierarchy: path for hierarchy, _sep, path in (line.rpartition(":") for line in lines) if path}


def belongs(pid: int, container: RankContainer, proc: str) -> bool:
    """Whether process ``pid`` is the container's: its init or a descendant, or in the init's cgroup tree."""
    if container.pid <= 0:
        return False
    current: int | None = pid
    for _step in range(MAX_DEPTH):
        if current == container.pid:
            return True
        if current is None or current <= 1:
            break
        parent = _status(current, proc).get("PPid", "")
        current = int(parent) if parent.isdigit() else None
    # Only the init's own cgroup counts, not any cgroup whose name holds the id: a user with a
    # delegated cgroup tree (systemd user slices) may name one of theirs after the container.
    own = _cgroups(container.pid, proc)
    theirs = _cgroups(pid, proc)
    for hierarchy, path in own.items():
        if container.id and container.id in path and hierarchy in theirs:
            mine = theirs[hierarchy]
            if mine == path or mine.startswith(path.rstrip("/") + "/"):
                return True
    return False


def describe(pid: int, proc: str) -> str:
    """``process 4242 (nc, uid 1001)`` as far as /proc tells."""
    status = _status(pid, proc)
    uid = (status.get("Uid") or "").split()
    details = [status.get("Name") or ""] + ([f"uid {uid[0]}"] if uid else [])
    details = [d for d in details if d]
    return f"process {pid}" + (f" ({', '.join(details)})" if details else "")


def key_refusal(url: str, container: RankContainer | None, proc: str | None = None) -> str:
    """``""`` when every socket ``url`` may reach belongs to ``container``, else why the key must stay home."""
    proc = proc or PROC
    parsed = urllib.parse.urlparse(url)
    port = parsed.port or 80
    fix = (f"Stop that process (or free port {port}), then restart the lane's ranks (the deploy playbook) so "
           "that the engine binds its port.")
    if container is None:
        return (f"no rank container on this node is named as the one answering port {port}, so the probe cannot "
                "tell whose port it is: the lane's API key was not sent. Name the rank container that answers the "
                "API in the probe (its container, from the plan's ranks).")
    sockets = facing(listeners(port, proc), _targets(parsed.hostname or ""))
    if not sockets:
        return (f"nothing on this node listens on {parsed.hostname}:{port}, so the probe cannot tell whether "
                f"{container.label()} answers there: the lane's API key was not sent. Probe the API at an address "
                "of the head itself (the plan's api.address), from the head.")
    found, unreadable = holders({inode for _address, inode in sockets}, proc)
    strangers = sorted({pid for pids in found.values() for pid in pids if not belongs(pid, container, proc)})
    if strangers:
        who = ", ".join(describe(pid, proc) for pid in strangers[:3]) + (", ..." if len(strangers) > 3 else "")
        return (f"port {port} on this node is held by {who}, not by {container.label()}: the lane's API key was "
                f"not sent to it. {fix}")
    if any(not pids for pids in found.values()):
        why = (f" (this probe runs as uid {os.geteuid()} and could not read {unreadable} processes' sockets: run "
               "it with become)" if unreadable else "")
        return (f"port {port} on this node is held by a process this probe cannot see{why}, not provably by "
                f"{container.label()}: the lane's API key was not sent to it. {fix}")
    return ""
