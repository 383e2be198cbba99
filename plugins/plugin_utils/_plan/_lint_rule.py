# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What a lint rule is and what it reads: the context, a finding, the registry, and the lane helpers.

One job: the shape the rule files (``_lint_rules_*.py``) share. A rule is a generator over a
:class:`LintContext` that yields one sentence per problem (what would go wrong on hardware and the
fix); ``@rule`` registers it under its id with a severity (``error`` stops the plan, ``warning`` is
printed) and a summary. ``_lint`` runs the registered rules in its order.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.module_utils._lane._hardware import sm_major
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import Lane, effective_env

ERROR = "error"
WARNING = "warning"

# A lane note starting with this is a known failure and its fix: the plan shows it as a warning.
TROUBLESHOOTING_PREFIX = "Troubleshooting: "


@dataclass
class LintContext:
    lane: dict
    profile: dict
    image: dict | None = None
    hosts: list = field(default_factory=list)
    node_ranks: dict = field(default_factory=dict)  # host -> explicit node_rank host var, if any
    purpose: str = "plan"  # plan | deploy
    rank_container: dict = field(default_factory=dict)  # how ranks reach the GPUs (_hardware.rank_container)
    host_env: dict = field(default_factory=dict)  # host -> rank env from its inventory variables (_hardware.host_env)


@dataclass
class Finding:
    rule: str
    severity: str
    message: str

    def as_dict(self) -> dict:
        return {"id": self.rule, "severity": self.severity, "message": self.message}


Check = Callable[[LintContext], Iterable[str]]


@dataclass(frozen=True)
class Rule:
    """A registered rule: called with a context, it yields its findings' messages."""

    rule_id: str
    severity: str
    summary: str
    # A rule that states what deploy refuses cannot be skipped: plan and deploy must agree.
    skippable: bool
    check: Check

    def __call__(self, ctx: LintContext) -> Iterable[str]:
        return self.check(ctx)


# Every rule a rule file registered, by id; ``_lint.ORDER`` says in which order they run.
REGISTRY: dict[str, Rule] = {}


def rule(rule_id: str, severity: str, summary: str, skippable: bool = True) -> Callable[[Check], Rule]:
    def register(func: Check) -> Rule:
        if rule_id in REGISTRY:
            # Two rules under one id: the second would replace the first without a word.
            raise ValueError(f"lint rule {rule_id} is registered twice")
        REGISTRY[rule_id] = found = Rule(rule_id, severity, summary, skippable, func)
        return found
    return register


def _args(ctx: LintContext) -> dict[str, Any]:
    return {k: v for k, v in ctx.lane["serve"]["args"].items() if v is not None and v is not False}


def _lane(ctx: LintContext) -> Lane:
    """The context's lane as the validated lane it is (the rules read it as a mapping; _render casts it so)."""
    return cast(Lane, ctx.lane)


def _env(ctx: LintContext) -> dict[str, Any]:
    return effective_env(_lane(ctx))


def _engine(ctx: LintContext) -> _engines.Engine:
    return _engines.get(ctx.lane["engine"])


def _is_sm12x(ctx: LintContext) -> bool:
    return sm_major(ctx.profile) == 12
