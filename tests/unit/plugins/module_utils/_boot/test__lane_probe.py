"""Issue 28: the probe's reasons grouped by the deploy phase that would act on them, so that a lane
with something to do on one phase still skips the phases the probe proved settled."""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _lane_probe as verdicts


def test_each_reason_goes_to_the_phase_that_acts_on_it():
    phases = verdicts.by_phase(["image x is not on this node"], ["weights: no manifest"], ["rank 1 is exited"],
                               ["the secrets file is missing"], ["the API does not serve yet"], ["r2 /health answers 503"])
    assert phases == {"image": ["image x is not on this node"], "weights": ["weights: no manifest"],
                      "ranks": ["rank 1 is exited", "the secrets file is missing"],
                      "ready": ["the API does not serve yet", "r2 /health answers 503"]}
    assert tuple(phases) == verdicts.PROBED_PHASES


def test_a_settled_phase_has_an_empty_list_and_an_unproven_one_no_key():
    # A stopped rank: the image and weights are settled on this node, the ranks phase is not.
    phases = verdicts.by_phase([], [], ["rank 3 is exited"], [], [], [])
    assert phases == {"image": [], "weights": [], "ranks": ["rank 3 is exited"], "ready": []}
    # Without the lock's digests the image is not fully proven, without a weights path the weights not.
    unproven = verdicts.by_phase([], [], [], [], [], [], image_proven=False, weights_proven=False)
    assert unproven == {"ranks": [], "ready": []}


def test_the_verdict_carries_the_phases_only_when_given():
    assert verdicts.verdict(["a"]) == {"serving": False, "pending": ["a"]}
    assert verdicts.verdict([], {"image": []}) == {"serving": True, "pending": [], "pending_phases": {"image": []}}
