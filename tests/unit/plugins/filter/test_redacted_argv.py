"""The check-mode preview of a rank prints its docker run argv without secret-looking values (issue 38, item 11)."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.lanekit.serving.plugins.filter.redacted_argv import redacted_argv


def test_key_like_env_flags_and_token_shaped_values_are_hidden_and_tuning_is_not():
    token = "hf_" + "a" * 34
    argv = ["docker", "run", "-e", "HF_TOKEN=abc123", "-e", "VLLM_LOGGING_LEVEL=INFO", "--env=apiKey=zzzz",
            "--env", "NOTE=" + token, "img", "vllm", "serve", "--api-key", "sk-secret-value-0000000000",
            "--hf-token=xyz", "--max-num-batched-tokens", "8192", "--revision", token]
    shown = redacted_argv(argv)
    text = " ".join(shown)
    for secret in ("abc123", "zzzz", token, "sk-secret-value", "xyz"):
        assert secret not in text, secret
    assert "VLLM_LOGGING_LEVEL=INFO" in shown and "HF_TOKEN=********" in shown and "--env=apiKey=********" in shown
    assert shown[shown.index("--max-num-batched-tokens") + 1] == "8192"
    assert len(shown) == len(argv), "one word per word: the printed command keeps its shape"


def test_a_value_that_is_not_an_argv_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="needs an argv list"):
        redacted_argv("docker run")


def test_the_ranks_role_hides_a_container_result_exactly_when_redaction_changes_the_argv():
    """roles/ranks/tasks/secrets.yml hides a rank's docker result (its env, old and new) when redacted_argv
    changes the rank's argv: never for the seed lanes as shipped, always for a secret-looking serve.env value."""
    from tests.unit.helpers.plans import SGLANG, VLLM, plan

    for lane in (VLLM, SGLANG):
        result, _findings = plan(lane)
        assert all(redacted_argv(r["docker_argv"]) == r["docker_argv"] for r in result["ranks"]), lane
    leaky, _findings = plan(VLLM, overrides={"serve": {"env": {"HF_TOKEN": "hf_" + "b" * 34}}})
    assert all(redacted_argv(r["docker_argv"]) != r["docker_argv"] for r in leaky["ranks"])
