"""The KV-budget math against the bring-up report's live figures (GMU boot-1 lesson)."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import PROFILES
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _kvbudget

GB10 = PROFILES["dgx_spark_gb10"]
BPT = 51226  # bytes per token, from the lane file


def assess(fraction, max_len=524288):
    return _kvbudget.assess(fraction, max_len, BPT, GB10["device_memory_gib"], 73.8, 5.0, GB10["admission_free_gib"])


def test_report_figures_at_085():
    result = assess(0.85)
    assert result["kv_budget_gib"] == pytest.approx(23.63, abs=0.005)
    assert result["max_tokens"] == 495296  # "estimated maximum model length is 495296"
    assert result["request_gib"] == pytest.approx(25.0, abs=0.05)  # a 512K request needs 25 GiB
    assert result["fits"] is False
    assert result["smallest_fraction"] == 0.87


def test_089_adds_about_4_9_gib_and_stays_under_the_ceiling():
    low, high = assess(0.85), assess(0.89)
    assert high["kv_budget_gib"] - low["kv_budget_gib"] == pytest.approx(4.9, abs=0.1)
    assert high["fits"] is True
    assert high["claim_gib"] < 108.78
    assert high["admitted"] is True


def test_fraction_above_admission_ceiling_is_refused():
    result = assess(0.95)
    assert result["fits"] is True
    assert result["admitted"] is False
    assert result["ceiling_fraction"] == pytest.approx(108.78 / GB10["device_memory_gib"], abs=1e-4)
    text = _kvbudget.explain(result, "--gpu-memory-utilization")
    assert "108.78 GiB" in text and "0.87" in text and "0.90" in text


def test_explain_names_the_smallest_fraction_and_the_engine_message():
    text = _kvbudget.explain(assess(0.85), "--gpu-memory-utilization")
    assert "23.63 GiB" in text
    assert "estimated maximum model length is 495296" in text
    assert "at least 0.87" in text


def test_smallest_fraction_really_fits_and_one_step_less_does_not():
    smallest = assess(0.85)["smallest_fraction"]
    assert assess(smallest)["fits"] is True
    assert assess(round(smallest - 0.01, 2))["fits"] is False


def test_no_budget_left():
    assert _kvbudget.max_tokens(-1.0, BPT) == 0
    assert assess(0.5)["max_tokens"] == 0
