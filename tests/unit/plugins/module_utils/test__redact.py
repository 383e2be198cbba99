# Copyright: lanekit developers
# Apache-2.0
"""Issue 38, item 11: one rule for "is this name key-like" (module_utils/_redact.py), shared by the evidence,
the ledger's changes and the plan diff."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils import _redact

TOKEN = "hf_" + "a1B2c3D4e5" * 4


@pytest.mark.parametrize("name", [
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "--hf-token", "--api-key", "VLLM_API_KEY", "OPENAI_API_KEY", "KEY",
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "PGPASSWORD", "MYSQL_PWD", "REDIS_PASS",
    "apiKey", "APIKEY", "AUTH_TOKEN", "OAUTH", "GOOGLE_APPLICATION_CREDENTIALS", "MY_SECRET", "TOKEN2",
])
def test_key_like_names(name):
    assert _redact.key_like(name) and _redact.secretish(name)


@pytest.mark.parametrize("name", [
    # Tuning a person must see change in the ledger and the plan diff: "token" inside a word is no secret.
    "--max-num-batched-tokens", "--max-total-tokens", "--tokenizer", "--tokenizer-mode", "TOKENIZERS_PARALLELISM",
    "--max-num-seqs", "NCCL_DEBUG", "--served-model-name", "--ssl-keyfile", "AUTHOR",
])
def test_names_that_are_not_key_like(name):
    assert not _redact.key_like(name) and not _redact.secretish(name)


def test_a_token_is_known_by_its_shape_under_any_name():
    assert _redact.secret_value(TOKEN) and _redact.secret_value(f"--hf-overrides {TOKEN}")
    assert not _redact.secret_value("hf_transfer") and not _redact.secret_value("0.85")
    assert _redact.shown_value("--model-loader-extra-config", TOKEN) == _redact.REDACTED


def test_shown_value_hides_a_key_like_value_and_keeps_unset_and_empty():
    assert _redact.shown_value("HF_TOKEN", "abc") == _redact.REDACTED
    assert _redact.shown_value("HF_TOKEN", None) is None and _redact.shown_value("--api-key", "") == ""
    assert _redact.shown_value("--max-num-seqs", "64") == "64"
