"""Golden plans: the whole plan of both seed lanes on inventories/spark8, and each rank's `docker run` line.

The goldens were written from the code before the engine table and the published plan keys, so
any change of a rank's argv, env, labels, container options or hashes shows up here. Regenerate
with LANEKIT_UPDATE_GOLDEN=1 only for a change that is meant (and review the diff).
"""
from __future__ import annotations

import json
import os

import pytest

from tests.unit.helpers.plans import IMAGES, LANES, REPO, SGLANG, VLLM, plan

GOLDEN = os.path.join(REPO, "tests", "fixtures", "golden")


def _normalised(obj):
    """The plan with checkout paths replaced by placeholders, so the golden holds on any machine."""
    text = json.dumps(obj, indent=1, sort_keys=True)
    for path in sorted({REPO, os.path.realpath(REPO)}, key=len, reverse=True):
        text = text.replace(path, "<checkout>")
    data = json.loads(text)
    if isinstance(data, dict) and "reports_dir" in data:
        data["reports_dir"] = f"<reports>/{data['lane']}"
    return data


def _check(path: str, actual: str) -> None:
    if os.environ.get("LANEKIT_UPDATE_GOLDEN"):
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(actual)
    with open(path, encoding="utf-8") as handle:
        assert actual == handle.read(), f"{path} differs from the rendered plan"


def _plan(lane):
    result, findings = plan(lane, lanes_dir=LANES, images_dir=IMAGES)
    assert findings["errors"] == [], findings["errors"]
    return result


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
def test_whole_plan_matches_its_golden(lane):
    actual = json.dumps(_normalised(_plan(lane)), indent=1, sort_keys=True) + "\n"
    _check(os.path.join(GOLDEN, f"{lane}-plan.json"), actual)


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
def test_check_mode_docker_run_lines_match_their_golden(lane):
    # The line the ranks role prints in check mode for a rank whose image is not on the node yet.
    lines = [f"r{r['node_rank']} {r['host']}: {' '.join(r['docker_argv'])}" for r in _plan(lane)["ranks"]]
    _check(os.path.join(GOLDEN, f"{lane}-docker-run.txt"), _normalised_text("\n".join(lines) + "\n"))


def _normalised_text(text: str) -> str:
    for path in sorted({REPO, os.path.realpath(REPO)}, key=len, reverse=True):
        text = text.replace(path, "<checkout>")
    return text
