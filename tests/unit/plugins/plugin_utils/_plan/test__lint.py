"""Every lint rule: a lane that breaks it and the report's lanes, which pass it."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import host_source
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _lint
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane
from tests.unit.helpers.plans import IMAGES, LANES, SGLANG, VLLM, cpu2_hosts, plan, plan_cpu, spark8_hosts


def errors(lane, overrides=None, purpose="deploy", **kw):
    _plan, findings = plan(lane, overrides=overrides, purpose=purpose, **kw)
    return {e["id"]: e["message"] for e in findings["errors"]}


def warnings(lane, overrides=None, **kw):
    _plan, findings = plan(lane, overrides=overrides, **kw)
    return {w["id"]: w["message"] for w in findings["warnings"]}


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
def test_report_lanes_pass_every_rule(lane):
    result, findings = plan(lane)
    assert findings["errors"] == []
    assert result is not None


BREAKERS = [
    # (rule, lane, overrides, words that must be in the message)
    ("explicit-entrypoint", VLLM, {"serve": {"entrypoint": []}}, ["--entrypoint mistralai/Mistral-Large-4-1T-A52B-NVFP4"]),
    ("explicit-entrypoint", VLLM, {"serve": {"entrypoint": ["mistralai/Mistral-Large-4-1T-A52B-NVFP4"]}}, ["model id"]),
    ("no-rm", VLLM, {"serve": {"docker_args": ["--rm"]}}, ["logs"]),
    ("docker-args-unsupported", VLLM, {"serve": {"docker_args": ["--privileged"]}}, ["deploy would refuse"]),
    ("sm12x-dsa-attention", SGLANG, {"serve": {"args": {"--attention-backend": None}}}, ["trtllm fmha", "dsa"]),
    ("flashinfer-sparse-mla-glm-only", SGLANG, {"serve": {"args": {"--attention-backend": "flashinfer_sparse_mla"}}},
     ["GLM-DSA"]),
    ("nvfp4-moe-runner", SGLANG, {"serve": {"args": {"--moe-runner-backend": None}}},
     ["g1_scale_c", "flashinfer_cutlass"]),
    ("fp8-kv-dsa-tilelang", SGLANG, {"serve": {"args": {"--dsa-decode-backend": "flashmla"}}}, ["both to tilelang"]),
    ("mistral-tokenizer", SGLANG, {"serve": {"args": {"--tokenizer-mode": "auto"}}}, ["config.json", "--tokenizer-mode: mistral"]),
    ("mistral-tokenizer", VLLM, {"serve": {"args": {"--load-format": None}}}, ["--load-format: mistral"]),
    ("barrier-timeout", SGLANG, {"serve": {"env": {"SGLANG_UNBALANCED_LOAD_TIMEOUT_S": 480}}}, ["monitored_barrier", "4800"]),
    ("watchdog-covers-warmup", SGLANG, {"serve": {"args": {"--watchdog-timeout": 300}}}, ["1800"]),
    ("engine-ready-timeout", VLLM, {"serve": {"env": {"VLLM_ENGINE_READY_TIMEOUT_S": 600}}}, ["5700"]),
    ("boot-budget", VLLM, {"boot": {"budget_s": 3600}}, ["5700"]),
    ("no-cache-drop", VLLM, {"serve": {"env": {"PRELOAD_HOOK": "sync; echo 3 > /proc/sys/vm/drop_caches"}}}, ["3.5 hours"]),
    ("topology", VLLM, {"topology": {"tensor_parallel": 6}}, ["not divisible"]),
    ("topology", VLLM, {"topology": {"nodes": 4}}, ["has 8 hosts"]),
    ("kv-budget", VLLM, {"serve": {"args": {"--gpu-memory-utilization": 0.85}}}, ["23.63 GiB", "at least 0.87"]),
    ("kv-budget", VLLM, {"serve": {"args": {"--gpu-memory-utilization": 0.95}}}, ["108.78 GiB"]),
]


@pytest.mark.parametrize("rule_id, lane, overrides, words", BREAKERS, ids=[b[0] + "-" + b[1][-6:] for b in BREAKERS])
def test_rule_refuses_a_lane_that_breaks_it(rule_id, lane, overrides, words):
    found = errors(lane, overrides)
    assert rule_id in found, found
    for word in words:
        assert word in found[rule_id]


def test_every_rule_has_a_breaker_or_warning_test():
    tested = {b[0] for b in BREAKERS} | {"cuda-graph-sizes", "kv-budget-unchecked", "image-pin"}
    # Tested on the example inventories' recipe lanes in _recipe/test__cluster.py.
    tested |= {"rank-gpu-access", "recipe-troubleshooting"}
    # The CPU rules: tested on the real-engine lane below.
    tested |= {"cpu-engine", "cpu-kv-space", "cpu-kv-space-unchecked", "cpu-threads-bind", "cpu-head-dim"}
    # The TPU rule: tested on the tpu-v6e example inventory's recipe lane in recipes/test_hardware_lanes.py.
    tested |= {"tpu-max-model-len"}
    assert {r.rule_id for r in _lint.RULES} <= tested


def test_barrier_rule_needs_the_baked_patch(tmp_path):
    import shutil
    images = tmp_path / "images"
    shutil.copytree(IMAGES, images)
    spec = images / "mistral-large4-sglang" / "image.yml"
    text = spec.read_text()
    spec.write_text(text[: text.index("patches:")] + "patches: []\nlanes:\n  - mistral-large4-nvfp4-8x-sglang\n")
    _plan, findings = plan_lane(LANES, str(images), SGLANG, spark8_hosts(), None, "deploy")
    assert any("patch_barrier_timeout" in e["message"] for e in findings["errors"])


def test_explicit_cuda_graph_sizes_warn():
    found = warnings(VLLM, {"serve": {"args": {"--cuda-graph-sizes": [1, 2, 4, 8]}}})
    assert "+3.6 GiB" in found["cuda-graph-sizes"]
    assert "cuda-graph-sizes" not in warnings(VLLM)


def test_sglang_lane_without_fraction_warns_kv_unchecked():
    assert "kv-budget-unchecked" in warnings(SGLANG)
    assert "kv-budget-unchecked" not in warnings(VLLM)


def test_truncated_digest_is_error_for_deploy_and_warning_for_plan():
    hosts_kw = {"extra_vars": {"lanekit_image_digests": {}}}
    found = errors(VLLM, purpose="deploy", **hosts_kw)
    assert "lanekit_image_digests['mistral-large4-vllm']['arm64']" in found["image-pin"]
    assert "truncated" in found["image-pin"]
    assert "image-pin" not in errors(VLLM, purpose="plan", **hosts_kw)
    assert "image-pin" in warnings(VLLM, purpose="plan", **hosts_kw)


def test_node_ranks_must_be_unique_and_complete():
    hosts = spark8_hosts()
    for index, host in enumerate(hosts):
        host["vars"]["node_rank"] = index
    hosts[7]["vars"]["node_rank"] = 3
    _plan, findings = plan_lane(LANES, IMAGES, VLLM, hosts, None, "deploy")
    assert any(e["id"] == "topology" and "unique and complete" in e["message"] for e in findings["errors"])


def test_lint_skip_skips_and_reports():
    result, findings = plan(VLLM, overrides={"serve": {"args": {"--gpu-memory-utilization": 0.85}}},
                            lint_skip=["kv-budget", "no-such-rule"])
    assert result is not None
    assert findings["skipped"] == ["kv-budget"]
    assert findings["unknown_skips"] == ["no-such-rule"]


# --- the CPU rules, on the real-engine lane (tiny Llama, two CPU nodes) -------------------------------------

def cpu_findings(overrides=None, **kw):
    _plan, findings = plan_cpu(overrides, **kw)
    return ({e["id"]: e["message"] for e in findings["errors"]}, {w["id"]: w["message"] for w in findings["warnings"]})


def test_the_cpu_lane_passes_every_rule():
    assert cpu_findings() == ({}, {})


def test_auto_thread_binding_with_two_workers_per_node_is_refused_with_vllms_own_words():
    two_per_node = {"topology": {"tensor_parallel": 4, "gpus_per_node": 2}}
    found, _warnings = cpu_findings(two_per_node, binds=(None, None))
    message = found.pop("cpu-threads-bind")
    assert found == {}  # no topology finding: one worker per node is the CPU profile's default, not a cap
    assert message.endswith(
        "tiny-llama-cpu-2x-vllm.yml: VLLM_CPU_OMP_THREADS_BIND is auto (serve.env.VLLM_CPU_OMP_THREADS_BIND unset: vLLM's "
        "default) on cpu-01, cpu-02, where each node runs 2 CPU workers (topology: tensor_parallel 4 x "
        "pipeline_parallel 1 x data_parallel 1 over 2 nodes); auto binds each local worker to a NUMA node of its own, "
        "so on a node with fewer NUMA nodes (a one-socket machine) vLLM refuses: \"Not enough allowed NUMA nodes to "
        "bind threads of 2 local CPUWorkers\". Set lanekit_cpu_threads_bind in those hosts' host_vars (or "
        "serve.env.VLLM_CPU_OMP_THREADS_BIND) to one CPU list per worker separated by "
        "'|' (e.g. '0|1'), or run one worker per node.")
    # One binding per worker from the inventory passes; one list for two workers does not.
    assert cpu_findings(two_per_node, binds=("0|1", "0|1")) == ({}, {})
    found, _warnings = cpu_findings(two_per_node, binds=("0|1", "1"))
    assert "'1' (lanekit_cpu_threads_bind for those hosts) on cpu-02, 1 CPU list(s) for the 2 CPU workers" in \
        found["cpu-threads-bind"]
    # One worker per node with auto is fine (vLLM's default on a node of its own).
    assert cpu_findings(binds=(None, None)) == ({}, {})


def test_a_maximum_model_length_whose_kv_does_not_fit_the_cpu_kv_space_is_refused():
    found, _warnings = cpu_findings({"serve": {"args": {"--max-model-len": 4194304}}})
    assert found["cpu-kv-space"].endswith(
        "tiny-llama-cpu-2x-vllm.yml: key 'serve.env.VLLM_CPU_KVCACHE_SPACE' is 1 GiB of KV cache per rank, room for "
        "2,097,152 tokens at 512 bytes per token (memory.kv_bytes_per_token), but one 4,194,304-token request "
        "(serve.args.--max-model-len) needs 2.00 GiB, so the engine would refuse after loading the weights: \"To serve "
        "at least one request with the model's max seq len (4194304), (2.00 GiB KV cache is needed, which is larger "
        "than the available KV cache memory (1.00 GiB)\"; set VLLM_CPU_KVCACHE_SPACE to at least 2, or lower "
        "serve.args.--max-model-len to 2,097,152.")
    assert "cpu-kv-space" not in cpu_findings({"serve": {"args": {"--max-model-len": 2097152}}})[0]


def test_a_cpu_kv_space_vllm_cannot_read_is_refused():
    found, _warnings = cpu_findings({"serve": {"env": {"VLLM_CPU_KVCACHE_SPACE": "1.5"}}})
    assert "'1.5', but vLLM reads it as a whole number of GiB with int()" in found["cpu-kv-space"]


def test_a_cpu_lane_without_the_kv_figures_warns_like_kv_budget_unchecked():
    _found, warned = cpu_findings({"serve": {"env": {"VLLM_CPU_KVCACHE_SPACE": None}}})
    assert "'serve.env.VLLM_CPU_KVCACHE_SPACE' is not set, so vLLM sizes the CPU KV cache itself" in \
        warned["cpu-kv-space-unchecked"]
    _found, warned = cpu_findings({"serve": {"args": {"--max-model-len": None}}})
    assert "'serve.args.--max-model-len' is not set" in warned["cpu-kv-space-unchecked"]
    assert "kv-budget-unchecked" not in warned  # the GPU rule does not speak about gpu-memory-utilization here


def test_a_head_size_the_cpu_attention_lacks_is_refused():
    found, _warnings = cpu_findings({"model": {"head_dim": 16}})
    assert "key 'model.head_dim' is 16, but vLLM's CPU attention supports head sizes 32, 64, 80" in found["cpu-head-dim"]
    assert "Unsupported CPU attention configuration: head_dim=16" in found["cpu-head-dim"]


def test_gpu_rules_stay_silent_or_say_the_right_thing_on_a_cpu_lane():
    gpu_flags = {"serve": {"args": {"--gpu-memory-utilization": 0.5, "--cuda-graph-sizes": [1, 2]}}}
    assert cpu_findings(gpu_flags) == ({}, {})
    found, _warnings = cpu_findings(extra_vars={"lanekit_rank_gpus": "all"})
    assert "lanekit_rank_gpus is 'all' on x86-64 CPU node" in found["rank-gpu-access"]


def test_an_engine_without_a_cpu_backend_is_refused_on_cpu_nodes():
    # The lane's vLLM flags are removed first: SGLang has no --max-model-len (refused before lint).
    dropped = {"--max-model-len": None, "--enforce-eager": None}
    found, _warnings = cpu_findings({"engine": "sglang", "serve": {"args": dropped}})
    assert "key 'engine' is sglang on hardware cpu_x86" in found["cpu-engine"]


def test_a_host_level_override_is_linted_for_its_own_rank():
    hosts = cpu2_hosts()
    hosts[1]["layers"] = [(host_source("cpu-02"), {"serve": {"env": {"VLLM_ENGINE_READY_TIMEOUT_S": 5}}})]
    _plan, findings = plan_cpu(hosts=hosts)
    assert [e["id"] for e in findings["errors"]] == ["engine-ready-timeout"]
    assert findings["errors"][0]["message"].startswith("on host cpu-02 (its lane_host_overrides): ")


def test_a_kv_space_on_one_cpu_rank_only_is_refused_naming_its_host_layer():
    hosts = cpu2_hosts()
    hosts[1]["layers"] = [(host_source("cpu-02"), {"serve": {"env": {"VLLM_CPU_KVCACHE_SPACE": "2"}}})]
    with pytest.raises(LanekitError) as err:
        plan_cpu(hosts=hosts)
    assert str(err.value).startswith(host_source("cpu-02") + ": key 'serve.env.VLLM_CPU_KVCACHE_SPACE' is '2'")


def test_every_registered_rule_runs_once_and_in_order():
    # The rule files register; _lint.ORDER runs them. A rule missing from ORDER would never run.
    from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._lint_rule import REGISTRY
    assert sorted(_lint.ORDER) == sorted(REGISTRY)
    assert len(set(_lint.ORDER)) == len(_lint.ORDER)
    assert [r.rule_id for r in _lint.RULES] == list(_lint.ORDER)
