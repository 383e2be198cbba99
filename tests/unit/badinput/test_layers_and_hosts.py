"""Override layers, per-host lanes and inventory host variables: mistakes are named where they were made."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import host_source, parse_overrides
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane
from tests.unit.helpers.plans import IMAGES, LANES, SGLANG, VLLM, plan, spark8_hosts

CLI = "lane_cli_overrides given with -e"


def refusal(**kw) -> str:
    with pytest.raises(LanekitError) as err:
        plan(**kw)
    return str(err.value)


def test_a_required_key_set_to_null_by_the_command_line_names_that_layer():
    text = refusal(overrides={"image": None})
    assert text.startswith(CLI) and "key 'image' is set to null" in text


def test_a_required_key_set_to_null_by_one_host_names_that_host():
    text = refusal(host_overrides={"spark-04": {"serve": {"port": None}}})
    assert text.startswith(host_source("spark-04")) and "serve.port" in text


def test_a_plan_owned_flag_added_with_e_names_the_command_line():
    text = refusal(overrides={"serve": {"args": {"--tensor_parallel_size": 4}}})
    assert text.startswith(CLI) and "--tensor-parallel-size" in text


def test_a_plan_owned_flag_on_one_host_is_refused_naming_the_host():
    text = refusal(host_overrides={"spark-03": {"serve": {"args": {"--port": 9000}}}})
    assert text.startswith(host_source("spark-03")) and "serve.args.--port" in text


def test_a_smuggled_flag_on_one_host_is_refused():
    text = refusal(host_overrides={"spark-06": {"serve": {"args": {"--tool-call-parser": ["mistral", "--port", 1]}}}})
    assert "host spark-06" in text and "second --port" in text


def test_a_memory_fraction_changed_on_one_host_is_refused():
    text = refusal(host_overrides={"spark-05": {"serve": {"args": {"--gpu-memory-utilization": 0.5}}}})
    assert "host spark-05" in text and "--gpu-memory-utilization" in text and "0.5" in text


def test_a_timeout_shortened_on_one_host_is_linted_on_that_host():
    _plan, findings = plan(host_overrides={"spark-07": {"serve": {"env": {"VLLM_ENGINE_READY_TIMEOUT_S": 60}}}})
    messages = [e["message"] for e in findings["errors"] if e["id"] == "engine-ready-timeout"]
    assert messages and messages[0].startswith("on host spark-07")


def test_a_plan_env_variable_on_one_host_is_refused():
    text = refusal(lane=SGLANG, host_overrides={"spark-02": {"serve": {"env": {"SGLANG_HOST_IP": "10.0.0.9"}}}})
    assert "host spark-02" in text and "serve.env.SGLANG_HOST_IP" in text


def test_the_rendezvous_port_changed_on_one_host_is_refused():
    text = refusal(host_overrides={"spark-08": {"serve": {"rendezvous_port": 29600}}})
    assert "spark-08" in text and "serve.rendezvous_port" in text


def test_malformed_override_text_is_one_sentence_naming_the_variable():
    with pytest.raises(LanekitError) as err:
        parse_overrides('{"serve": {"args": ', CLI, "lane_cli_overrides")
    text = str(err.value)
    assert "\n" not in text and "lane_cli_overrides" in text and "not valid JSON or YAML" in text


def test_duplicate_keys_in_override_json_are_refused():
    with pytest.raises(LanekitError, match="'serve' twice"):
        parse_overrides('{"serve": {"port": 1}, "serve": {"port": 2}}', CLI, "lane_cli_overrides")


def test_hostile_override_text_is_refused_like_a_file():
    with pytest.raises(LanekitError, match="refers to itself"):
        parse_overrides("serve: &s {args: *s}", CLI, "lane_cli_overrides")


def test_ansible_tagged_values_are_validated_as_plain_data():
    from ansible._internal._datatag._tags import Origin
    tagged = Origin(path="/inv/group_vars/all.yml", line_num=3).tag({"serve": {"args": {"--max-num-seqs": "many"}}})
    layer = parse_overrides(tagged, host_source("spark-01"))
    # Exactly dict: Ansible's tagged mapping is a dict subclass, and must not reach the messages.
    assert type(layer) is dict  # pylint: disable=unidiomatic-typecheck
    text = refusal(overrides=tagged)
    assert "_Ansible" not in text and "serve.args.--max-num-seqs" in text


def test_node_ranks_given_as_strings_say_they_must_be_integers():
    hosts = spark8_hosts()
    for index, host in enumerate(hosts):
        host["vars"]["node_rank"] = str(index)
    with pytest.raises(LanekitError) as err:
        plan_lane(LANES, IMAGES, VLLM, hosts)
    assert "node_rank is '0' (a string)" in str(err.value) and "integers" in str(err.value)


def test_a_fabric_ip_that_is_not_an_address_is_refused():
    hosts = spark8_hosts()
    hosts[2]["vars"]["fabric_ip"] = "10.100.0.13; reboot"
    with pytest.raises(LanekitError, match="host spark-03: fabric_ip .* not an IP address"):
        plan_lane(LANES, IMAGES, VLLM, hosts)


def test_a_host_name_with_a_space_is_refused():
    hosts = spark8_hosts()
    hosts[1]["name"] = "spark 02"
    with pytest.raises(LanekitError, match="'spark 02'.*without spaces"):
        plan_lane(LANES, IMAGES, VLLM, hosts)


@pytest.mark.parametrize("lane", ["../lanes/mistral-large4-nvfp4-8x-vllm", "/etc/passwd", "a/b", "", "UPPER"])
def test_a_lane_name_outside_lanes_dir_is_refused(lane):
    with pytest.raises(LanekitError, match="is not a lane name"):
        plan_lane(LANES, IMAGES, lane, spark8_hosts())


def test_a_digest_given_as_a_number_is_refused_naming_the_variable():
    text = refusal(extra_vars={"lanekit_image_digests": {"mistral-large4-vllm": {"arm64": 1234}}})
    assert "lanekit_image_digests['mistral-large4-vllm']['arm64'] is 1234 (a number)" in text


def test_the_docker_args_rule_cannot_be_skipped():
    _plan, findings = plan(overrides={"serve": {"docker_args": ["--privileged"]}},
                           lint_skip=["docker-args-unsupported"])
    assert [e["id"] for e in findings["errors"]] == ["docker-args-unsupported"]
    assert findings["unskippable"] == ["docker-args-unsupported"]


def test_an_unset_max_len_says_the_kv_check_did_not_run():
    _plan, findings = plan(overrides={"serve": {"args": {"--max-model-len": None}}})
    assert any(w["id"] == "kv-budget-unchecked" and "--max-model-len is not set" in w["message"]
               for w in findings["warnings"])
