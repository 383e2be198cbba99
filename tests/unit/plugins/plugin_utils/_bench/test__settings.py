"""Bench settings: the report's defaults, the lane and command-line layers, the tools' argv."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _settings as bset


def test_defaults_are_the_reports_settings():
    s = bset.merge()
    assert (s["seed"], s["hard_mode"], s["concurrency"], s["depths"], s["pp"], s["tg"]) == (
        42, True, [1, 2], [0, 4096, 8192], 2048, 128)


def test_command_line_wins_over_lane_over_defaults():
    s = bset.merge({"depths": [0, 4096], "runs": 2}, '{"runs": 1, "concurrency": "2,1"}', "x")
    assert s["depths"] == [0, 4096] and s["runs"] == 1 and s["concurrency"] == [1, 2] and s["pp"] == 2048


@pytest.mark.parametrize("layer, words", [
    ({"sed": 1}, "key sed is not a bench setting"),
    ({"depths": [0, -1]}, "key depths is [0, -1]"),
    ({"concurrency": [0]}, "key concurrency"),
    ({"suite": "long"}, "expected one of all, short"),
    ({"hard_mode": "maybe"}, "expected true or false"),
    ({"pp": 0}, "expected a whole number >= 1"),
    ("not json", "is not a mapping or JSON object"),
])
def test_bad_settings_are_one_sentence_naming_the_layer(layer, words):
    with pytest.raises(LanekitError) as err:
        bset.merge(None, layer)
    assert words in str(err.value) and "command line" in str(err.value)


def test_lane_layer_is_named():
    with pytest.raises(LanekitError, match="bench: section of lane L"):
        bset.merge({"tg": "x"}, None, "L")


def _argv(settings, engine="vllm"):
    return bset.tool_argv(settings, base_url="http://10.0.0.1:8000/v1", model="m", engine=engine,
                          tokenizer="/t/tokenizer.json", corpus_url=bset.book_url(), progress_path="/r/p.jsonl",
                          json_file="/r/out.json", output_dir="/r/runs")


def test_tool_argv_carries_settings_and_no_key():
    argv = _argv(bset.merge(None, {"scenarios": ["TC-01"], "max_tokens": 4096}))
    joined = " ".join(argv)
    assert argv[:3] == ["tool-eval-bench", "bench", "--perf"]
    assert "--seed 42" in joined and "--hardmode" in argv and "--depth 0,4096,8192" in joined
    assert "--concurrency 1,2" in joined and "--scenarios TC-01" in joined and "--short" not in argv
    assert '{"max_tokens": 4096}' in argv and "--api-key" not in argv
    benchy = argv[argv.index("--benchy-args") + 1]
    assert "--book-url http://127.0.0.1:9/" in benchy and "--exit-on-first-fail" in benchy
    assert "return_token_ids" not in benchy


def test_sglang_turns_off_streamed_token_ids():
    argv = _argv(bset.merge(None, {"suite": "short"}), engine="sglang")
    assert "--extra-body return_token_ids=false" in argv[argv.index("--benchy-args") + 1]
    assert "--short" in argv


def test_offline_env_has_no_inherited_variables_and_the_key_only_when_given():
    env = bset.offline_env("/v/bin", "/h", "10.0.0.1")
    assert env["HF_HUB_OFFLINE"] == "1" and env["HOME"] == "/h" and "10.0.0.1" in env["NO_PROXY"]
    assert not any(k.lower() in ("http_proxy", "https_proxy", "hf_token") for k in env)
    assert "TOOL_EVAL_API_KEY" not in env
    assert bset.offline_env("/v/bin", "/h", "h", "k")["TOOL_EVAL_API_KEY"] == "k"


def test_a_lane_may_carry_a_bench_section_checked_by_these_rules():
    from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import load_lane
    from tests.unit.helpers.plans import LANES, VLLM

    lane = load_lane(LANES, VLLM, overrides=[("lane_overrides", {"bench": {"depths": [0, 1024], "suite": "short"}})])
    assert lane["bench"] == {"depths": [0, 1024], "suite": "short"}
    assert "bench" not in load_lane(LANES, VLLM)  # no section, nothing added
    with pytest.raises(LanekitError, match=r"key 'bench' key depth is not a bench setting"):
        load_lane(LANES, VLLM, overrides=[("lane_overrides", {"bench": {"depth": [0]}})])
