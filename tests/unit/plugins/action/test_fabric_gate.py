# Copyright: lanekit developers
# Apache-2.0
"""Issue 25: the fabric gate's controller steps on real plans: what it runs, what it writes, when it measures again."""
from __future__ import annotations

import copy
import json

from ansible_collections.lanekit.serving.plugins.action import fabric_gate as fg
from ansible_collections.lanekit.serving.plugins.plugin_utils._fabric._launch import MARK
from tests.unit.helpers.lane_fakes import action_module
from tests.unit.helpers.plans import plan as plan_spark8
from tests.unit.helpers.plans import plan_cpu as plan_cpu2

MiB = 2**20


def plan():
    return plan_spark8()[0]


def plan_cpu():
    return plan_cpu2()[0]


def run(args):
    return action_module(fg.ActionModule, args).run(task_vars={})


def output(rank, gather_s, transfers=()):
    """A docker_container result whose Output holds the probe's line."""
    result = {"rank": rank, "world": 2, "status": "ok", "backend": "gloo", "torch": "2.13.0+cpu",
              "env": {"GLOO_SOCKET_IFNAME": "eth0"},
              "timings": [{"op": "all_reduce", "size": 8 * MiB, "seconds": [gather_s]},
                          {"op": "all_gather", "size": 8 * MiB, "seconds": [gather_s]}],
              "transfers": list(transfers)}
    return {"container": {"Output": "torch warnings\n" + MARK + json.dumps(result) + "\n"}}


def test_a_spark_lane_uses_nccl_nvidias_floor_and_means_rdma(tmp_path):
    result = run({"step": "prepare", "plan": plan(), "report_file": str(tmp_path / "fabric.json")})
    assert not result.get("failed"), result.get("msg")
    assert result["run"] is True and result["spec"]["backend"] == "nccl" and result["spec"]["world"] == 8
    assert result["settings"]["floor"]["gbps"] == 21.875 and result["settings"]["wants_rdma"] is True
    assert result["msg"].startswith("Measuring the fabric of lane mistral-large4-nvfp4-8x-vllm: 8 nodes, nccl, sizes 16 MiB, "
                                    "256 MiB, 1 GiB, floor 21.875 GB/s")
    first = result["spec"]["nodes"]["spark-01"]["container"]
    assert first["devices"] == ["/dev/infiniband"] and first["env"]["NCCL_IB_DISABLE"] == "0"


def test_off_measures_nothing_and_says_so():
    result = run({"step": "prepare", "plan": plan(), "gate": "off"})
    assert result["run"] is False and "Fabric gate off (fabric_gate=off)" in result["msg"]


def test_a_run_limited_to_some_nodes_measures_nothing_and_says_so(tmp_path):
    hosts = [f"spark-0{i}" for i in range(1, 9)]
    limited = run({"step": "prepare", "plan": plan(), "play_hosts": hosts[:6], "report_file": str(tmp_path / "f.json")})
    assert limited["run"] is False
    assert "(--limit leaves out spark-07, spark-08)" in limited["msg"] and "fabric_lane without --limit" in limited["msg"]
    assert run({"step": "prepare", "plan": plan(), "play_hosts": hosts, "report_file": str(tmp_path / "f.json")})["run"]


def test_judge_writes_the_report_and_a_rerun_reuses_it_until_the_image_changes(tmp_path):
    report = tmp_path / "fabric.json"
    cpu = plan_cpu()
    base = {"plan": cpu, "report_file": str(report), "floor_gbps": 0.05}
    prepared = run({"step": "prepare", **base})
    assert prepared["run"] is True and "no stored result" in prepared["msg"]
    hosts = sorted(prepared["spec"]["nodes"])
    judged = run({"step": "judge", "plan": cpu, "prepared": prepared,
                  "outputs": {hosts[0]: output(0, 0.01), hosts[1]: output(1, 0.01)}})
    assert not judged.get("failed"), judged.get("msg")
    assert judged["verdict"]["status"] == "pass" and judged["lines"][-1] == f"report  {report}"
    doc = json.loads(report.read_text())
    assert doc["image"]["ref"] == cpu["image"]["pin"]["ref"] and doc["torch"] == ["2.13.0+cpu"]
    assert doc["env"][hosts[0]]["GLOO_SOCKET_IFNAME"] and doc["verdict"]["status"] == "pass"
    assert doc["results"][0]["env"] == {"GLOO_SOCKET_IFNAME": "eth0"}
    again = run({"step": "prepare", **base})
    assert again["run"] is False and "still holds (same nodes, image and fabric env" in again["msg"]
    # a floor the stored figures no longer pass measures again; so does a new image
    assert run({"step": "prepare", **base, "floor_gbps": 100})["run"] is True
    assert run({"step": "prepare", **base, "remeasure": True})["run"] is True
    moved = copy.deepcopy(cpu)
    moved["image"]["pin"]["ref"] = "lanekit/other:123"
    changed = run({"step": "prepare", **base, "plan": moved})
    assert changed["run"] is True and "(image)" in changed["msg"]


def test_strict_fails_with_the_verdict_and_warn_goes_on(tmp_path):
    cpu = plan_cpu()
    prepared = run({"step": "prepare", "plan": cpu, "report_file": str(tmp_path / "f.json"), "floor_gbps": 0.05})
    hosts = sorted(prepared["spec"]["nodes"])
    slow = {hosts[0]: output(0, 0.7, [{"src": 1, "dst": 0, "size": 8 * MiB, "seconds": [0.7]}]),
            hosts[1]: output(1, 0.7, [{"src": 0, "dst": 1, "size": 8 * MiB, "seconds": [0.01]}])}
    judged = run({"step": "judge", "plan": cpu, "prepared": prepared, "outputs": slow})
    assert judged["failed"] is True
    assert f"Slowest pair: {hosts[1]} -> {hosts[0]}" in judged["msg"] and f"{hosts[1]} is slow on its send side" in judged["msg"]
    assert "fix: check" in judged["msg"] and "report: " in judged["msg"]
    warned = dict(prepared, settings=dict(prepared["settings"], gate="warn"))
    assert not run({"step": "judge", "plan": cpu, "prepared": warned, "outputs": slow}).get("failed")
    # a node that did not report is named, never passed over
    missing = run({"step": "judge", "plan": cpu, "prepared": prepared, "outputs": {hosts[0]: output(0, 0.01)}})
    assert missing["failed"] is True and f"{hosts[1]}: {hosts[1]} did not report" in missing["msg"]


def no_torch(rank):
    result = {"rank": rank, "world": 2, "status": "cannot_run", "torch": None,
              "reason": "the image has no usable torch (ModuleNotFoundError: No module named 'torch')"}
    return {"container": {"Output": MARK + json.dumps(result) + "\n"}}


def test_an_image_without_torch_is_told_once_and_a_strict_gate_still_refuses_the_held_result(tmp_path):
    cpu = plan_cpu()
    base = {"plan": cpu, "report_file": str(tmp_path / "fabric.json"), "gate": "warn"}
    prepared = run({"step": "prepare", **base})
    hosts = sorted(prepared["spec"]["nodes"])
    judged = run({"step": "judge", "plan": cpu, "prepared": prepared,
                  "outputs": {hosts[0]: no_torch(0), hosts[1]: no_torch(1)}})
    assert not judged.get("failed") and judged["verdict"]["status"] == "cannot_run"
    # The same image: the reason is the image's own, so the next deploy does not start probes again ...
    again = run({"step": "prepare", **base})
    assert again["run"] is False and again["verdict"]["status"] == "cannot_run" and "still holds" in again["msg"]
    # ... and a strict gate refuses the held result as it refused the measured one.
    strict = run({"step": "prepare", **base, "gate": "strict"})
    assert strict["failed"] is True and strict["run"] is False and "cannot run" in strict["msg"]
    # A new image is probed again.
    moved = copy.deepcopy(cpu)
    moved["image"]["pin"]["ref"] = "lanekit/other:123"
    assert run({"step": "prepare", **base, "plan": moved})["run"] is True
