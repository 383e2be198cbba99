"""seed-lanes: the two seed lanes on the simulated cluster's eight stand-in nodes, and what a user does
with them (images, ranks, weights, day-2, lock, relay, secrets, bench, ledger, watch). Test code only
(not part of the collection)."""
from __future__ import annotations

import os
import sys

# The scenarios' shared helpers (simlib) and fixtures live in molecule/shared/tests.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "shared", "tests"))

from lanefixtures import (  # noqa: E402
    order_and_tier,
    sglang_only,
    staging_host_alone,
    vllm_only,
    vllm_present,
    vllm_serving,
    vllm_staged,
)

# The shared fixtures this scenario's tests ask for: pytest finds a fixture by its name in conftest.
__all__ = ["sglang_only", "staging_host_alone", "vllm_only", "vllm_present", "vllm_serving",
           "vllm_staged"]

# The order of this scenario's tests. One deployed lane is shared by every test, and a redeploy of its
# eight ranks is the costliest thing a test does (about two minutes on a loaded 2-core machine), so the
# order is chosen to need as few as possible: first every test that leaves the lane serving as it found
# it, then the tests that break it, then its teardown, placed so that no deploy repairs it in make test
# (in make test-extended, the ledger's first deploy does). An entry is a file or
# one test of it; the most specific entry places a test, and tests keep their file order within an
# entry. Every test still sets up what it needs when it runs alone or in another order (the fixtures in
# lanefixtures.py); only the time differs. The scenario ends as it began on a bare cluster: no lane
# deployed (scenario 04 tears the last one down).
ORDER = (
    # Serving, and left serving.
    "test_lane.py",
    "test_scenario_01_images.py",
    "test_scenario_02_ranks.py",
    "test_scenario_03_weights.py",
    "test_scenario_05_day2.py",
    "test_scenario_10_lock.py",
    "test_scenario_07_bench.py",
    "test_scenario_08_bench_host.py",
    "test_scenario_11_relay.py",
    "test_scenario_16_fabric_stand_in.py",
    "test_scenario_15_ledger.py::test_a_wedge_is_found_within_two_probes_and_healed_by_one_restart",
    "test_scenario_15_ledger.py::test_a_wedge_that_outlives_the_budget_is_reported_and_left",
    # Serving still, but on a plan with one flag changed: a plain deploy after it recreates every rank
    # (so the no-op re-run of scenario 5 must come before it).
    "test_scenario_02_ranks.py::test_one_changed_flag_recreates_the_ranks_and_nothing_else",
    # Each of these leaves a rank killed or a node restarted; the lane's teardown (the torn-down test)
    # takes what is left, every rank's log archived. In make test-extended, the ledger's first deploy
    # repairs the lane first, for the restarted rank of the bench and the vLLM lane's keyed deploy.
    "test_scenario_05_day2.py::test_status_with_one_rank_killed_names_the_rank_and_exits_non_zero",
    "test_scenario_05_day2.py::test_status_with_a_node_stopped_names_the_node_unreachable",
    "test_scenario_15_ledger.py",
    "test_scenario_07_bench.py::test_a_rank_restarted_mid_run_makes_the_run_invalid",
    "test_scenario_09_secrets.py",
    "test_scenario_05_day2.py::test_a_torn_down_lane_is_not_deployed_and_its_archived_logs_read_back",
    # No lane now, the pinned image still on every node: a node that lost it gets it back only through
    # the stream. Then the SGLang lane, keyed, which ends the scenario with its teardown.
    "test_scenario_01_images.py::test_a_fake_stream_server_on_the_port_is_refused_and_nothing_is_tagged",
    "test_scenario_04_sglang_and_teardown.py",
)


def pytest_collection_modifyitems(items):
    order_and_tier(items, ORDER)
