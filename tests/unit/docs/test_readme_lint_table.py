"""The README's lint table lists every rule of the plan's lint (`_lint.RULES`) once, with its severity,
and no rule the code does not have. Issue 24 part 5."""
from __future__ import annotations

import os
import re

from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _lint

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROW = re.compile(r"^\| `(?P<id>[a-z0-9-]+)` \| (?P<severity>[a-z]+)(?P<note>[^|]*)\|")


def readme_rules(text: str) -> list[tuple[str, str, str]]:
    """(id, severity, note) of each row of the table under `## Lint rules`."""
    section = text.split("\n## Lint rules\n", 1)[1].split("\n## ", 1)[0]
    return [(m["id"], m["severity"], m["note"].strip()) for line in section.splitlines() if (m := ROW.match(line))]


def _rows() -> list[tuple[str, str, str]]:
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        return readme_rules(handle.read())


def test_the_table_lists_every_rule_once_and_nothing_else():
    ids = [row[0] for row in _rows()]
    code = [r.rule_id for r in _lint.RULES]
    assert len(ids) == len(set(ids)), f"a rule is listed twice in README.md: {ids}"
    assert not set(code) - set(ids), f"add to README.md's lint table: {sorted(set(code) - set(ids))}"
    assert not set(ids) - set(code), f"README.md's lint table lists rules the code lacks: {sorted(set(ids) - set(code))}"


def test_each_row_states_the_rules_severity_and_whether_it_can_be_skipped():
    rules = {r.rule_id: r for r in _lint.RULES}
    for rule_id, severity, note in _rows():
        assert severity == rules[rule_id].severity, f"README.md: {rule_id} is a {rules[rule_id].severity}, not {severity}"
        assert ("cannot be skipped" in note) == (not rules[rule_id].skippable), rule_id


def test_the_parser_reads_a_row_and_stops_at_the_next_section():
    text = ("# x\n\n## Lint rules\n\n| id | severity | what |\n|---|---|---|\n| `a-b` | warning | x |\n"
            "| `c` | error (cannot be skipped) | y |\n\n## Next\n\n| `d` | error | z |\n")
    assert readme_rules(text) == [("a-b", "warning", ""), ("c", "error", "(cannot be skipped)")]
