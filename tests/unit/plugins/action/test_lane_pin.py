"""Issue 38 (items 3 and 11): pin sends a Hub token only when one is given or asked for, only to an endpoint the
staging path's check accepts, and takes it from a file or the environment rather than the command line."""
from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.action import lane_pin
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.modules import lane_pin as lane_pin_doc
from tests.unit.helpers.lane_fakes import action_module

SAVED = "hf_saved_on_the_controller"
GIVEN = "hf_given_for_this_pin"


@pytest.fixture
def saved_token(tmp_path, monkeypatch):
    """The controller is logged in: a token in HF_HOME/token and in HF_TOKEN (which the client reads first)."""
    from huggingface_hub import constants
    home = tmp_path / "hf-home"
    home.mkdir()
    (home / "token").write_text(SAVED)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_TOKEN", SAVED)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    return monkeypatch


def _lane(tmp_path, endpoint: str, repo: str) -> str:
    lanes = tmp_path / "lanes"
    lanes.mkdir(mode=0o755)
    doc = {"lane": "pinme", "model": {"id": repo, "revision": None, "source": {"kind": "hf", "endpoint": endpoint}}}
    (lanes / "pinme.yml").write_text(yaml.safe_dump(doc))
    return str(lanes)


def _pin(tmp_path, lanes: str, **extra):
    args = {"lane": "pinme", "lanes_dir": lanes, "images_dir": str(tmp_path), "image": False, **extra}
    return action_module(lane_pin.ActionModule, args).run(task_vars={})


def test_argument_spec_matches_the_documentation():
    documented = yaml.safe_load(lane_pin_doc.DOCUMENTATION)["options"]
    assert set(documented) == set(lane_pin.ARGUMENT_SPEC)
    for name, spec in lane_pin.ARGUMENT_SPEC.items():
        assert documented[name].get("type") == spec["type"], name
        assert documented[name].get("default") == spec.get("default"), name


def test_a_mirror_named_by_a_lane_gets_no_saved_token_when_none_is_given(fake_hub, tmp_path, saved_token):
    result = _pin(tmp_path, _lane(tmp_path, fake_hub.endpoint, fake_hub.repo_id))
    assert not result.get("failed"), result.get("msg")
    assert result["revision"] == fake_hub.commit
    assert fake_hub.tokens_seen == [], "the controller's saved token went to the lane's mirror"


def test_a_token_is_refused_for_a_plain_http_mirror_and_sent_to_the_named_one(fake_hub, tmp_path, saved_token):
    with pytest.raises(LanekitError, match="plain http: the Hub token would cross the network in clear"):
        lane_pin.hub_fetch(GIVEN, "http://mirror.example")
    # ...and the host's own token, sent on purpose, is held to the same check.
    with pytest.raises(LanekitError, match="plain http"):
        lane_pin.hub_fetch(True, "http://mirror.example")
    saved_token.setenv("HF_ENDPOINT", "https://elsewhere.example")
    with pytest.raises(LanekitError, match="HF_ENDPOINT=https://elsewhere.example"):
        lane_pin.hub_fetch(GIVEN, None)
    saved_token.delenv("HF_ENDPOINT")
    assert lane_pin.hub_fetch(GIVEN, fake_hub.endpoint)(fake_hub.repo_id, "main") == fake_hub.commit
    assert set(fake_hub.tokens_seen) == {f"Bearer {GIVEN}"}


def test_the_pin_action_refuses_a_token_for_a_plain_http_mirror_naming_the_lane_file(tmp_path, saved_token):
    lanes = _lane(tmp_path, "http://mirror.example", "org/m")
    result = _pin(tmp_path, lanes, hf_token=GIVEN)
    assert result["failed"]
    assert result["msg"].startswith(os.path.join(lanes, "pinme.yml") + ": model.source.endpoint http://mirror.example "
                                    "is plain http")
    assert GIVEN not in result["msg"]


def test_the_token_comes_from_a_private_file_or_the_host_s_login_when_asked(fake_hub, tmp_path, saved_token):
    token_file = tmp_path / "hf-token"
    token_file.write_text(f"{GIVEN}\n")
    token_file.chmod(0o600)
    lanes = _lane(tmp_path, fake_hub.endpoint, fake_hub.repo_id)
    result = _pin(tmp_path, lanes, hf_token_file=str(token_file))
    assert not result.get("failed"), result.get("msg")
    assert fake_hub.tokens_seen and set(fake_hub.tokens_seen) == {f"Bearer {GIVEN}"}
    fake_hub.tokens_seen.clear()
    result = _pin(tmp_path, lanes, use_host_token=True)
    assert not result.get("failed"), result.get("msg")
    assert fake_hub.tokens_seen and set(fake_hub.tokens_seen) == {f"Bearer {SAVED}"}


def test_a_token_file_others_can_read_or_that_is_not_one_token_is_refused(tmp_path):
    token_file = tmp_path / "hf-token"
    token_file.write_text(GIVEN)
    token_file.chmod(0o644)
    with pytest.raises(LanekitError, match=f"{token_file} is readable by other users .*chmod 600 {token_file}"):
        lane_pin.hub_token({"hf_token_file": str(token_file)})
    token_file.chmod(0o600)
    assert lane_pin.hub_token({"hf_token_file": str(token_file)}) == GIVEN
    token_file.write_text("")
    with pytest.raises(LanekitError, match=f"{token_file} holds no token"):
        lane_pin.hub_token({"hf_token_file": str(token_file)})
    token_file.write_text("a b\nc")
    with pytest.raises(LanekitError, match="one line"):
        lane_pin.hub_token({"hf_token_file": str(token_file)})
    assert lane_pin.hub_token({}) is False
    assert lane_pin.hub_token({"use_host_token": True}) is True
    assert lane_pin.hub_token({"hf_token": GIVEN, "use_host_token": True}) == GIVEN


def test_a_token_given_on_the_command_line_is_warned_about_without_its_value():
    warned = lane_pin.command_line_token_warnings(["lane=x", f"pin_hf_token={GIVEN}", "@vault.yml"])
    assert len(warned) == 1 and GIVEN not in warned[0]
    assert "pin_hf_token" in warned[0] and "ps" in warned[0] and "pin_hf_token_file" in warned[0]
    assert lane_pin.command_line_token_warnings([f'{{"weights_hf_token": "{GIVEN}"}}'])
    assert lane_pin.command_line_token_warnings(["lane=x", "@secrets.yml"]) == []
