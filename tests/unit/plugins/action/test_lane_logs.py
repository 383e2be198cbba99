# Copyright: lanekit developers
# Apache-2.0
"""The lane_logs action: live results or an archived bundle in, merged lines out."""
from __future__ import annotations

import yaml

from ansible_collections.lanekit.serving.plugins.action import lane_logs as ll
from ansible_collections.lanekit.serving.plugins.modules import lane_logs as doc
from tests.unit.helpers.lane_fakes import action_module

LANE = "mistral-large4-nvfp4-8x-vllm"


def line(second, text):
    return f"2026-11-30T17:09:0{second}.000000000Z {text}"


def test_argument_spec_matches_the_documentation():
    documented = yaml.safe_load(doc.DOCUMENTATION)["options"]
    assert set(documented) == set(ll.ARGUMENT_SPEC)
    for name, spec in ll.ARGUMENT_SPEC.items():
        assert documented[name].get("type") == spec["type"], name
        assert documented[name].get("default") == spec.get("default"), name


def test_live_results_of_every_node_are_merged_and_an_unreachable_node_is_noted(capsys):
    found = {
        "spark-01": {"containers": [{"name": "r0", "exists": True, "rank": 0, "lines": [line(1, "a"), line(3, "c")]}]},
        "spark-02": {"containers": [{"name": "r1", "exists": True, "rank": 1, "lines": [line(2, "b")]}]},
        "spark-03": {"unreachable": True, "msg": "Failed to connect"},
    }
    result = action_module(ll.ActionModule, {"lane": LANE, "found": found}).run(task_vars={})
    assert not result.get("failed")
    assert [x.split(" | ")[1] for x in result["lines"]] == ["a", "b", "c"]
    assert result["notes"] == ["spark-03: unreachable (Failed to connect)"]
    out = capsys.readouterr().out
    assert f"logs of lane {LANE} (live containers): 3 lines from 2 ranks" in out


def _bundle(root, name, ranks):
    folder = root / LANE / name
    for rank in ranks:
        path = folder / "ranks" / f"r{rank}-spark-0{rank + 1}"
        path.mkdir(parents=True)
        (path / "full.log").write_text(f"{line(rank + 1, f'rank {rank} from {name}')}\n")
    return folder


def test_the_latest_archive_is_the_newest_bundle_and_a_path_reads_that_one(tmp_path):
    old = _bundle(tmp_path, "20261130T170000Z-teardown", [0, 1])
    _bundle(tmp_path, "20261130T171014Z", [0, 1, 2])
    latest = action_module(ll.ActionModule, {"lane": LANE, "from_archive": "latest",
                                             "reports_dir": str(tmp_path)}).run(task_vars={})
    assert latest["source"].endswith("20261130T171014Z") and latest["ranks"] == [0, 1, 2]
    assert latest["lines"][0].endswith("r0 spark-01 | rank 0 from 20261130T171014Z")
    picked = action_module(ll.ActionModule, {"lane": LANE, "from_archive": str(old), "ranks": "1"}).run(task_vars={})
    assert [x.split(" | ")[1] for x in picked["lines"]] == ["rank 1 from 20261130T170000Z-teardown"]


def test_a_missing_archive_is_refused_in_one_sentence(tmp_path):
    result = action_module(ll.ActionModule, {"lane": LANE, "from_archive": "latest",
                                             "reports_dir": str(tmp_path)}).run(task_vars={})
    assert result["failed"] and result["msg"].startswith(f"No archived rank logs under {tmp_path}/{LANE};")


def test_no_log_at_all_fails_naming_why():
    result = action_module(ll.ActionModule, {"lane": LANE, "found": {"spark-01": {"containers": []}}}).run(task_vars={})
    assert result["failed"] and "is the lane deployed?" in result["msg"]
