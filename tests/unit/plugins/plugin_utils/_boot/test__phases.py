"""Issue 28: a lane with something to do still skips the image and weights phases the probes proved
settled on every node, unless the run asks the phase for more than the probe proved."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._phases import (
    image_runs_more,
    phase_skip,
    settled_phases,
    weights_runs_more,
)

REV = "a" * 40
WEIGHTS = {"path": f"/mnt/models/m/.revisions/{REV}", "revision": REV, "model_id": "org/m", "layout": "hf"}
PLAN = {"weights": WEIGHTS}


def probe(**phases):
    base = {"image": [], "weights": [], "ranks": [], "ready": []}
    base.update(phases)
    return {"serving": not any(base.values()), "pending_phases": base}


def test_a_stopped_rank_on_one_node_settles_image_and_weights_only():
    results = [probe(), probe(ranks=["rank 3 is exited"], ready=["the API does not serve yet"]), probe()]
    assert settled_phases(results) == ["image", "weights"]


def test_a_reason_on_any_node_keeps_its_phase_and_a_silent_probe_keeps_every_phase():
    assert settled_phases([probe(), probe(image=["image x is not on this node"])]) == ["weights", "ranks", "ready"]
    # A probe that failed (failed_when: false) has no pending_phases: nothing is proven for the lane.
    assert settled_phases([probe(), {"failed": True, "msg": "docker: not found"}]) == []
    assert settled_phases([probe(), None]) == []
    assert settled_phases([]) == []


def test_a_phase_one_node_did_not_prove_is_not_settled():
    unproven = {"pending_phases": {"weights": [], "ranks": [], "ready": []}}  # no lock digests: no image key
    assert settled_phases([probe(), unproven]) == ["weights", "ranks", "ready"]


def test_the_image_and_weights_phases_are_skipped_with_one_line_each():
    image = phase_skip("image", ["image", "weights"], PLAN, {"image_rebuild": "changed"})
    assert image == {"skip": True, "why": "Skip the image phase: every node holds the pinned image (the preflight "
                                          "probe proved it)."}
    weights = phase_skip("weights", ["image", "weights"], PLAN, {"weights_verify": "quick", "weights_path": WEIGHTS["path"]})
    assert weights["skip"] and weights["why"].startswith("Skip the weights phase: every node sees the weights whole")
    assert "revision aaaaaaaaaaaa in /mnt/models/m/.revisions/" in weights["why"]


@pytest.mark.parametrize("phase", ["fabric", "cache", "ranks", "ready"])
def test_the_other_phases_always_run_even_when_settled(phase):
    assert phase_skip(phase, ["image", "weights", "ranks", "ready", "fabric", "cache"], PLAN, {}) == {"skip": False, "why": ""}


def test_a_phase_the_probe_did_not_settle_runs_without_a_word():
    assert phase_skip("image", ["weights"], PLAN, {}) == {"skip": False, "why": ""}
    assert phase_skip("weights", [], PLAN, {}) == {"skip": False, "why": ""}
    assert phase_skip("weights", None, None, None) == {"skip": False, "why": ""}


def test_the_plans_own_settings_ask_nothing_more_of_the_weights_phase():
    # What the weights role's defaults resolve to for this plan.
    settings = {"weights_verify": "quick", "weights_prune": False, "weights_path": WEIGHTS["path"],
                "weights_revision": REV, "weights_model_id": "org/m", "weights_layout": "hf",
                "weights_source": {"kind": "hf"}}
    assert weights_runs_more(WEIGHTS, settings) == []
    assert weights_runs_more(WEIGHTS, {}) == []
    # A plan without a layout: the role's default 'any' is the plan's.
    assert weights_runs_more(dict(WEIGHTS, layout=None), {"weights_layout": "any"}) == []


@pytest.mark.parametrize(("settings", "said"), [
    ({"weights_verify": "full"}, "weights_verify=full re-hashes every staged file"),
    ({"weights_prune": True}, "weights_prune removes files"),
    ({"weights_prune": "true"}, "weights_prune removes files"),
    ({"weights_revision": "b" * 40}, f"weights_revision={'b' * 40} is not the revision of the plan"),
    ({"weights_path": "/mnt/models/other"}, "weights_path=/mnt/models/other is not the path of the plan"),
    ({"weights_model_id": "org/other"}, "weights_model_id=org/other is not the model_id of the plan"),
    ({"weights_layout": "mistral_consolidated"}, "weights_layout=mistral_consolidated is not the layout of the plan"),
    ({"weights_source": {"kind": "local", "path": "/srv/other"}}, "is not the source of the plan"),
])
def test_a_run_that_asks_the_weights_phase_for_more_runs_it_and_says_why(settings, said):
    assert any(said in reason for reason in weights_runs_more(WEIGHTS, settings))
    decision = phase_skip("weights", ["image", "weights"], PLAN, settings)
    assert not decision["skip"]
    assert decision["why"].startswith("Run the weights phase although the preflight probe found it settled: ")
    assert said in decision["why"]


def test_pathless_weights_are_never_skipped_and_unpinned_ones_on_the_probes_proof():
    assert weights_runs_more({}, {}) == ["the plan names no weights path, so the probe checked none"]
    assert not phase_skip("weights", ["weights"], {"weights": {}}, {})["skip"]
    # An unpinned local mirror: the proof a serving lane's re-run always skipped it on (manifest, sizes).
    mirror = dict(WEIGHTS, revision=None, source={"kind": "local", "path": "/srv/mirror/m"})
    assert weights_runs_more(mirror, {"weights_revision": None, "weights_source": mirror["source"]}) == []
    assert phase_skip("weights", ["weights"], {"weights": mirror}, {})["skip"]


def test_a_rebuild_on_purpose_runs_the_image_phase():
    assert image_runs_more({"image_rebuild": "always"}) == ["image_rebuild=always rebuilds the image on purpose"]
    assert image_runs_more({"image_rebuild": "never"}) == [] and image_runs_more({}) == []
    assert not phase_skip("image", ["image"], PLAN, {"image_rebuild": "always"})["skip"]
