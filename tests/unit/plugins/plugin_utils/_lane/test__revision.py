"""Issue 23: pin's Hub revision decisions with a canned Hub (plugin_utils/_lane/_revision.py)."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane import _revision

SHA = "0123456789abcdef0123456789abcdef01234567"


class RevisionNotFoundError(Exception):
    """Named as huggingface_hub names it: the sentence's hint is chosen by the class name."""


def test_a_hub_model_is_read_from_the_lane_and_a_local_one_has_nothing_to_pin():
    source = {"kind": "hf", "endpoint": "https://m"}
    hub = _revision.hub_model("l.yml", {"model": {"id": "org/m", "revision": None, "source": source}})
    assert hub == _revision.HubModel(repo="org/m", current=None, endpoint="https://m")
    assert _revision.hub_model("l.yml", {"model": {"id": "org/m", "source": {"kind": "local", "path": "/x"}}}) is None
    with pytest.raises(LanekitError, match="l.yml: key 'model.id' is missing"):
        _revision.hub_model("l.yml", {"model": {}})


def test_the_hub_answer_is_the_commit():
    asked = []

    def fetch(repo, ref):
        asked.append((repo, ref))
        return SHA
    assert _revision.resolve_revision(_revision.HubModel("org/m", None, None), "main", fetch, "l.yml") == SHA
    assert asked == [("org/m", "main")]


def test_hub_failures_are_one_sentence_with_the_fix():
    def missing(repo, ref):
        raise RevisionNotFoundError("404 Client Error.\n\nRevision Not Found for url: https://huggingface.co/...")
    with pytest.raises(LanekitError) as err:
        _revision.resolve_revision(_revision.HubModel("org/m", None, None), "v9", missing, "l.yml")
    assert str(err.value) == ("could not read revision 'v9' of org/m from the Hub for l.yml: RevisionNotFoundError: "
                              "404 Client Error.; check -e pin_revision (a branch, tag or commit of the repository).")

    def offline(repo, ref):
        raise OSError("Network is unreachable")
    with pytest.raises(LanekitError, match=r"OSError: Network is unreachable; check the controller's network"):
        _revision.resolve_revision(_revision.HubModel("org/m", None, None), "main", offline, "l.yml")


def test_an_answer_that_is_not_a_commit_is_refused():
    with pytest.raises(LanekitError, match="which is not a 40-character commit id"):
        _revision.resolve_revision(_revision.HubModel("org/m", None, None), "main", lambda r, v: "main", "l.yml")
