# Copyright: lanekit developers
# Apache-2.0
"""What a lint rule is (plugin_utils/_plan/_lint_rule.py): registered once under its id, called with a context."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _lint_rule


def test_a_rule_is_registered_under_its_id_and_yields_its_messages(monkeypatch):
    monkeypatch.setattr(_lint_rule, "REGISTRY", {})

    @_lint_rule.rule("example", _lint_rule.WARNING, "an example", skippable=False)
    def example(ctx):
        yield f"engine {ctx.lane['engine']}"

    assert _lint_rule.REGISTRY == {"example": example}
    assert (example.rule_id, example.severity, example.summary, example.skippable) == ("example", "warning", "an example", False)
    assert list(example(_lint_rule.LintContext(lane={"engine": "vllm"}, profile={}))) == ["engine vllm"]


def test_a_second_rule_under_the_same_id_is_refused(monkeypatch):
    monkeypatch.setattr(_lint_rule, "REGISTRY", {})
    _lint_rule.rule("twice", _lint_rule.ERROR, "first")(lambda ctx: iter(()))
    with pytest.raises(ValueError, match="twice is registered twice"):
        _lint_rule.rule("twice", _lint_rule.ERROR, "second")(lambda ctx: iter(()))
