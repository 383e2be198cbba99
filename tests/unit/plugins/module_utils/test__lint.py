"""Every lint rule: a lane that breaks it and the report's lanes, which pass it."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils import _lint
from ansible_collections.lanekit.serving.plugins.module_utils._plan import plan_lane
from tests.unit.helpers.plans import IMAGES, LANES, SGLANG, VLLM, plan, spark8_hosts


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
    # Tested on the example inventories' recipe lanes in test__recipe_cluster.py.
    tested |= {"rank-gpu-access", "recipe-troubleshooting"}
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
