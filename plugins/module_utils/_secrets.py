# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The node's side of the lane's secret channel: the env file and the hash that proves it current.

One job: what the controller and a node must agree on about a lane's env file
(``/etc/lanekit/secrets/<lane>.env``): its path, its NAME=value lines and the salted hash of its
values. The plan records the hash; a node (``lane_probe``) computes it from the file it holds.
Standard library only: modules on the nodes ship this file, so the checks of the inventory's
secrets and the plan's side, which need the lane schema and the engine table, live in
``plugin_utils/_plan/_secrets.py``. Messages here never include a secret's value.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# On every node: root-owned 0700, one 0600 file per lane.
SECRET_DIR = "/etc/lanekit/secrets"
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class Secrets:
    """The checked secret values of one lane (never written to the plan)."""

    api_key: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.api_key) or bool(self.env)

    def file_env(self, key_env: str) -> dict[str, str]:
        """name -> value as the node's env file holds them (the key under ``key_env``)."""
        out = dict(self.env)
        if self.api_key:
            out[key_env] = self.api_key
        return out

    def digest(self, lane: str, key_env: str) -> str:
        """A hash of the values: it moves when any secret changes, so the ranks are recreated.

        scrypt rather than one SHA-256: plan.json (0600) holds this hash, and a short key must
        not be guessable offline at billions of tries a second from a copy of it. The lane name
        salts it, so equal secrets of two lanes hash apart.
        """
        return env_digest(lane, self.file_env(key_env))

    def values(self) -> list[str]:
        return [v for v in [self.api_key, *self.env.values()] if v]


def env_digest(lane: str, env: Mapping[str, str]) -> str:
    """The salted scrypt hash of a lane's env file values (``Secrets.digest``); a node computes the
    same from the file it holds, so a re-run proves the file is current without seeing the values."""
    data = json.dumps({"lane": lane, "env": dict(env)}, sort_keys=True, separators=(",", ":"))
    salt = f"lanekit-secrets-v2:{lane}".encode()
    return hashlib.scrypt(data.encode(), salt=salt, n=1 << 14, r=8, p=1, maxmem=64 << 20, dklen=32).hex()


def parse_env_file(text: str) -> dict[str, str]:
    """NAME=value lines as ``env_file_text`` writes them (docker's --env-file format, no quoting)."""
    env = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and ENV_NAME_RE.fullmatch(name):
            env[name] = value
    return env


def env_file_path(lane: str) -> str:
    return f"{SECRET_DIR}/{lane}.env"


def env_file_text(env: Mapping[str, str]) -> str:
    return "".join(f"{name}={env[name]}\n" for name in sorted(env))
