"""What every scenario's tests share (molecule/<scenario>/tests/conftest.py imports it): the fixtures
that let each scenario file run alone or in any order -- each test asks for the state it needs, and the
fixture brings the simulated cluster there only when it is not already so -- and the ordering and tiering
of a scenario's tests. In a scenario's own order (its conftest's ORDER) every fixture finds its state in
place and does nothing, so sharing one deployed lane costs no redeploys. Test code only (not part of
the collection)."""
from __future__ import annotations

import os

import pytest
from simlib import LANE, ROOT, SGLANG_LANE, lane_containers, run_playbook, staging_host_held

LANES = (LANE, SGLANG_LANE)


def test_name(nodeid: str) -> str:
    """<file>::<test>[<id>] without the file's directory (a testinfra id holds slashes: ansible://host)."""
    return nodeid[nodeid.split("::", 1)[0].rfind("/") + 1:]


def order_index(nodeid: str, order: tuple[str, ...]) -> int:
    """The index of the most specific entry of a scenario's ORDER for a test (after every entry when
    none). An entry is a file or one test of it; tests keep their file order within an entry."""
    name = test_name(nodeid)
    best, best_len = len(order), -1
    for index, entry in enumerate(order):
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
    # The end-to-end failing deploy stays in the CI tier as real-vllm's unknown flag (scenario 13: the
    # real engine's own line, named with the fix); in make test no deploy repairs what the tests before
    # it broke: the torn-down test takes the lane down as they left it (seed-lanes' conftest.ORDER).
    "test_scenario_15_ledger.py::test_three_deploys_one_failing_are_a_three_row_ledger_with_their_causes":
        "tests/unit/plugins/action/test_lane_ledger.py::test_three_deploys_one_failing_print_three_rows_with_the_right_causes",
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
    # The vLLM lane's own keyed deploy: the key and the secret env go through the same plan, env file and
    # teardown for either engine, and seed-lanes' SGLang deploy is keyed with a secret env (scenario 04,
    # which checks all this test does but vLLM's key guard); the guard on every other vLLM path is proven
    # on the real engine (real-vllm, scenario 13) and by tests/unit/plugins/plugin_utils/_plan/test__keyguard.py.
    "test_scenario_09_secrets.py::test_a_lane_with_a_key_and_a_secret_env_keeps_them_secret":
        "tests/unit/plugins/plugin_utils/_plan/test__secrets.py::"
        "test_vllm_reads_the_key_from_its_environment_and_starts_behind_the_key_guard",
    "test_scenario_14_fabric.py::test_the_deploy_stops_before_any_rank_starts_on_a_slow_node":
        "tests/unit/plugins/action/test_fabric_gate.py::test_strict_fails_with_the_verdict_and_warn_goes_on",
}


def order_and_tier(items: list, order: tuple[str, ...]) -> None:
    """A scenario's pytest_collection_modifyitems: skip the EXTENDED_ONLY tests unless
    LANEKIT_SCENARIOS=all, and run the rest in the scenario's ORDER (sort() is stable: within an entry
    the tests keep their collection order)."""
    if os.environ.get("LANEKIT_SCENARIOS", "ci") != "all":
        for item in items:
            proven_by = EXTENDED_ONLY.get(test_name(item.nodeid).split("[", 1)[0])
            if proven_by:
                item.add_marker(pytest.mark.skip(reason=f"make test-extended runs it; every make test runs {proven_by}"))
    items.sort(key=lambda item: order_index(item.nodeid, order))


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
