"""Fixtures for the stand-in engine tests (helpers in standin_helpers.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from standin_helpers import MAKE_CHECKPOINT, PY, Rank  # noqa: E402


@pytest.fixture
def ranks(tmp_path):
    """Start ranks with ranks.start(name, argv, env); every one is killed at teardown."""
    started: list[Rank] = []

    class Starter:
        def start(self, name: str, argv: list[str], env: dict) -> Rank:
            r = Rank(argv, env, str(tmp_path / f"{name}.log"))
            started.append(r)
            return r

    yield Starter()
    for r in started:
        r.kill()


@pytest.fixture(scope="session")
def ckpt(tmp_path_factory):
    out = tmp_path_factory.mktemp("ckpt") / "Mistral-Synthetic"
    subprocess.run([PY, MAKE_CHECKPOINT, "--out", str(out), "--size-mib", "2", "--shards", "2"], check=True,
                   stdout=subprocess.DEVNULL, timeout=60)
    return str(out)
