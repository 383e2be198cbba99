"""Small broken lane files, one class of mistake each, planned as the action plugin plans them.

Each case in tests/fixtures/badinput/index.yml must be refused with one sentence naming the file
and the key (or by the lint rule the index names), and never by another exception type.
"""
from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane
from tests.unit.helpers.plans import IMAGES, REPO, spark8_hosts

FIXTURES = os.path.join(REPO, "tests", "fixtures", "badinput")
with open(os.path.join(FIXTURES, "index.yml"), encoding="utf-8") as _handle:
    CASES = yaml.safe_load(_handle)


def test_every_fixture_file_has_an_index_entry():
    files = {name[:-4] for name in os.listdir(FIXTURES) if name.endswith(".yml")} - {"index"}
    assert files == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_broken_lane_file_is_refused_with_one_sentence(case):
    expect = CASES[case]
    try:
        result, findings = plan_lane(FIXTURES, IMAGES, case, spark8_hosts(), None, "deploy")
    except LanekitError as err:
        text = str(err)
        assert not expect.get("valid") and not expect.get("lint"), text
        assert f"{case}.yml" in text, text
        if "key" in expect:
            assert f"key '{expect['key']}'" in text, text
        for fragment in expect.get("says", []):
            assert fragment in text, text
        for fragment in expect.get("not", []):
            assert fragment not in text, text
        assert "\n" not in text and "Error" not in text and "_Ansible" not in text, text
        return
    if expect.get("valid"):
        assert findings["errors"] == [] and result is not None
        return
    assert "lint" in expect, f"{case}.yml was planned although it is broken"
    assert result is None
    messages = [e["message"] for e in findings["errors"] if e["id"] == expect["lint"]]
    assert messages, findings["errors"]
    for fragment in expect.get("says", []):
        assert fragment in messages[0], messages[0]
    for fragment in expect.get("not", []):
        assert fragment not in messages[0], messages[0]


def test_a_lane_file_that_is_not_utf8_names_the_file_and_line(tmp_path):
    # Written here rather than kept as a fixture: every committed .yml must be UTF-8 (yamllint).
    name = "mistral-large4-nvfp4-8x-vllm"
    lines = open(os.path.join(REPO, "lanes", f"{name}.yml"), "rb").read().split(b"\n")
    index = next(i for i, line in enumerate(lines) if line.strip().startswith(b"served_name:"))
    lines[index] = lines[index].split(b":")[0] + b": mod\xe8le-8x"  # Latin-1
    (tmp_path / f"{name}.yml").write_bytes(b"\n".join(lines))
    with pytest.raises(LanekitError) as err:
        plan_lane(str(tmp_path), IMAGES, name, spark8_hosts(), None, "deploy")
    text = str(err.value)
    assert f"{name}.yml" in text and "not UTF-8" in text and f"line {index + 1}" in text, text
    assert "\n" not in text and "Traceback" not in text, text
