"""Fixtures that let each scenario file run alone (`pytest molecule/default/tests/test_scenario_03_weights.py`)
or in any order: each test asks for the state it needs, and the fixture brings the simulated
cluster there only when it is not already so. In the full scenario's order (SPARK_ORDER) every fixture
finds its state in place and does nothing, so sharing one deployed lane costs no redeploys.
Test code only (not part of the collection)."""
from __future__ import annotations

import os

import pytest
from simlib import LANE, ROOT, SGLANG_LANE, lane_containers, run_playbook, staging_host_held

LANES = (LANE, SGLANG_LANE)
# Verify runs in two pytest-xdist workers (molecule.yml): the scenarios on the sim's two CPU nodes (the
# real-engine lane, then the recipe lanes) in one worker beside all the others in the other (in SPARK_ORDER).
# pytest-xdist's own xdist_group marks do nothing under pytest 9 (xdist 3.8 renames items through an
# attribute pytest 9 no longer reads), so the grouping is a scheduler: its "scope" is the group.
# In this order: the recipe lanes last, when the CPU worker has those nodes and the spark worker leaves a
# core idle (the real lane's first deploy is the longest thing either worker does: it goes first).
CPU_NODE_SCENARIOS = ("test_scenario_13_real_vllm.py", "test_scenario_14_fabric.py", "test_scenario_06_recipes.py")
# Tests in those files that use the stand-in lanes' nodes and lock: they run with the other scenarios.
SPARK_TESTS_IN_CPU_FILES = ("test_scenario_14_fabric.py::test_a_stand_in_lane_says_the_gate_cannot_run",)


# The order of the spark-node group. One deployed lane is shared by every test of the group, and a
# redeploy of its eight ranks is the costliest thing a test does (about two minutes on a loaded 2-core
# machine), so the order is chosen to need as few as possible: first every test that leaves the lane
# serving as it found it, then the tests that break it, placed so that the deploy that repairs it is
# one a test makes anyway (the ledger's first deploy, the keyed lane of the secrets test, the SGLang
# lane). An entry is a file or one test of it; the most specific entry places a
# test, and tests keep their file order within an entry. Every test still sets up what it needs when
# it runs alone or in another order (the fixtures below); only the time differs.
SPARK_ORDER = (
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
    "test_scenario_12_ssh.py",
    "test_scenario_14_fabric.py",
    "test_scenario_15_ledger.py::test_a_wedge_is_found_within_two_probes_and_healed_by_one_restart",
    "test_scenario_15_ledger.py::test_a_wedge_that_outlives_the_budget_is_reported_and_left",
    # Serving still, but on a plan with one flag changed: a plain deploy before the repair below would
    # recreate every rank (so the no-op re-run of scenario 5 must come before it).
    "test_scenario_02_ranks.py::test_one_changed_flag_recreates_the_ranks_and_nothing_else",
    # Each of these leaves a rank killed, a node restarted or a rank and the image removed; none needs
    # the lane serving after the first, and the ledger's first deploy below repairs them all.
    "test_scenario_05_day2.py::test_status_with_one_rank_killed_names_the_rank_and_exits_non_zero",
    "test_scenario_05_day2.py::test_status_with_a_node_stopped_names_the_node_unreachable",
    "test_scenario_01_images.py::test_a_fake_stream_server_on_the_port_is_refused_and_nothing_is_tagged",
    "test_scenario_15_ledger.py",
    # A restarted rank; then lanes that replace the seed lane anyway, the last two tearing down.
    "test_scenario_07_bench.py::test_a_rank_restarted_mid_run_makes_the_run_invalid",
    "test_scenario_09_secrets.py",
    "test_scenario_05_day2.py::test_a_torn_down_lane_is_not_deployed_and_its_archived_logs_read_back",
    "test_scenario_04_sglang_and_teardown.py",
)


def test_name(nodeid: str) -> str:
    """<file>::<test>[<id>] without the file's directory (a testinfra id holds slashes: ansible://host)."""
    return nodeid[nodeid.split("::", 1)[0].rfind("/") + 1:]


def spark_order(nodeid: str) -> int:
    """The index of the most specific SPARK_ORDER entry for a test (after every entry when none)."""
    name = test_name(nodeid)
    best, best_len = len(SPARK_ORDER), -1
    for index, entry in enumerate(SPARK_ORDER):
        if (name == entry or name.startswith((entry + "::", entry + "["))) and len(entry) > best_len:
            best, best_len = index, len(entry)
    return best


# The scenario tests `make test` (and so CI) leaves to `make test-extended` (LANEKIT_SCENARIOS=all), each
# with the test that proves the same code without a cluster and runs in every `make test`. Every
# feature keeps at least one end-to-end test in the CI tier; these prove again, on the cluster, a
# refinement whose logic the named test drives with the real code. Why: a 2-core CI machine has 90
# minutes, and a scenario's minutes there are mostly Ansible on nine simulated nodes
# (README: "How long make test takes"). tests/unit/test_molecule_layout.py checks that each named test exists.
EXTENDED_ONLY = {
    "test_scenario_03_weights.py::test_staging_killed_mid_copy_resumes_and_verifies":
        "tests/unit/plugins/module_utils/_weights/test__staging.py::test_resume_after_a_killed_run",
    "test_scenario_03_weights.py::test_flipped_byte_is_found_by_full_verify_and_only_that_file_is_fetched_again":
        "tests/unit/plugins/module_utils/_weights/test__staging.py::test_flipped_byte_full_verify_repairs_only_that_file",
    "test_scenario_11_relay.py::test_a_node_killed_mid_chain_is_reported_and_the_rest_complete":
        "tests/unit/plugins/modules/test_image_relay.py::test_a_node_whose_load_dies_mid_chain_fails_by_name_and_still_relays",
    "test_scenario_15_ledger.py::test_a_wedge_that_outlives_the_budget_is_reported_and_left":
        "tests/unit/plugins/action/test_lane_watch.py::test_a_wedge_that_outlives_the_budget_is_reported_once_and_left",
    "test_scenario_10_lock.py::test_a_stale_lock_is_broken_only_on_purpose_and_released_at_the_end":
        "tests/unit/plugins/modules/test_lane_lock.py::test_a_dead_holder_is_stale_and_broken_only_on_purpose",
    "test_scenario_10_lock.py::test_a_failed_deploy_releases_the_lock":
        "tests/unit/test_deploy_playbook.py::test_the_wrapper_imports_the_phase_role_and_releases_the_lock_when_it_fails",
    "test_scenario_01_images.py::test_lock_mismatch_stops_the_run_until_updated_on_purpose":
        "tests/unit/plugins/modules/test_image_build.py::test_lock_mismatch_stops_before_building",
    "test_scenario_06_recipes.py::test_a_router_that_refuses_its_arguments_is_triaged_with_the_routers_own_cause_and_fix":
        "tests/unit/plugins/module_utils/_boot/test__signatures.py::test_the_router_argument_line_replaces_the_engine_flag_finding",
    "test_scenario_01_images.py::test_truncated_digest_is_refused_with_the_key_to_set":
        "tests/unit/plugins/module_utils/_image/test__spec.py::test_truncated_override_is_blamed_on_the_variable_not_the_spec",
    "test_scenario_01_images.py::test_architecture_mismatch_is_refused_before_anything_runs":
        "tests/unit/plugins/modules/test_node_facts.py::test_the_node_check_compares_ansibles_architecture_in_docker_spelling",
    "test_scenario_01_images.py::test_patch_whose_target_line_is_missing_fails_the_build":
        "tests/unit/images/test_patch_barrier_timeout.py::test_missing_or_changed_line_fails_loudly",
    "test_scenario_03_weights.py::test_restaging_another_revision_while_the_lane_runs_leaves_its_files_alone":
        "tests/unit/plugins/module_utils/_weights/test__stage_revisions.py::"
        "test_a_new_revision_goes_to_its_own_directory_and_current_switches",
    "test_scenario_10_lock.py::test_a_second_deploy_is_refused_naming_both_owners":
        "tests/unit/plugins/module_utils/_lane/test__lock.py::test_the_refusal_names_both_owners_and_the_way_out",
    "test_scenario_07_bench.py::test_a_rank_restarted_mid_run_makes_the_run_invalid":
        "tests/unit/plugins/plugin_utils/_bench/test__gate.py::test_a_restart_during_the_run_makes_it_invalid",
    "test_scenario_11_relay.py::test_every_node_gets_the_pinned_image_through_the_relay":
        "tests/unit/plugins/modules/test_image_relay.py::test_a_chain_loads_every_node_and_the_builder_serves_only_the_first",
    "test_scenario_14_fabric.py::test_the_deploy_stops_before_any_rank_starts_on_a_slow_node":
        "tests/unit/plugins/action/test_fabric_gate.py::test_strict_fails_with_the_verdict_and_warn_goes_on",
}


def pytest_collection_modifyitems(items):
    if os.environ.get("LANEKIT_SCENARIOS", "ci") != "all":
        for item in items:
            proven_by = EXTENDED_ONLY.get(test_name(item.nodeid).split("[", 1)[0])
            if proven_by:
                item.add_marker(pytest.mark.skip(reason=f"make test-extended runs it; every make test runs {proven_by}"))
    # sort() is stable: within an entry the tests keep their collection (file) order. The CPU-node
    # group's tests fall after every entry, in CPU_NODE_SCENARIOS' order, and run in their own worker anyway.
    items.sort(key=lambda item: spark_order(item.nodeid) if node_group(item.nodeid) == "spark-nodes"
               else len(SPARK_ORDER) + CPU_NODE_SCENARIOS.index(test_name(item.nodeid).split("::", 1)[0]))


def node_group(nodeid: str) -> str:
    name = test_name(nodeid)
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
