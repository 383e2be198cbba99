# Copyright: lanekit developers
# Apache-2.0
"""The lane_status action: its arguments, one gathering on every node, the coordinator's table."""
from __future__ import annotations

import json
import os

import yaml

from ansible_collections.lanekit.serving.plugins.action import lane_status as ls
from ansible_collections.lanekit.serving.plugins.modules import lane_status as doc
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _lane_poll as poll
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rendezvous import Rendezvous
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _record as rec
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _store as store
from tests.unit.helpers.lane_fakes import TWO_NODES, FakeAction, action_module, container
from tests.unit.helpers.ranklogs import fixture_lines, lines_until


def defaults(**kw):
    base = {k: v.get("default") for k, v in ls.ARGUMENT_SPEC.items()}
    base.update(kw)
    return base


def worker(tmp_path, me, script, plan=None, batch=("spark-01", "spark-02"), **kw):
    plan = TWO_NODES if plan is None else plan
    action = FakeAction(str(tmp_path / ("node-" + me)), script)
    task_vars = {"inventory_hostname": me, "ansible_play_batch": list(batch)}
    members = poll.lane_members(plan, task_vars, "lane_status", lane=kw.pop("lane", None),
                                engine=kw.pop("engine", None))
    options = ls.status_options(defaults(sync_timeout_s=2.0, **kw))
    return ls.StatusWorker(action, task_vars, plan, members, Rendezvous(str(tmp_path / "rdv")), **options), action


def test_argument_spec_matches_the_documentation():
    documented = yaml.safe_load(doc.DOCUMENTATION)["options"]
    assert set(documented) == set(ls.ARGUMENT_SPEC)
    for name, spec in ls.ARGUMENT_SPEC.items():
        assert documented[name].get("type") == spec["type"], name
        assert documented[name].get("default") == spec.get("default"), name
        assert documented[name].get("choices") == spec.get("choices"), name


def test_status_without_a_plan_or_a_lane_is_refused_in_one_sentence():
    result = action_module(ls.ActionModule, {}).run(task_vars={"inventory_hostname": "h"})
    assert result["failed"]
    assert result["msg"] == ("lane_status needs the lane's plan (plan: \"{{ lanekit_plan }}\") "
                             "or the lane's name (lane: NAME).")


def test_status_on_a_node_outside_the_lane_is_skipped():
    result = action_module(ls.ActionModule, {"plan": TWO_NODES}).run(
        task_vars={"inventory_hostname": "spark-09", "ansible_play_batch": ["spark-01", "spark-02", "spark-09"]})
    assert result["skipped"] and "No rank of lane" in result["msg"]


def test_a_status_sends_no_chat_completion_and_reads_a_long_tail(tmp_path):
    head, _unused = worker(tmp_path, "spark-01", [])
    margs = head.module_args()
    assert margs["api_probe"]["chat"] is False
    assert margs["tail"] == 2000 and margs["containers"] == ["lk-r0"]


def test_the_coordinator_prints_one_table_for_every_node(tmp_path, capsys):
    worker_log = fixture_lines("sglang-worker.log")
    head_log = lines_until("sglang-head.log", "32/64")
    follower, _unused = worker(tmp_path, "spark-02", [lambda a: {
        "containers": [container("lk-r1", worker_log)], "now": 1793342500.0,
        "health": {"lk-r1": {"status": 200}}, "meminfo": {}}])
    lead, _unused = worker(tmp_path, "spark-01", [lambda a: {
        "containers": [container("lk-r0", head_log)], "now": 1793342500.0, "api": {"accepts": False},
        "health": {}, "meminfo": {}}])
    followed = follower.status({})
    assert followed["msg"] == "Status of spark-02 reported to spark-01."
    assert "table" not in followed and followed["ranks"][0]["rank"] == 1
    result = lead.status({})
    assert result["msg"] == "Lane mistral-large4-nvfp4-8x-sglang: 2/2 rank containers running."
    table = result["table"]
    assert table[0] == "lane mistral-large4-nvfp4-8x-sglang"
    assert table[2].split()[:4] == ["r0", "spark-01", "lk-r0", "running"]
    assert "loading shards 32/64" in table[2]
    assert table[3].split()[:5] == ["r1", "spark-02", "lk-r1", "running", "up"]
    assert [r["rank"] for r in result["ranks"]] == [0, 1]


def test_without_a_plan_the_lanes_containers_are_found_by_label(tmp_path):
    found = dict(container("lk-r3", lines_until("vllm-worker.log", "is assigned as DP rank")), rank=3, role="worker")
    lone, action = worker(tmp_path, "spark-04", [lambda a: {"containers": [found], "now": 1793342500.0}],
                          plan={}, batch=("spark-04",), lane="my-lane")
    result = lone.status({})
    assert action.calls[0]["lane"] == "my-lane" and action.calls[0]["containers"] == []
    assert result["table"][2].split()[:4] == ["r3", "spark-04", "lk-r3", "running"]
    assert result["ranks"][0]["engine"] == "vllm"
    assert os.path.isdir(tmp_path / "rdv")


def test_the_coordinator_prints_the_verdict_first_and_writes_the_json_document(tmp_path, capsys):
    worker_log = fixture_lines("sglang-worker.log")
    head_log = lines_until("sglang-head.log", "32/64")
    follower, _unused = worker(tmp_path, "spark-02", [lambda a: {
        "containers": [container("lk-r1", worker_log)], "now": 1793342500.0,
        "health": {"lk-r1": {"status": 200}}, "meminfo": {}}])
    lead, _unused = worker(tmp_path, "spark-01", [lambda a: {
        "containers": [container("lk-r0", head_log)], "now": 1793342500.0, "api": {"accepts": False},
        "health": {}, "meminfo": {}}])
    follower.status({})
    result = lead.status({})
    assert result["verdict"]["verdict"] == "booting" and not result["verdict"]["serving"]
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("lane mistral-large4-nvfp4-8x-sglang: booting | r0 loading 32/64")
    path = tmp_path / "status.json"
    one_node = dict(TWO_NODES, ranks=TWO_NODES["ranks"][:1], hosts={"spark-01": [0]})
    again, _unused = worker(tmp_path / "again", "spark-01", [lambda a: {
        "containers": [container("lk-r0", head_log)], "now": 1793342500.0, "api": {"accepts": False},
        "health": {}, "meminfo": {}}], batch=("spark-01",), plan=one_node)
    again.output = {"format": "json", "file": str(path), "inventory": "inventories/sim"}
    again.status({})
    doc = json.loads(path.read_text())
    assert doc["verdict"] == "booting" and doc["ranks"][0]["container"] == "lk-r0"


def test_a_node_that_cannot_be_reached_is_named_unreachable_with_the_connections_words(tmp_path, capsys):
    gone = {"failed": True, "msg": "Module result deserialization failed: No start of json char found",
            "module_stderr": "Error response from daemon: container 1f2e is not running\n"}
    follower, _unused = worker(tmp_path, "spark-02", [lambda a: gone])
    lead, _unused = worker(tmp_path, "spark-01", [lambda a: {
        "containers": [container("lk-r0", lines_until("sglang-head.log", "32/64"))], "now": 1793342500.0,
        "api": {"accepts": False}, "health": {}, "meminfo": {}}])
    follower.status({})
    verdict = lead.status({})["verdict"]
    assert verdict["verdict"] == "down" and verdict["unreachable"] == ["spark-02"]
    assert verdict["cause"] == ("node spark-02 unreachable (r1 unknown): cannot reach spark-02: "
                                "Error response from daemon: container 1f2e is not running")
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("r1 "))
    assert row.split()[3] == "unreachable"


def test_the_status_links_the_ledger_and_the_last_deploys_timeline(tmp_path):
    # Issue 26: under the table, the ledger's last record and the PNG of the last deploy's boot.
    assert ls.ledger_link(str(tmp_path)) == "" and ls.ledger_link(None) == ""
    the_plan = {"lane": "l", "plan_hash": "a" * 64, "ranks": []}
    store.append(str(tmp_path), rec.new_record("deploy", "ready", the_plan, None, 1_796_000_000.0, boot_s=60.0))
    line = ls.ledger_link(str(tmp_path))
    assert line == f"ledger {tmp_path}/ledger.jsonl: 1 records, last #1 deploy ready in 1m00s at 2026-11-30T00:53:20Z"
    (tmp_path / "timeline").mkdir()
    (tmp_path / "timeline" / "boot-0001.png").write_bytes(b"png")
    assert ls.ledger_link(str(tmp_path)).endswith(f"; timeline {tmp_path}/timeline/boot-0001.png")
