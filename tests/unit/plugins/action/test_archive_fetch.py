# Copyright: lanekit developers
# Apache-2.0
"""The teardown archive on the controller (action/archive_fetch.py): each node's evidence lands 0600 in
0700 folders, and the lane's known secrets are replaced again after the copy."""
from __future__ import annotations

import os
import stat

from ansible_collections.lanekit.serving.plugins.action import archive_fetch as af
from ansible_collections.lanekit.serving.plugins.modules.file_chunk import read_chunk
from tests.unit.helpers.lane_fakes import action_module

KEY = "sk-lane-key-0123456789"
TOKEN = "hf_secret_token_abcdef"


def node_files(tmp_path):
    """What rank_status wrote on the node, with secrets the node's redaction did not know."""
    node = tmp_path / "node"
    node.mkdir()
    (node / "lk-r0.log").write_text(f"INFO key={KEY}\nINFO token {TOKEN}\n")
    (node / "lk-r0.inspect.json").write_text(f'{{"Args": ["--api-key", "{KEY}"]}}\n')
    (node / "meminfo.txt").write_text("MemTotal: 1 kB\n")
    return [str(node / name) for name in ("lk-r0.log", "lk-r0.inspect.json", "meminfo.txt")]


def slurping(action, monkeypatch):
    """The node's files read back a chunk at a time, as lanekit.serving.file_chunk does (become_files.fetch)."""
    def execute(module_name, module_args, task_vars):
        assert module_name == "lanekit.serving.file_chunk"
        return read_chunk(module_args["path"], module_args["offset"], module_args["size"])
    monkeypatch.setattr(action, "_execute_module", execute, raising=False)


def test_the_archive_is_private_and_redacted_again_on_the_controller(tmp_path, monkeypatch):
    old = os.umask(0o022)  # the controller's usual umask: ansible.builtin.fetch left 0644 files with it
    try:
        dest = tmp_path / "reports" / "lane-a" / "20260101T000000Z-teardown"
        files = node_files(tmp_path)
        action = action_module(af.ActionModule, {
            "dest": str(dest), "files": files, "containers": [{"name": "lk-r0", "rank": 0, "exists": True}],
            "plan": {"lane": "lane-a", "secrets": {"api_key": True, "api_key_env": "VLLM_API_KEY",
                                                   "env_names": ["HF_TOKEN"]}}})
        action._loader.path_dwim.side_effect = lambda path: path
        action._templar.template.side_effect = lambda value: value
        slurping(action, monkeypatch)
        result = action.run(task_vars={"inventory_hostname": "spark-01", "lanekit_api_key": KEY,
                                       "lanekit_secret_env": {"HF_TOKEN": TOKEN}})
    finally:
        os.umask(old)
    assert not result.get("failed"), result
    rel = sorted(os.path.relpath(p, dest) for p in result["files"])
    assert rel == ["hosts/spark-01/meminfo.txt", "ranks/r0-spark-01/full.log", "ranks/r0-spark-01/inspect.json"]
    for path in result["files"]:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
        text = open(path, encoding="utf-8").read()
        assert KEY not in text and TOKEN not in text, path
    for folder in (dest, dest / "ranks", dest / "ranks" / "r0-spark-01", dest / "hosts" / "spark-01"):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder
    assert "key=********" in open(dest / "ranks" / "r0-spark-01" / "full.log").read()
    assert not [n for n in os.listdir(dest / "ranks" / "r0-spark-01") if n.endswith(".partial")]


def test_a_failed_read_is_one_sentence_naming_the_host_and_the_folder(tmp_path, monkeypatch):
    dest = tmp_path / "archive"
    action = action_module(af.ActionModule, {"dest": str(dest), "files": ["/gone/lk-r0.log"],
                                             "containers": [{"name": "lk-r0", "rank": 0}]})
    action._loader.path_dwim.side_effect = lambda path: path
    action._templar.template.side_effect = lambda value: value
    monkeypatch.setattr(action, "_execute_module",
                        lambda module_name, module_args, task_vars: {"failed": True, "msg": "file not found"},
                        raising=False)
    result = action.run(task_vars={"inventory_hostname": "spark-02"})
    assert result["failed"] and result["msg"].startswith(f"The teardown archive of spark-02 could not be copied to {dest}")


def test_the_teardown_role_copies_through_archive_fetch_with_the_lanes_secrets():
    import yaml
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "teardown", "tasks", "archive.yml")
    with open(path, encoding="utf-8") as handle:
        block = yaml.safe_load(handle)[1]["block"]
    modules = [next(k for k in task if k.startswith(("lanekit.", "ansible."))) for task in block]
    assert modules == ["lanekit.serving.rank_status", "lanekit.serving.archive_fetch"]
    node = block[0]["lanekit.serving.rank_status"]
    assert {"api_key", "secret_values", "secret_env_names"} <= set(node), "the node redacts before the copy"
