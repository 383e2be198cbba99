# Copyright: lanekit developers
# Apache-2.0
"""The engines' generated-token counter read from their Prometheus /metrics text (module_utils/_boot/_metrics.py):
the head's watch probe parses it, the controller's watch (_ledger/_watch.py) uses the same function."""
from __future__ import annotations

import inspect

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _metrics as metrics
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _watch as watch


def test_the_vllm_counter_is_summed_over_its_label_sets_and_its_neighbours_are_left_alone():
    text = ("# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
            "# TYPE vllm:generation_tokens_total counter\n"
            'vllm:generation_tokens_total{engine="0",model_name="m"} 1234.0\n'
            'vllm:generation_tokens_total{engine="1",model_name="m"} 66.0\n'
            'vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e9\n'
            'vllm:prompt_tokens_total{engine="0",model_name="m"} 99999.0\n')
    assert metrics.engine_generated_tokens(text) == 1300.0


def test_the_sglang_counter_and_a_sample_with_a_timestamp_are_read():
    assert metrics.engine_generated_tokens('sglang:generation_tokens_total{model_name="m"} 42\n') == 42.0
    assert metrics.engine_generated_tokens("vllm:generation_tokens_total 12 1700000000000\n") == 12.0


def test_text_without_a_readable_counter_is_no_reading():
    for text in ("", "up 1\n", "<html><body>Not Found</body></html>", "vllm:generation_tokens_total lots\n",
                 "vllm:generation_tokens_total NaN\n", "sglang:generation_tokens_total +Inf\n"):
        assert metrics.engine_generated_tokens(text) is None, text


def test_the_watch_judges_with_the_very_parser_the_probe_runs():
    # One copy: the controller's rule and the head's probe cannot drift apart on what the counter is.
    # The counter is parsed in _metrics only: the watch keeps no parser of its own (the probe returns the figures).
    assert "generation_tokens_total" not in inspect.getsource(watch)
