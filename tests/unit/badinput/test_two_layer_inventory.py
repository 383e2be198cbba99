"""Issue 23: group_vars and host_vars layers of one inventory deep-merge instead of replacing each other.

The inventory of the report: ``--max-num-seqs: 64`` for the whole lane in group_vars, and
``NCCL_DEBUG`` in host_vars of spark-03 only. Before, both were the one Ansible variable
``lane_overrides`` and spark-03's replaced the group's: it ran ``--max-num-seqs 128`` next to seven
ranks at 64, and the plan said nothing.
"""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import GROUP_SOURCE, host_source
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane, table
from tests.unit.helpers.plans import IMAGES, LANES, SGLANG, VLLM, plan, spark8_hosts

GROUP = {"serve": {"args": {"--max-num-seqs": 64}}}
# The same setting in SGLang's spelling.
SEQS = {VLLM: "--max-num-seqs", SGLANG: "--max-running-requests"}
HOST = {"spark-03": {"serve": {"env": {"NCCL_DEBUG": "INFO"}}}}


def flag(rank: dict, name: str) -> str:
    return rank["command"][rank["command"].index(name) + 1]


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
def test_every_rank_keeps_the_group_flag_and_only_spark03_gets_its_env(lane):
    group = {"serve": {"args": {SEQS[lane]: 64}}}
    result, findings = plan(lane, group_overrides=group, host_overrides=HOST)
    assert not findings["errors"]
    assert [flag(rank, SEQS[lane]) for rank in result["ranks"]] == ["64"] * 8
    assert [rank["host"] for rank in result["ranks"] if rank["env"].get("NCCL_DEBUG") == "INFO"] == ["spark-03"]


def test_the_plan_names_both_inventory_layers():
    result, _findings = plan(VLLM, group_overrides=GROUP, host_overrides={"spark-01": HOST["spark-03"]})
    assert result["layers"] == [f"{LANES}/{VLLM}.yml", GROUP_SOURCE, host_source("spark-01")]


def test_a_group_value_is_blamed_on_the_group_layer_not_on_a_host():
    # The report: --max-model-len in group_vars, NCCL_DEBUG in spark-03's host_vars; the refusal named spark-03.
    with pytest.raises(LanekitError) as err:
        plan(VLLM, group_overrides={"serve": {"args": {"--max-model-len": "long"}}}, host_overrides=HOST)
    text = str(err.value)
    assert text.startswith(GROUP_SOURCE + ": key 'serve.args.--max-model-len'") and "spark-03" not in text


def test_a_value_set_in_one_host_layer_is_blamed_on_that_host_layer():
    with pytest.raises(LanekitError) as err:
        plan(VLLM, group_overrides=GROUP, host_overrides={"spark-05": {"serve": {"args": {"--max-model-len": "long"}}}})
    assert str(err.value).startswith(host_source("spark-05") + ": key 'serve.args.--max-model-len'")


def test_a_scheduling_flag_on_one_rank_only_is_refused_with_layer_key_and_fix():
    with pytest.raises(LanekitError) as err:
        plan(VLLM, group_overrides=GROUP, host_overrides={"spark-03": {"serve": {"args": {"--max-num-seqs": 128}}}})
    text = str(err.value)
    assert text.startswith(host_source("spark-03") + ": key 'serve.args.--max-num-seqs' is 128 (a number) on host "
                           "spark-03 but 64 (a number) on host spark-01 (rank 0)")
    assert "tensor-parallel group must agree" in text and "lane_group_overrides (group_vars)" in text
    assert "\n" not in text and text.endswith("remove it from lane_host_overrides.")


def test_a_flag_only_the_head_host_sets_is_blamed_on_the_head_host_layer():
    with pytest.raises(LanekitError) as err:
        plan(SGLANG, host_overrides={"spark-01": {"serve": {"args": {"--chunked-prefill-size": 4096}}}})
    text = str(err.value)
    assert text.startswith(host_source("spark-01")) and "unset on host spark-02" in text and "None" not in text


def test_an_engine_setting_in_the_environment_on_one_rank_is_refused():
    with pytest.raises(LanekitError, match=r"key 'serve.env.NCCL_ALGO' is 'Ring' \(a string\) on host spark-04"):
        plan(VLLM, host_overrides={"spark-04": {"serve": {"env": {"NCCL_ALGO": "Ring"}}}})


@pytest.mark.parametrize(("lane", "kind", "name", "value"), [
    (VLLM, "args", "--uvicorn-log-level", "debug"),
    (SGLANG, "args", "--log-level", "debug"),
    (VLLM, "env", "NCCL_DEBUG_SUBSYS", "INIT,NET"),
    (VLLM, "env", "VLLM_LOGGING_LEVEL", "DEBUG"),
    (SGLANG, "env", "SGLANG_UNBALANCED_LOAD_TIMEOUT_S", 9000),
])
def test_what_the_engine_record_lets_a_rank_have_on_its_own_may_differ(lane, kind, name, value):
    result, findings = plan(lane, host_overrides={"spark-06": {"serve": {kind: {name: value}}}})
    assert not findings["errors"] and result is not None


def test_a_group_layer_that_differs_between_hosts_is_refused():
    # A child group's (or a host's own) lane_group_overrides replaces the group_vars/all one in Ansible.
    hosts = spark8_hosts(group_overrides=GROUP)
    hosts[4]["layers"][0] = (GROUP_SOURCE, {"serve": {"args": {"--max-num-seqs": 32}}})
    with pytest.raises(LanekitError) as err:
        plan_lane(LANES, IMAGES, VLLM, hosts)
    text = str(err.value)
    assert text.startswith("lane_group_overrides is not the same for host spark-05 as for host spark-01")
    assert "lane_host_overrides in its host_vars" in text


def test_the_plan_table_shows_each_layer_what_it_set_and_where():
    result, _findings = plan(VLLM, group_overrides=GROUP, host_overrides=HOST, overrides={"boot": {"budget_s": 9000}})
    assert result["overrides"] == [
        {"layer": GROUP_SOURCE, "hosts": [f"spark-0{i}" for i in range(1, 9)], "keys": {"serve.args.--max-num-seqs": 64}},
        {"layer": host_source("spark-03"), "hosts": ["spark-03"], "keys": {"serve.env.NCCL_DEBUG": "INFO"}},
        {"layer": "lane_cli_overrides given with -e", "hosts": [f"spark-0{i}" for i in range(1, 9)],
         "keys": {"boot.budget_s": 9000}},
    ]
    lines = table(result).splitlines()
    assert lines[-3:] == [
        f"layer   {GROUP_SOURCE}: serve.args.--max-num-seqs=64",
        f"layer   {host_source('spark-03')}: serve.env.NCCL_DEBUG=INFO",
        "layer   lane_cli_overrides given with -e: boot.budget_s=9000",
    ]


def test_a_plan_without_override_layers_has_no_overrides_entry():
    result, _findings = plan(VLLM)
    assert "overrides" not in result and not any(line.startswith("layer ") for line in table(result).splitlines())
