# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Lint rules on the boot's timeouts: the post-load barrier, SGLang's watchdog, vLLM's engine-ready
timeout and the collection's own wait all outlast the expected load and warm-up.

One job: these rules (registered with ``_lint_rule.rule``; ``_lint`` runs them). Pure.
"""
from __future__ import annotations

from collections.abc import Iterator

from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import timeout_value
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._lint_rule import (
    ERROR,
    LintContext,
    _engine,
    _lane,
    rule,
)


@rule("barrier-timeout", ERROR, "the post-load barrier outlasts the slowest rank's load, via the baked patch")
def barrier_timeout(ctx: LintContext) -> Iterator[str]:
    lane, engine = ctx.lane, _engine(ctx)
    barrier = engine.timeout("barrier")
    if barrier is None or lane["topology"]["nodes"] < 2:
        return
    expected = lane["boot"]["expected_load_s"]
    value = timeout_value(_lane(ctx), "barrier")
    if value is None or value < expected:
        yield (
            f"{barrier.key} is {int(value) if value is not None else f'unset ({int(barrier.stock_s)} s stock)'}, "
            f"shorter than the expected load of {expected} s (boot.expected_load_s): when one rank crawls, the "
            f"post-load monitored_barrier kills the ranks that finished. Set it to at least {expected} in "
            f"serve.{'env' if barrier.carrier == 'env' else 'args'}."
        )
    patch = engine.timeout_patches.get("barrier")
    patches = [p["file"] for p in (ctx.image or {}).get("patches", [])]
    if patch and ctx.image is not None and not any(patch in p for p in patches):
        yield (
            f"image {ctx.image['name']} does not bake {patch}.py: stock {engine.display} hard-codes the "
            f"{int(barrier.stock_s)} s barrier and ignores {barrier.key}. Add the patch to "
            f"images/{ctx.image['name']}/image.yml."
        )


@rule("watchdog-covers-warmup", ERROR, "SGLang's watchdog covers the warmup phase")
def watchdog_covers_warmup(ctx: LintContext) -> Iterator[str]:
    watchdog = _engine(ctx).timeout("watchdog")
    if watchdog is None:
        return
    warmup = ctx.lane["boot"]["expected_warmup_s"]
    value = timeout_value(_lane(ctx), "watchdog")
    if value is None or value < warmup:
        yield (
            f"{watchdog.key} is {value if value is not None else 'not a number'} s, shorter than the expected warmup "
            f"of {warmup} s (boot.expected_warmup_s: autotune and JIT forwards on sm_121): the watchdog would kill the "
            f"server mid-warmup. Set {watchdog.key} to at least {warmup}."
        )


@rule("engine-ready-timeout", ERROR, "vLLM's engine-ready timeout covers load and warmup")
def engine_ready_timeout(ctx: LintContext) -> Iterator[str]:
    ready = _engine(ctx).timeout("engine_ready")
    if ready is None:
        return
    boot = ctx.lane["boot"]
    need = boot["expected_load_s"] + boot["expected_warmup_s"]
    value = timeout_value(_lane(ctx), "engine_ready")
    if value is None or value < need:
        yield (
            f"{ready.key} is {value} s but loading and warmup are expected to take {need} s "
            f"(boot.expected_load_s + boot.expected_warmup_s): the API server would give up on the engine mid-load. "
            f"Set it to at least {need} in serve.{'env' if ready.carrier == 'env' else 'args'}."
        )


@rule("boot-budget", ERROR, "the collection's own wait covers the expected boot")
def boot_budget(ctx: LintContext) -> Iterator[str]:
    boot = ctx.lane["boot"]
    need = boot["expected_load_s"] + boot["expected_warmup_s"]
    if boot["budget_s"] < need:
        yield (
            f"boot.budget_s is {boot['budget_s']} s, shorter than the expected load plus warmup ({need} s): the wait "
            f"would give up on a healthy boot. Raise boot.budget_s to at least {need}."
        )
    if boot["stall_s"] >= boot["budget_s"]:
        yield (
            f"boot.stall_s ({boot['stall_s']} s) is not shorter than boot.budget_s ({boot['budget_s']} s), so stall "
            f"detection can never fire before the budget. Lower boot.stall_s."
        )
