"""Fixtures that let each scenario file run alone (`pytest molecule/default/tests/test_scenario_03_weights.py`)
or in any order: each test asks for the state it needs, and the fixture brings the simulated
cluster there only when it is not already so. In the full scenario's file order every fixture
finds its state in place and does nothing, so sharing one deployed lane costs no redeploys.
Test code only (not part of the collection)."""
from __future__ import annotations

import os

import pytest
from simlib import LANE, ROOT, SGLANG_LANE, lane_containers, run_playbook, staging_host_held

LANES = (LANE, SGLANG_LANE)
# Verify runs in two pytest-xdist workers (molecule.yml): the scenarios of the real-engine lane, on the
# sim's two CPU nodes, in one worker beside all the others in the other, each group in file order.
# pytest-xdist's own xdist_group marks do nothing under pytest 9 (xdist 3.8 renames items through an
# attribute pytest 9 no longer reads), so the grouping is a scheduler: its "scope" is the group.
CPU_NODE_SCENARIOS = ("test_scenario_13_real_vllm.py", "test_scenario_14_fabric.py")
# Tests in those files that use the stand-in lanes' nodes and lock: they run with the other scenarios.
SPARK_TESTS_IN_CPU_FILES = ("test_scenario_14_fabric.py::test_a_stand_in_lane_says_the_gate_cannot_run",)


def node_group(nodeid: str) -> str:
    name = nodeid.rsplit("/", 1)[-1]
    if name.split("::", 1)[0] in CPU_NODE_SCENARIOS and not name.startswith(SPARK_TESTS_IN_CPU_FILES):
        return "cpu-nodes"
    return "spark-nodes"


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # a scenario file run alone without pytest-xdist
    LoadScopeScheduling = None

if LoadScopeScheduling is not None:
    class LaneGroupScheduling(LoadScopeScheduling):
        """Each group is one scope: one worker runs all of it, in collection order."""

        def _split_scope(self, nodeid):
            return node_group(nodeid)

    def pytest_xdist_make_scheduler(config, log):
        return LaneGroupScheduling(config, log)


@pytest.fixture()
def staging_host_alone():
    """No other scenario's playbook on the shared staging host meanwhile (simlib.staging_host_held)."""
    with staging_host_held():
        yield


def _serving(lane: str) -> bool:
    ranks = lane_containers(lane)
    return len(ranks) == 8 and all(state == "running" for _unused, state in ranks.values())


def _remove_other_lanes(lane: str) -> None:
    """One lane per node: tear down (archiving their logs) any other lane's ranks."""
    for other in LANES:
        if other != lane and lane_containers(other):
            proc = run_playbook("teardown_lane.yml", lane=other, extra=["-e", "teardown_remove=true"])
            assert proc.returncode == 0, f"could not tear down {other} before using {lane}"


def _deploy(lane: str) -> None:
    _remove_other_lanes(lane)
    proc = run_playbook("deploy_lane.yml", lane=lane, timeout=1500)
    assert proc.returncode == 0, f"setting up: {lane} did not deploy"


@pytest.fixture()
def vllm_serving():
    """The vLLM seed lane serving on all 8 nodes (deployed only when it is not)."""
    if not _serving(LANE):
        _deploy(LANE)


@pytest.fixture()
def vllm_present():
    """Rank containers of the vLLM seed lane exist (running or failed); deployed when none do."""
    if not lane_containers(LANE):
        _deploy(LANE)


@pytest.fixture()
def vllm_only():
    """No other lane's ranks on the nodes (the fault tests deploy the vLLM lane themselves)."""
    _remove_other_lanes(LANE)


@pytest.fixture()
def vllm_staged():
    """The vLLM seed lane's plan file written and its weights staged (no ranks needed)."""
    if not os.path.isfile(os.path.join(ROOT, "reports", LANE, "plan.json")):
        proc = run_playbook("stage_weights.yml")
        assert proc.returncode == 0, "setting up: the vLLM lane's weights did not stage"


@pytest.fixture()
def sglang_only():
    _remove_other_lanes(SGLANG_LANE)


@pytest.fixture()
def sglang_serving():
    if not _serving(SGLANG_LANE):
        _deploy(SGLANG_LANE)
