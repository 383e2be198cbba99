"""image_build's decision, taken without docker: what would be built, restored, kept, pushed and
locked, and why."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._docker_cli import image_pin
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image_spec import lock_verdict
from ansible_collections.lanekit.serving.plugins.modules.image_build import decide, decide_action

HASH = "a" * 64
OTHER = "b" * 64
REF = f"lanekit/thin:{HASH[:12]}"
RESOLVED = {"name": "thin", "arch": "amd64", "ref": REF, "content_hash": HASH}
PARAMS = {"rebuild": "changed", "restore_from": "", "registry": "", "build_dir": None, "images_dir": "/srv/images",
          "lock": None, "lock_file": "images/thin/image.lock.yml", "lock_update": False}


def _pin(content_hash):
    return image_pin({"Id": "sha256:" + "1" * 64, "Config": {"Labels": {"io.lanekit.content-hash": content_hash}},
                      "RootFS": {"Layers": ["sha256:" + "2" * 64]}, "Architecture": "amd64"})


ABSENT = image_pin(None)


@pytest.mark.parametrize("rebuild, restore_from, pin, action, reason_part", [
    ("changed", "", ABSENT, "build", "is not present on spark-01"),
    ("changed", "r:5000/lanekit/thin@sha256:" + "9" * 64, ABSENT, "restore", "is not present on spark-01"),
    ("changed", "", _pin(OTHER), "build", f"carries content hash {OTHER[:12]}, not {HASH[:12]}"),
    ("changed", "", _pin(HASH), "keep", f"is present on spark-01 with content hash {HASH[:12]}"),
    ("never", "", _pin(OTHER), "keep", "and rebuild is never"),
    ("never", "", ABSENT, "build", "is not present"),
    ("always", "r:5000/lanekit/thin@sha256:" + "9" * 64, _pin(HASH), "build", "rebuild is always"),
])
def test_the_action_follows_the_image_present_and_the_rebuild_policy(rebuild, restore_from, pin, action, reason_part):
    got, reason, _ = decide_action(REF, HASH, "spark-01", pin, rebuild, restore_from)
    assert got == action and reason_part in reason


def test_keeping_a_stale_image_on_purpose_warns():
    _, _, warning = decide_action(REF, HASH, "spark-01", _pin(OTHER), "never", "")
    assert warning == f"{REF} on spark-01 does not carry content hash {HASH[:12]}; kept because rebuild is never."
    assert decide_action(REF, HASH, "spark-01", _pin(HASH), "never", "")[2] == ""


def test_the_build_runs_in_a_context_named_by_the_content_hash():
    plan = decide(PARAMS, RESOLVED, ABSENT, "spark-01")
    context = f"/srv/images/.build/thin/{HASH[:12]}"
    assert plan.context == context
    assert plan.build_args == ("build", "--tag", REF, "--file", f"{context}/Dockerfile", context)
    assert decide(dict(PARAMS, build_dir="/tmp/b"), RESOLVED, ABSENT, "h").context == f"/tmp/b/{HASH[:12]}"


def test_the_push_target_is_named_only_with_a_registry():
    assert (decide(PARAMS, RESOLVED, ABSENT, "h").push_target) == ""
    plan = decide(dict(PARAMS, registry="spark-01:5000/"), RESOLVED, ABSENT, "h")
    assert plan.push_repository == "spark-01:5000/lanekit/thin"
    assert plan.push_target == f"spark-01:5000/lanekit/thin:{HASH[:12]}"


def _lock(content_hash):
    return {"version": 1, "name": "thin", "arches": {"amd64": {"content_hash": content_hash, "base_digest": "sha256:" + "c" * 64}}}


def test_the_lock_verdict_is_absent_match_or_a_stop():
    current = {"content_hash": HASH, "base_digest": "sha256:" + "c" * 64}
    assert lock_verdict(PARAMS, RESOLVED, current) == ("absent", "")
    assert lock_verdict(dict(PARAMS, lock=_lock(HASH)), RESOLVED, current) == ("match", "")
    with pytest.raises(LanekitError, match="image.lock.yml"):
        lock_verdict(dict(PARAMS, lock=_lock(OTHER)), RESOLVED, current)


def test_an_accepted_lock_disagreement_is_announced():
    status, sentence = lock_verdict(dict(PARAMS, lock=_lock(OTHER), lock_update=True), RESOLVED,
                                    {"content_hash": HASH})
    assert status == "update"
    assert sentence.startswith("the lock images/thin/image.lock.yml will be updated: ") and "content_hash" in sentence
