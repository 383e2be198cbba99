# Copyright: lanekit developers
# Apache-2.0
"""The lane_wait action's controller side, with a fake node: polling, verdicts, the bundle."""
from __future__ import annotations

import json
import os
import shutil
import threading

from ranks_helpers import fixture_lines, lines_until

from ansible_collections.lanekit.serving.plugins.action import lane_wait as lw
from ansible_collections.lanekit.serving.plugins.module_utils import _progress as progress

STARTED = "2026-10-30T06:00:00.000000000Z"


def inspect(state="running", code=0, started=STARTED):
    return {"Id": "abc", "Name": "/x", "State": {"Status": state, "Running": state == "running", "ExitCode": code,
            "StartedAt": started, "FinishedAt": STARTED, "OOMKilled": False, "Error": ""},
            "RestartCount": 0, "Config": {"Image": "lanekit/mistral-large4-sglang:0123456789ab", "Labels": {}}}


class FakeShell:
    def join_path(self, *parts):
        return os.path.join(*parts)


class FakeConnection:
    def __init__(self, node_dir):
        self._shell = FakeShell()
        self.node_dir = node_dir
        self.fetched = []

    def fetch_file(self, remote, local):
        shutil.copyfile(remote, local)
        self.fetched.append((remote, local))


class FakeAction:
    """Stands in for ActionBase: answers rank_status from a script of polls."""

    def __init__(self, node_dir, script):
        self._connection = FakeConnection(node_dir)
        self.script = script
        self.calls = []

    def _execute_module(self, module_name, module_args, task_vars):
        assert module_name == "lanekit.serving.rank_status"
        self.calls.append(module_args)
        if module_args.get("bundle_dir"):
            os.makedirs(module_args["bundle_dir"], exist_ok=True)
            files = []
            for name in module_args["containers"]:
                for suffix, text in ((".log", "full log of " + name), (".inspect.json", "{}")):
                    path = os.path.join(module_args["bundle_dir"], name + suffix)
                    with open(path, "w") as handle:
                        handle.write(text)
                    files.append(path)
            path = os.path.join(module_args["bundle_dir"], "meminfo.txt")
            with open(path, "w") as handle:
                handle.write("MemTotal: 125000000 kB\nMemFree: 1600000 kB\n")
            return {"containers": [], "bundle_files": files + [path], "now": 0}
        polls = [c for c in self.calls if not c.get("bundle_dir")]
        return self.script[min(len(polls), len(self.script)) - 1](module_args)

    def _make_tmp_path(self):
        path = os.path.join(self._connection.node_dir, "tmp")
        os.makedirs(path, exist_ok=True)
        return path

    def _remove_tmp_path(self, path, force=False):
        shutil.rmtree(path, ignore_errors=True)


def container(name, lines, state="running", code=0):
    return {"name": name, "exists": True, "inspect": inspect(state, code), "lines": lines, "log_error": ""}


PLAN = {
    "lane": "mistral-large4-nvfp4-8x-sglang", "engine": "sglang",
    "api": {"host": "spark-01", "address": "10.10.10.1", "port": 30000, "served_model_name": "mistral-large-4"},
    "boot": {"budget_s": 4800, "stall_s": 600, "poll_s": 1},
    "ranks": [
        {"host": "spark-01", "node_rank": 0, "role": "head", "container_name": "lk-r0", "health_port": 30000},
        {"host": "spark-01", "node_rank": 1, "role": "worker", "container_name": "lk-r1", "health_port": 30000},
    ],
}


def args(**kw):
    base = {k: v.get("default") for k, v in lw.ARGUMENT_SPEC.items()}
    base.update(plan=PLAN, mode="wait", sync_timeout_s=0.5, bundle_timeout_s=5)
    base.update(kw)
    return base


def make_ctx(tmp_path, script, me="spark-01", plan=None, **kw):
    plan = PLAN if plan is None else plan
    action = FakeAction(str(tmp_path / ("node-" + me)), script)
    os.makedirs(action._connection.node_dir, exist_ok=True)
    ranks = lw.plan_ranks(plan)
    hosts = sorted({r["host"] for r in ranks})
    task_vars = {"inventory_hostname": me, "lanekit_reports_dir": str(tmp_path / "reports")}
    cfg = progress.BootConfig.from_plan(plan)
    rdv = lw.Rendezvous(str(tmp_path / "rdv"))
    return lw._Ctx(action, args(plan=plan, **kw), task_vars, plan, plan["lane"], plan["engine"], ranks, hosts,
                   me, "spark-01", cfg, rdv), action


def test_g1_scale_c_crash_fails_within_two_polls_and_writes_the_bundle(tmp_path, capsys):
    head = lines_until("sglang-head.log", "32/64")
    worker = lines_until("sglang-worker.log", "Load weight begin")
    crash = fixture_lines("sglang-g1-scale-c.log")
    script = [
        lambda a: {"containers": [container("lk-r0", head), container("lk-r1", worker)], "now": 1793342500.0,
                   "api": {"accepts": False}, "health": {}, "meminfo": {"MemFree": 1600000}},
        lambda a: {"containers": [container("lk-r0", []), container("lk-r1", crash, "exited", 1)],
                   "now": 1793342501.0, "api": {"accepts": False}, "health": {}, "meminfo": {}},
    ]
    ctx, action = make_ctx(tmp_path, script)
    result = ctx.wait({})
    polls = [c for c in action.calls if not c.get("bundle_dir")]
    assert len(polls) == 2
    # the second poll asked only for lines after the last one seen
    assert polls[1]["since"]["lk-r0"] == head[-1].split(" ")[0]
    assert result["failed"] and result["culprits"] == [1]
    assert "--moe-runner-backend flashinfer_cutlass" in result["msg"]
    assert "rank 1 (spark-01)" in result["msg"]
    bundle = result["bundle"]
    assert bundle.startswith(str(tmp_path / "reports" / "mistral-large4-nvfp4-8x-sglang"))
    for rel in ("plan.json", "verdict.json", "summary.txt", "status-history.log",
                "ranks/r1-spark-01/log-tail.txt", "ranks/r1-spark-01/full.log", "ranks/r1-spark-01/inspect.json",
                "ranks/r0-spark-01/full.log", "hosts/spark-01/meminfo.txt", "hosts/spark-01/meminfo.json"):
        assert os.path.isfile(os.path.join(bundle, rel)), rel
    with open(os.path.join(bundle, "ranks/r1-spark-01/log-tail.txt")) as handle:
        assert "g1_scale_c" in handle.read()
    with open(os.path.join(bundle, "plan.json")) as handle:
        assert json.load(handle)["lane"] == PLAN["lane"]
    with open(os.path.join(bundle, "verdict.json")) as handle:
        assert json.load(handle)["signatures"][0]["id"] == "fusedmoe_g1_scale_c"
    # head probes from the head node, worker health from its own node
    assert polls[0]["api_probe"]["url"] == "http://10.10.10.1:30000"
    assert polls[0]["health_probes"] == [{"name": "lk-r1", "url": "http://127.0.0.1:30000/health"}]
    assert not os.path.exists(action._connection.node_dir + "/tmp")


def test_ready_after_the_stability_window(tmp_path):
    head = fixture_lines("sglang-head.log")
    worker = fixture_lines("sglang-worker.log")
    api = {"url": "http://10.10.10.1:30000", "accepts": True, "health_status": 200, "model_listed": True,
           "chat_ok": True, "ttft_s": 0.4}
    script = [lambda a: {"containers": [container("lk-r0", head), container("lk-r1", worker)], "now": 1793342500.0,
                         "api": api, "health": {"lk-r1": {"status": 200}}, "meminfo": {}}]
    ctx, action = make_ctx(tmp_path, script, stability_s=1.0)
    ctx.cfg.stability_s = 1.0
    result = ctx.wait({})
    assert result.get("failed") is not True
    assert result["status"] == "ready"
    assert "first token in 0.4 s" in result["msg"]
    polls = [c for c in action.calls if not c.get("bundle_dir")]
    # the chat probe ran once, then was not asked again
    assert polls[0]["api_probe"]["chat"] is True and polls[-1]["api_probe"]["chat"] is False


def test_restarted_container_resets_the_parser(tmp_path):
    watcher = lw.HostWatcher([{"rank": 0, "host": "h", "role": "head", "container": "c"}], "sglang", 50)
    crash = fixture_lines("sglang-g1-scale-c.log")
    first = watcher.absorb({"containers": [dict(container("c", crash), inspect=inspect("exited", 1))], "now": 0})
    assert "fusedmoe_g1_scale_c" in first[0]["signatures"]
    again = inspect(started="2026-10-30T08:00:00.000000000Z")
    second = watcher.absorb({"containers": [{"name": "c", "exists": True, "inspect": again,
                                             "lines": lines_until("sglang-head.log", "Load weight begin")}],
                             "now": 1793347300.0})
    assert second[0]["signatures"] == {} and second[0]["phase"] == "loading"


def test_gather_error_keeps_last_status_briefly(tmp_path):
    watcher = lw.HostWatcher([{"rank": 2, "host": "h", "role": "worker", "container": "c"}], "vllm", 50)
    ok = watcher.absorb({"containers": [container("c", lines_until("vllm-worker.log", "assigned"))], "now": 1e9})
    assert ok[2]["phase"] == "loading"
    miss = watcher.absorb(None, "cannot reach h: timeout")
    assert miss[2]["phase"] == "loading" and miss[2]["gather_error"] == "cannot reach h: timeout"
    watcher.absorb(None, "x")
    gone = watcher.absorb(None, "cannot reach h: timeout")
    assert gone[2]["state"] == "unknown"


def test_follower_helps_with_the_bundle(tmp_path):
    plan = dict(PLAN, ranks=[
        {"host": "spark-01", "node_rank": 0, "role": "head", "container_name": "lk-r0", "health_port": 30000},
        {"host": "spark-02", "node_rank": 1, "role": "worker", "container_name": "lk-r1", "health_port": 30000},
    ])
    head = lines_until("sglang-head.log", "32/64")
    crash = fixture_lines("sglang-g1-scale-c.log")
    lead_script = [
        lambda a: {"containers": [container("lk-r0", head)], "now": 1793342500.0, "api": {"accepts": False},
                   "health": {}, "meminfo": {}},
    ]
    follow_script = [
        lambda a: {"containers": [container("lk-r1", crash, "exited", 1)], "now": 1793342500.0, "health": {},
                   "meminfo": {}},
    ]
    lead, _lead_module = make_ctx(tmp_path, lead_script, me="spark-01", plan=plan, sync_timeout_s=3.0)
    follower, _follower_module = make_ctx(tmp_path, follow_script, me="spark-02", plan=plan)
    results = {}
    thread = threading.Thread(target=lambda: results.setdefault("follower", follower.wait({})))
    thread.start()
    results["lead"] = lead.wait({})
    thread.join(10)
    assert results["lead"]["failed"] and results["lead"]["culprits"] == [1]
    assert "rank 1 (spark-02)" in results["lead"]["msg"]
    assert not results["follower"].get("failed")
    assert results["follower"]["lane_status"] == "failed"
    assert os.path.isfile(os.path.join(results["lead"]["bundle"], "ranks/r1-spark-02/full.log"))
    assert "could not be copied" not in results["lead"]["msg"]


def test_bundle_with_a_fake_fetch(tmp_path):
    bundle = lw.Bundle(lw.new_bundle_dir(str(tmp_path), "lane", now=0))
    assert bundle.root.endswith(os.path.join("lane", "19700101T000000Z"))
    assert lw.new_bundle_dir(str(tmp_path), "lane", now=0).endswith("19700101T000000Z-2")
    copied = []

    def fetch(remote, local):
        copied.append((remote, local))
        open(local, "w").close()

    written = bundle.fetch_rank_files(3, "spark-04", "lk-r3", ["/t/lk-r3.log", "/t/lk-r3.inspect.json",
                                                               "/t/other.log"], fetch)
    assert [os.path.relpath(p, bundle.root) for p in written] == ["ranks/r3-spark-04/full.log",
                                                                  "ranks/r3-spark-04/inspect.json"]
    bundle.fetch_host_files("spark-04", ["/t/meminfo.txt"], fetch)
    assert os.path.isfile(os.path.join(bundle.root, "hosts", "spark-04", "meminfo.txt"))
    bundle.mark_done("spark-04")
    assert bundle.done_hosts() == {"spark-04"}


def test_reports_dir_default():
    assert lw.default_reports_dir({"playbook_dir": "/repo/playbooks"}) == "/repo/reports"
    assert lw.default_reports_dir({"playbook_dir": "/site"}) == "/site/reports"
    assert lw.default_reports_dir({"lanekit_reports_dir": "/r", "playbook_dir": "/x"}) == "/r"


def test_explain_message():
    matches, msg = lw.explain_message(
        "Error response from daemon: failed to create shim task: OCI runtime create failed: unable to start "
        "container process: exec: \"vllm\": stat /usr/local/bin/vllm: no such file or directory: unknown",
        context_sentence="Starting rank 3 on spark-04 failed")
    assert [m.id for m in matches] == ["image_not_unpacked"]
    assert msg.startswith("Starting rank 3 on spark-04 failed.")
    assert "Fix:" in msg
    assert lw.explain_message("boom")[1].endswith("No known failure signature matched.")


def test_api_url():
    assert lw.api_url(PLAN) == "http://10.10.10.1:30000"
    assert lw.api_url(PLAN, "127.0.0.1") == "http://127.0.0.1:30000"
    assert lw.api_url({"api": {"address": "fd00::1", "port": 8000}}) == "http://[fd00::1]:8000"


def test_argument_spec_matches_the_documentation():
    import yaml

    from ansible_collections.lanekit.serving.plugins.modules import lane_wait as doc
    documented = yaml.safe_load(doc.DOCUMENTATION)["options"]
    assert set(documented) == set(lw.ARGUMENT_SPEC)
    for name, spec in lw.ARGUMENT_SPEC.items():
        assert documented[name].get("type") == spec["type"], name
        if "default" in spec:
            assert documented[name].get("default") == spec["default"], name


def test_rendezvous_port_from_the_head_command():
    vllm = {"engine": "vllm", "ranks": [{"node_rank": 0, "role": "head",
                                         "command": ["serve", "/m", "--nnodes", "8", "--master-port", "29555"]}]}
    assert lw.rendezvous_port(vllm) == 29555
    vllm["ranks"][0]["command"] = ["serve", "/m", "--nnodes", "8"]
    assert lw.rendezvous_port(vllm) == 29501
    sglang = {"engine": "sglang", "ranks": [{"node_rank": 0, "role": "head",
                                             "command": ["sglang", "serve", "--dist-init-addr", "10.0.0.1:25000"]}]}
    assert lw.rendezvous_port(sglang) == 25000
    assert lw.rendezvous_port({"ranks": []}) is None
