"""deploy_lane.yml's shape: the preflight probes a re-run, and every phase play after it ends at once
for a lane that already serves its plan (and the image and weights plays for a phase the probe proved
settled, issue 28), while the play that releases the lock always runs."""
from __future__ import annotations

import os

import jinja2
import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = {"ansible.builtin.meta": "end_host", "when": "lanekit_lane_serving | default(false)"}
SETTLED_SKIP = {"ansible.builtin.meta": "end_host", "when": "__phase_skip.skip"}


def plays() -> list[dict]:
    with open(os.path.join(ROOT, "playbooks", "deploy_lane.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_the_preflight_play_turns_the_rerun_probe_on_and_can_be_told_not_to():
    preflight = next(p for p in plays() if p.get("roles"))
    role = preflight["roles"][0]
    assert role["role"] == "lanekit.serving.preflight"
    assert role["vars"]["preflight_serving_probe"] == "{{ lanekit_rerun_probe | default(true) }}"


def phase_tasks() -> list[dict]:
    with open(os.path.join(ROOT, "playbooks", "tasks", "phase.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_every_phase_play_starts_by_ending_for_a_serving_lane():
    phases = [p for p in plays() if "tasks" in p and p["name"] != "Release the lane lock"]
    assert len(phases) == 6, [p["name"] for p in phases]  # image, fabric, weights, cache, ranks, ready
    for play in phases:
        # Each phase is the one wrapper (issue 24), naming its role in the play's vars.
        assert [t.get("ansible.builtin.import_tasks") for t in play["tasks"]] == ["tasks/phase.yml"], play["name"]
        assert play["vars"]["lanekit_phase"] == play["tags"][0], play["name"]
    first = phase_tasks()[0]
    assert {k: first.get(k) for k in SKIP} == SKIP
    # Then the skip of a phase the probe proved settled (issue 28), decided once by the filter ...
    decide, say, settled = phase_tasks()[1:4]
    assert "lanekit.serving.phase_skip(lanekit_phases_settled" in decide["ansible.builtin.set_fact"]["__phase_skip"]
    assert decide["run_once"] is True and say["run_once"] is True and say["ansible.builtin.debug"]["msg"] == "{{ __phase_skip.why }}"
    assert {k: settled.get(k) for k in SETTLED_SKIP} == SETTLED_SKIP
    # ... and the phase itself comes after them, never before.
    assert all("meta" not in str(t) for t in phase_tasks()[4:])


def test_the_wrapper_imports_the_phase_role_and_releases_the_lock_when_it_fails():
    run = next(t for t in phase_tasks() if "block" in t)
    assert run["block"][0]["ansible.builtin.import_role"]["name"] == "lanekit.serving.{{ lanekit_phase }}"
    # Issue 26: the failed deploy becomes a ledger line first (unlock.yml ends the failed host's run).
    ledger, release = run["rescue"][0], run["rescue"][1]
    assert ledger["lanekit.serving.lane_ledger"]["mode"] == "append" and "lanekit_ledger_event is defined" in ledger["when"]
    assert release["ansible.builtin.include_role"]["tasks_from"] == "unlock.yml"
    assert release["vars"] == {"preflight_unlock_after_failure": True}


def test_each_phase_marks_its_begin_for_the_ledger_after_the_skip():
    mark = phase_tasks()[4]
    assert "lanekit_phase_marks" in mark["ansible.builtin.set_fact"] and "when" not in mark
    deploy = [p for p in plays() if "tasks" in p and p["name"] != "Release the lane lock"]
    assert all(p["vars"]["lanekit_ledger_event"] == "deploy" for p in deploy)
    release = next(p for p in plays() if p.get("name") == "Release the lane lock")
    assert release["tasks"][-1]["lanekit.serving.lane_ledger"]["event"] == "deploy"


@pytest.mark.parametrize(("playbook", "phases"), [
    ("build_images.yml", ["image"]),
    ("fabric_lane.yml", ["fabric"]),
    ("stage_weights.yml", ["weights", "cache"]),
])
def test_the_other_playbooks_wrap_their_phases_with_the_same_file(playbook, phases):
    with open(os.path.join(ROOT, "playbooks", playbook), encoding="utf-8") as handle:
        wrapped = [p for p in yaml.safe_load(handle)
                   if any(t.get("ansible.builtin.import_tasks") == "tasks/phase.yml" for t in p.get("tasks", []))]
    assert [p["vars"]["lanekit_phase"] for p in wrapped] == phases
    assert "block" not in str([p["tasks"] for p in wrapped])


def test_the_lock_is_released_also_when_the_phases_are_skipped():
    release = next(p for p in plays() if p.get("name") == "Release the lane lock")
    assert all("end_host" not in str(task) for task in release["tasks"])
    assert release["tasks"][0]["ansible.builtin.include_role"]["tasks_from"] == "unlock.yml"


def test_each_phase_has_its_tag_and_the_plan_lock_and_release_always_run():
    # Issue 23: --tags ranks,ready runs those phases, still planned, locked and unlocked.
    phases = [p for p in plays() if "tasks" in p and p["name"] != "Release the lane lock"]
    assert [p["tags"] for p in phases] == [["image"], ["fabric"], ["weights"], ["cache"], ["ranks"], ["ready"]]
    always = [p for p in plays() if p.get("tags") == ["always"]]
    assert [p.get("name") for p in always] == ["Check the inventory before anything else",
                                               "Plan the lane and check the nodes before anything boots",
                                               "Release the lane lock"]


def test_the_preflight_publishes_the_settled_phases_where_it_decides_the_serving_lane():
    # Issue 28: one lane-wide fact, from every probed node's result, by the filter (no logic in Jinja).
    with open(os.path.join(ROOT, "roles", "preflight", "tasks", "serving.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    decide = next(t for t in tasks if "lanekit_lane_serving" in t.get("ansible.builtin.set_fact", {}))
    settled = decide["ansible.builtin.set_fact"]["lanekit_phases_settled"]
    assert "preflight_probed | map('extract', hostvars)" in settled and "| lanekit.serving.phases_settled" in settled
    assert decide["run_once"] is True


def test_the_ready_wait_is_told_when_the_ranks_phase_began():
    """A lane healthy at the wait's first poll is still this run's boot when its ranks started after
    the ranks phase's mark (lane_wait's boot_since): the mark reaches the wait through the ready role."""
    with open(os.path.join(ROOT, "roles", "ready", "defaults", "main.yml"), encoding="utf-8") as handle:
        default = yaml.safe_load(handle)["ready_boot_since"]
    with open(os.path.join(ROOT, "roles", "ready", "tasks", "main.yml"), encoding="utf-8") as handle:
        wait = next(t for t in yaml.safe_load(handle) if "lanekit.serving.lane_wait" in t)
    assert wait["lanekit.serving.lane_wait"]["boot_since"] == "{{ ready_boot_since if ready_boot_since else omit }}"
    template = jinja2.Environment().from_string(default)
    mark = "2026-12-02T11:58:40.123456Z"
    assert template.render(lanekit_phase_marks={"image": "x", "ranks": mark}) == mark
    assert template.render(lanekit_phase_marks={"image": "x"}) == "" and template.render() == ""
