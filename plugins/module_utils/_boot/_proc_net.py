# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The node's TCP tables (``/proc/net/tcp``, ``/proc/net/tcp6``) read as lanekit needs them.

One job: their addresses as text and the peers connected to a port (which nodes joined a rank's
rendezvous); ``_portowner`` reads the listeners from the same tables. Standard library only.
"""
from __future__ import annotations

import socket
import struct
from collections.abc import Iterable


def hex_address(text: str) -> str:
    """An address of /proc/net/tcp{,6} (hex, each 32-bit word in host order) as text; IPv4-mapped as IPv4."""
    raw = bytes.fromhex(text)
    words = b"".join(struct.pack("<I", struct.unpack(">I", raw[i:i + 4])[0]) for i in range(0, len(raw), 4))
    if len(words) == 4:
        return socket.inet_ntop(socket.AF_INET, words)
    if words[:12] == b"\x00" * 10 + b"\xff\xff":
        return socket.inet_ntop(socket.AF_INET, words[12:])
    return socket.inet_ntop(socket.AF_INET6, words)


def parse_proc_tcp(text: str, ports: Iterable[int]) -> dict[int, list[str]]:
    """{port: sorted remote IPs} of ESTABLISHED connections whose local port is in ports."""
    wanted = {int(p) for p in ports}
    peers: dict[int, set] = {p: set() for p in wanted}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4 or fields[3] != "01":
            continue
        _local_ip, local_port = fields[1].split(":")
        remote_ip, _remote_port = fields[2].split(":")
        port = int(local_port, 16)
        if port in wanted:
            peers[port].add(hex_address(remote_ip))
    return {p: sorted(ips) for p, ips in peers.items()}


def tcp_peers(ports: Iterable[int]) -> dict[int, list[str]]:
    result: dict[int, list[str]] = {int(p): [] for p in ports}
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path, encoding="ascii") as handle:
                text = handle.read()
        except OSError:
            continue
        for port, ips in parse_proc_tcp(text, ports).items():
            result[port] = sorted(set(result[port]) | set(ips))
    return result
