# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Why a host could not be reached or could not become root, in one sentence with the fix.

Ansible reports a node it cannot reach with the connection's own words (OpenSSH's, for the
``ssh`` connection) and a node where ``sudo`` wants a password with "Missing sudo password".
Those words are matched here, in the order a person would check them, and turned into a
sentence that names the host, what happened and what to do. Pure: no I/O.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# OpenSSH prints the path and line of the offending entry and the exact removal command.
_OFFENDING = re.compile(r"Offending \S+ key in (?P<file>\S+?):(?P<line>\d+)")
_REMOVE_WITH = re.compile(r"ssh-keygen -f ['\"]?(?P<file>[^'\"\s]+)['\"]? -R ['\"]?(?P<host>[^'\"\s]+)['\"]?")
_USER_AT = re.compile(r"(?P<user>[A-Za-z0-9._-]+)@(?P<addr>[0-9A-Za-z.:\[\]_-]+):")


@dataclass(frozen=True)
class Reach:
    """One host's verdict: ``kind`` is a stable id, ``sentence`` what the user reads."""
    host: str
    kind: str
    sentence: str

    def to_dict(self) -> dict:
        return {"host": self.host, "kind": self.kind, "sentence": self.sentence}


def _where(host: str, address: str) -> str:
    return f"{host} ({address})" if address and address != host else host


def _whole_seconds(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def explain_for(host: str, message: str, hostvars: Mapping[str, Any], *, default_timeout_s: int | None = None,
                unreachable: bool = True) -> Reach:
    """``explain`` with the address, login user and connect timeout read from the host's (templated)
    variables: ``ansible_host``, ``ansible_user``, ``ansible_ssh_timeout`` or ``ansible_timeout``."""
    timeout = _whole_seconds(hostvars.get("ansible_ssh_timeout", hostvars.get("ansible_timeout")))
    return explain(host, message, address=str(hostvars.get("ansible_host") or ""),
                   user=str(hostvars.get("ansible_user") or ""), timeout_s=timeout or default_timeout_s,
                   unreachable=unreachable)


def explain(host: str, message: str, *, address: str = "", user: str = "", timeout_s: int | None = None,
            unreachable: bool = True) -> Reach:
    """The verdict for one host from Ansible's message (``msg`` of an unreachable or failed result)."""
    text = " ".join(str(message or "").split())
    where = _where(host, address)
    found = _USER_AT.search(text)
    login = user or (found.group("user") if found else "")
    low = text.lower()
    if "remote host identification has changed" in low or "host key for" in low and "has changed" in low:
        entry = _OFFENDING.search(text)
        remove = _REMOVE_WITH.search(text)
        known = (remove.group("file") if remove else entry.group("file") if entry else "~/.ssh/known_hosts")
        key_host = remove.group("host") if remove else (address or host)
        return Reach(host, "host_key_changed", (
            f"{where} offered an SSH host key that differs from the one in {known}"
            + (f" (line {entry.group('line')})" if entry else "")
            + ", so lanekit refused to connect and changed nothing on any node. If the node was reinstalled"
            f" or its key rotated on purpose, remove the old key with `ssh-keygen -f {known} -R {key_host}`,"
            f" check the new key's fingerprint on the node's console (ssh-keygen -lf"
            " /etc/ssh/ssh_host_ed25519_key.pub) and add it to known_hosts; otherwise treat it as an"
            " attack and do not connect."))
    if "host key verification failed" in low or "no ed25519 host key is known" in low or (
            "host key is known" in low and "strict checking" in low):
        return Reach(host, "host_key_unknown", (
            f"{where} has no entry in known_hosts and host key checking is on, so lanekit did not connect."
            f" Add its key after checking the fingerprint on the node's console: `ssh-keyscan -t ed25519"
            f" {address or host} >> ~/.ssh/known_hosts` (docs/real-nodes.md of the lanekit.serving collection)."))
    if "incorrect sudo password" in low or "sorry, try again" in low:
        who = f" of {login}" if login else ""
        return Reach(host, "sudo_password_wrong", (
            f"sudo on {where} refused the password given with -K (--ask-become-pass){who}. Run again with"
            " the login user's own password on that node, or give it passwordless sudo there"
            " (docs/real-nodes.md of the lanekit.serving collection)."))
    if "privilege escalation" in low and ("timeout" in low or "timed out" in low):
        return Reach(host, "sudo_hung", (
            f"{where} accepted the SSH login, but sudo did not answer in time (it waited for a prompt"
            " lanekit cannot answer: a PAM or second-factor prompt, a slow directory lookup). Make sudo for"
            " the login user non-interactive on the node (docs/real-nodes.md of the lanekit.serving"
            " collection), then run again."))
    if "missing sudo password" in low or "a password is required" in low:
        who = f" {login}" if login else ""
        return Reach(host, "sudo_password", (
            f"sudo on {where} asks{who} for a password, and lanekit needs root there (docker, /etc/lanekit,"
            " the weights). Pass the password with -K (--ask-become-pass), or give the login user"
            " passwordless sudo on the node (docs/real-nodes.md of the lanekit.serving collection shows the sudoers line)."))
    if "permission denied (publickey" in low or "permission denied, please try again" in low:
        who = login or "the login user"
        return Reach(host, "auth_denied", (
            f"{where} refused the SSH login of {who}: its key is not authorized there. Install the"
            f" controller's public key for {who} on the node (ssh-copy-id {who}@{address or host}),"
            " or set ansible_user / ansible_ssh_private_key_file in the inventory."))
    limit = f" within {timeout_s} s" if timeout_s else ""
    if "timed out" in low or "timeout" in low:
        return Reach(host, "timeout", (
            f"{where} is unreachable: it did not answer on SSH{limit} (the connection timed out). The node is"
            " off, hung or cut off, or a firewall drops port 22; check it from its console or BMC. The lane"
            " needs every node: bring it back, or move the lane to other nodes in the inventory."))
    if "connection refused" in low:
        return Reach(host, "refused", (
            f"{where} is up but refused the SSH connection: sshd is not running or listens on another port."
            " Start sshd on the node, or set ansible_port in the inventory."))
    if "no route to host" in low or "network is unreachable" in low or "host is down" in low:
        return Reach(host, "no_route", (
            f"{where} is unreachable: no route to it (the node is down or off the network). Check its power"
            " and link, and that ansible_host in the inventory is its address."))
    if "could not resolve hostname" in low or "name or service not known" in low:
        return Reach(host, "unresolved", (
            f"{where}: the address does not resolve. Set ansible_host in the inventory to the node's address"
            " or name as the controller resolves it."))
    if unreachable:
        return Reach(host, "unreachable", f"{where} is unreachable: {text or 'no answer'}.")
    return Reach(host, "failed", f"{where} could not run lanekit's first check: {text or 'no message'}.")
