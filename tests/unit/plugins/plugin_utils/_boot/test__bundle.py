# Copyright: lanekit developers
# Apache-2.0
"""Failure bundles (plugin_utils/_boot/_bundle.py): where a bundle goes, what it fetches, and that it is private."""
from __future__ import annotations

import os
import stat

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._bundle import Bundle, new_bundle_dir


def test_bundle_with_a_fake_fetch(tmp_path):
    bundle = Bundle(new_bundle_dir(str(tmp_path / "lane"), now=0))
    assert bundle.root.endswith(os.path.join("lane", "19700101T000000Z"))
    assert new_bundle_dir(str(tmp_path / "lane"), now=0).endswith("19700101T000000Z-2")
    copied = []

    def fetch(remote, local):
        copied.append((remote, local))
        open(local, "w").close()

    remote_files = ["/t/lk-r3.log", "/t/lk-r3.inspect.json", "/t/other.log"]
    written = bundle.fetch_rank_files(3, "spark-04", "lk-r3", remote_files, fetch)
    wanted = ["ranks/r3-spark-04/full.log", "ranks/r3-spark-04/inspect.json"]
    assert [os.path.relpath(p, bundle.root) for p in written] == wanted
    bundle.fetch_host_files("spark-04", ["/t/meminfo.txt"], fetch)
    assert os.path.isfile(os.path.join(bundle.root, "hosts", "spark-04", "meminfo.txt"))
    bundle.mark_done("spark-04")
    assert bundle.done_hosts() == {"spark-04"}


def test_bundles_are_private_to_the_user(tmp_path):
    lane_dir = str(tmp_path / "reports" / "lane")
    bundle = Bundle(new_bundle_dir(lane_dir, now=0))
    written = bundle.write_json("ranks/r0-h/status.json", {"rank": 0})
    fetched = bundle.fetch_rank_files(0, "h", "c", ["/t/c.log"], lambda r, loc: open(loc, "w").close())
    for path in (written, *fetched):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    for path in (lane_dir, bundle.root, os.path.dirname(written)):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700, path


def test_secret_args_come_from_the_variables_and_the_plan():
    from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._bundle import secret_args
    plan = {"secrets": {"api_key": True, "api_key_env": "VLLM_API_KEY", "env_names": ["HF_TOKEN"]}}
    task_vars = {"lanekit_api_key": "{{ vaulted }}", "lanekit_secret_env": {"HF_TOKEN": "hf_x1234"}}
    templated = secret_args(lambda v: "sk-from-vault" if v == "{{ vaulted }}" else v, task_vars, plan)
    assert templated == {"api_key": "sk-from-vault", "secret_values": ["hf_x1234"],
                         "secret_env_names": ["HF_TOKEN", "VLLM_API_KEY"]}
    assert secret_args(lambda v: v, {}, {}) == {}


def test_fetched_files_and_written_files_are_redacted(tmp_path):
    key = "sk-fetched-secret-99"
    bundle = Bundle(new_bundle_dir(str(tmp_path / "lane"), now=0), [key, ""])

    def fetch(remote, local):
        with open(local, "w", encoding="utf-8") as handle:
            handle.write(f"api_key='{key}'\nVLLM_API_KEY={key}\n")

    written = bundle.fetch_rank_files(0, "spark-01", "lk-r0", ["/t/lk-r0.log"], fetch)
    bundle.write_text("summary.txt", f"the key {key} leaked")
    for path in written + [os.path.join(bundle.root, "summary.txt")]:
        text = open(path, encoding="utf-8").read()
        assert key not in text and "********" in text
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
