# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Lint rules: the bring-up report's boot ledger, checked before anything boots.

Each rule has an id, a severity (``error`` stops the plan, ``warning`` is printed) and a message
that says what would go wrong on hardware and the fix. Rules read a LintContext: the validated
lane, its hardware profile, the resolved image and the inventory hosts. They never touch a host.

Each rule says how it scopes (which engines, which hardware). The GPU memory rules (kv-budget,
kv-budget-unchecked, cuda-graph-sizes) apply where the KV cache is a fraction of device memory
(``_hardware.kv_in_device_memory``: GPUs, Intel XPUs, Ascend NPUs and TPU chips; not cuda-graph-sizes on TPU,
where tpu-max-model-len applies instead); the SM12x rules where the profile has CUDA compute capability 12.x;
the ``cpu-*`` rules where the profile declares the engine's CPU backend (``_hardware.cpu_backend``).

One job: run the rules in order and sort what they find. The rules live by topic in
``_lint_rules_launch`` (container, files, topology, image pin, GPU access, recipe notes),
``_lint_rules_kernels`` (SM12x attention and MoE backends), ``_lint_rules_timeouts``,
``_lint_rules_memory`` (the KV budget, and on TPU the shapes XLA compiles) and ``_lint_rules_cpu``; what a rule is, in ``_lint_rule``.
"""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import (
    _lint_rules_cpu,
    _lint_rules_kernels,
    _lint_rules_launch,
    _lint_rules_memory,
    _lint_rules_timeouts,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._lint_rule import (
    ERROR,
    REGISTRY,
    TROUBLESHOOTING_PREFIX,
    WARNING,
    Finding,
    LintContext,
    Rule,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._lint_rules_cpu import cpu_kv_assessment
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._lint_rules_memory import kv_assessment

# The plan and its callers read these from here (_render, lane_plan): the names of one lint module.
__all__ = ["ERROR", "ORDER", "RULES", "TROUBLESHOOTING_PREFIX", "WARNING", "LintContext", "cpu_kv_assessment",
           "kv_assessment", "run"]

# Imported for their @rule registrations into REGISTRY.
RULE_FILES = (_lint_rules_launch, _lint_rules_kernels, _lint_rules_timeouts, _lint_rules_memory, _lint_rules_cpu)

# The order the rules run in, which is the order of a plan's errors and warnings.
ORDER = (
    "explicit-entrypoint",
    "no-rm",
    "docker-args-unsupported",
    "sm12x-dsa-attention",
    "flashinfer-sparse-mla-glm-only",
    "nvfp4-moe-runner",
    "fp8-kv-dsa-tilelang",
    "mistral-tokenizer",
    "barrier-timeout",
    "watchdog-covers-warmup",
    "engine-ready-timeout",
    "boot-budget",
    "cuda-graph-sizes",
    "no-cache-drop",
    "topology",
    "image-pin",
    "kv-budget",
    "kv-budget-unchecked",
    "tpu-max-model-len",
    "rank-gpu-access",
    "cpu-engine",
    "cpu-kv-space",
    "cpu-kv-space-unchecked",
    "cpu-threads-bind",
    "cpu-head-dim",
    "recipe-troubleshooting",
)

RULES: list[Rule] = [REGISTRY[rule_id] for rule_id in ORDER]


def run(ctx: LintContext, skip: list[str] | None = None) -> dict:
    """Run every rule; return {'errors', 'warnings', 'skipped'} as lists of dicts."""
    skip = [s.strip() for s in (skip or []) if s and s.strip()]
    known = {r.rule_id for r in RULES}
    fixed = {r.rule_id for r in RULES if not r.skippable}
    unknown = [s for s in skip if s not in known]
    errors: list[dict] = []
    warnings: list[dict] = []
    for func in RULES:
        if func.rule_id in skip and func.skippable:
            continue
        severity = func.severity
        if func.rule_id == "image-pin" and ctx.purpose == "plan":
            # Planning shows what a deploy would run; only a build or deploy needs the real pin.
            severity = WARNING
        for message in func(ctx):
            finding = Finding(func.rule_id, severity, message).as_dict()
            (errors if severity == ERROR else warnings).append(finding)
    return {"errors": errors, "warnings": warnings, "skipped": [s for s in skip if s in known and s not in fixed],
            "unknown_skips": unknown, "unskippable": [s for s in skip if s in fixed]}
