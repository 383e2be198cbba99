# Copyright: lanekit developers
# Apache-2.0
"""Issue 23: bench_compare run from an installed collection writes into the user's reports/, never into the collection."""
from __future__ import annotations

import os

from ansible_collections.lanekit.serving.plugins.action import bench_compare as bc
from tests.unit.helpers.lane_fakes import action_module
from tests.unit.helpers.plans import REPO

BASELINES = os.path.join(REPO, "roles", "bench", "files", "baselines")


def test_without_reports_root_an_installed_collection_writes_under_the_working_directory(tmp_path, monkeypatch):
    installed = tmp_path / "collections" / "ansible_collections" / "lanekit" / "serving"
    (installed / "playbooks").mkdir(parents=True)
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.chdir(repo)
    args = {"compare": ["baseline:mistral-large4-nvfp4-8x-vllm", "baseline:mistral-large4-nvfp4-8x-sglang"],
            "baselines_dir": BASELINES}
    result = action_module(bc.ActionModule, args).run(task_vars={"playbook_dir": str(installed / "playbooks")})
    assert not result.get("failed"), result.get("msg")
    assert result["out_dir"].startswith(str(repo / "reports" / "compare") + os.sep)
    assert os.path.isfile(os.path.join(result["out_dir"], "compare.md"))
    assert sorted(os.listdir(installed)) == ["playbooks"]
