# Copyright: lanekit developers
# Apache-2.0
"""The lane_wait action's controller side, with a fake node: polling, verdicts, the bundle, explain.

The stall and never-joined verdicts (molecule's scenario 02 faults, issue #20) run on a whole 8-node
lane booting on a virtual clock (tests/unit/helpers/lane_boot.py): minutes of boot in no real time."""
from __future__ import annotations

import json
import os
import re
import threading

import pytest

from ansible_collections.lanekit.serving.plugins.action import lane_wait as lw
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _lane_poll as poll
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rendezvous import Rendezvous
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._tracker import BootConfig
from tests.unit.helpers.lane_boot import (
    API_UP,
    VirtualLane,
    all_joined,
    formed,
    graphs,
    loaded,
    rendezvous,
    serving,
    shard_bar,
    vllm_plan,
)
from tests.unit.helpers.lane_fakes import PLAN, TWO_NODES, FakeAction, action_module, container, inspect
from tests.unit.helpers.ranklogs import fixture_lines, lines_until


def args(**kw):
    base = {k: v.get("default") for k, v in lw.ARGUMENT_SPEC.items()}
    base.update(plan=PLAN, mode="wait", sync_timeout_s=0.5, bundle_timeout_s=5)
    base.update(kw)
    return base


def make_ctx(tmp_path, script, me="spark-01", plan=None, **kw):
    plan = PLAN if plan is None else plan
    plan = dict(plan, reports_dir=str(tmp_path / "reports" / plan["lane"]))
    action = FakeAction(str(tmp_path / ("node-" + me)), script)
    os.makedirs(action._connection.node_dir, exist_ok=True)
    task_vars = {"inventory_hostname": me, "ansible_play_batch": list(plan["hosts"])}
    members = poll.lane_members(plan, task_vars, "lane_wait")
    cfg = BootConfig.from_plan(plan)
    rdv = Rendezvous(str(tmp_path / "rdv"))
    return lw.Waiter(action, args(plan=plan, **kw), task_vars, plan, members, cfg, rdv, plan["reports_dir"]), action


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
    assert bundle.startswith(str(tmp_path / "reports" / "mistral-large4-nvfp4-8x-sglang") + os.sep)
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
    # The node kept the bundle in a root-private directory (not the login user's temp dir), read
    # it back as the become user and removed it.
    bundle_dirs = [c["bundle_dir"] for c in action.calls if c.get("bundle_dir")]
    assert len(bundle_dirs) == 1 and bundle_dirs[0].startswith("/var/tmp/lanekit/bundles/mistral-large4-nvfp4-8x-sglang-")
    assert action.removed == bundle_dirs
    assert not os.path.exists(action.on_node(bundle_dirs[0]))


def test_ready_after_the_stability_window(tmp_path):
    head = fixture_lines("sglang-head.log")
    worker = fixture_lines("sglang-worker.log")
    api = {"url": "http://10.10.10.1:30000", "accepts": True, "health_status": 200, "model_listed": True,
           "chat_ok": True, "ttft_s": 0.4}
    # The ranks started half a second ago (a lane up for longer than the window would be ready at once).
    script = [lambda a: {"containers": [container("lk-r0", head), container("lk-r1", worker)], "now": 1793340000.5,
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
    watcher = poll.HostWatcher([{"node_rank": 0, "host": "h", "role": "head", "container_name": "c"}], "sglang", 50)
    crash = fixture_lines("sglang-g1-scale-c.log")
    first = watcher.absorb({"containers": [dict(container("c", crash), inspect=inspect("exited", 1))], "now": 0})
    assert "fusedmoe_g1_scale_c" in first[0].signatures
    again = inspect(started="2026-10-30T08:00:00.000000000Z")
    second = watcher.absorb({"containers": [{"name": "c", "exists": True, "inspect": again,
                                             "lines": lines_until("sglang-head.log", "Load weight begin")}],
                             "now": 1793347300.0})
    assert second[0].signatures == {} and second[0].phase == "loading"


def test_gather_error_keeps_last_status_briefly(tmp_path):
    watcher = poll.HostWatcher([{"node_rank": 2, "host": "h", "role": "worker", "container_name": "c"}], "vllm", 50)
    ok = watcher.absorb({"containers": [container("c", lines_until("vllm-worker.log", "assigned"))], "now": 1e9})
    assert ok[2].phase == "loading"
    miss = watcher.absorb(None, "cannot reach h: timeout")
    assert miss[2].phase == "loading" and miss[2].gather_error == "cannot reach h: timeout"
    watcher.absorb(None, "x")
    gone = watcher.absorb(None, "cannot reach h: timeout")
    assert gone[2].state == "unknown"


def test_follower_helps_with_the_bundle(tmp_path):
    plan = TWO_NODES
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
    lead, _unused = make_ctx(tmp_path, lead_script, me="spark-01", plan=plan, sync_timeout_s=3.0)
    follower, _unused = make_ctx(tmp_path, follow_script, me="spark-02", plan=plan)
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


def test_an_exit_on_another_node_is_judged_while_the_heads_own_call_still_watches(tmp_path, monkeypatch):
    """Issue #28 part 3: with the exit watch, the follower's status call returns at the exit and the
    coordinator judges the lane then, not when its own call (watching until the next poll) ends."""
    plan = dict(TWO_NODES, boot=dict(TWO_NODES["boot"], poll_s=5))
    head = lines_until("sglang-head.log", "32/64")
    crash = fixture_lines("sglang-g1-scale-c.log")
    named = threading.Event()
    head_watching = threading.Event()
    watched = {}
    lines = []

    def record(msg, *_a, **_kw):
        lines.append(msg)
        if "r1 EXITED(1)" in msg:
            named.set()

    monkeypatch.setattr(lw.display, "display", record)

    def head_watch(margs):
        # the head's node sees nothing: its call lasts its whole watch, unless the line came first
        # (a short watch, close to the next poll, ends before the others could report: the next one)
        if (margs.get("exit_watch_s") or 0) >= 2:
            watched["head_watch_s"] = margs["exit_watch_s"]
            head_watching.set()
            watched["named_during_the_call"] = named.wait(margs["exit_watch_s"])
        return {"containers": [container("lk-r0", head)], "now": 1793342505.0, "api": {"accepts": False},
                "health": {}, "meminfo": {}, "exit_watch": {"events": [], "next_since": "1793342505.0",
                                                            "watched_s": margs.get("exit_watch_s") or 0}}

    die = {"container": "lk-r1", "action": "die", "time_ns": 1793342502_500000000, "exit_code": 1}

    def follower_exit(margs):
        if not margs.get("exit_watch_s"):  # too close to the next poll to watch: still running
            return {"containers": [container("lk-r1", head[:3])], "now": 1793342500.0, "health": {}, "meminfo": {},
                    "exit_watch": {"events": [], "next_since": "1793342500.0"}}
        if not head_watching.wait(margs["exit_watch_s"]):  # the rank exits while both nodes watch
            return {"containers": [container("lk-r1", head[:3])], "now": 1793342500.0, "health": {}, "meminfo": {},
                    "exit_watch": {"events": [], "next_since": "1793342500.0", "watched_s": margs["exit_watch_s"]}}
        return {"containers": [container("lk-r1", crash, "exited", 1)], "now": 1793342502.6, "health": {},
                "meminfo": {}, "exit_watch": {"events": [die], "next_since": "1793342502.500000001", "watched_s": 0.1}}

    lead_script = [
        lambda a: {"containers": [container("lk-r0", head)], "now": 1793342500.0, "api": {"accepts": False},
                   "health": {}, "meminfo": {}, "exit_watch": {"events": [], "next_since": "1793342500.0"}},
        head_watch,
    ]
    follow_script = [
        lambda a: {"containers": [container("lk-r1", head[:3])], "now": 1793342500.0, "health": {}, "meminfo": {},
                   "exit_watch": {"events": [], "next_since": "1793342500.0"}},
        follower_exit,
    ]
    lead, lead_action = make_ctx(tmp_path, lead_script, me="spark-01", plan=plan, sync_timeout_s=3.0)
    follower, follow_action = make_ctx(tmp_path, follow_script, me="spark-02", plan=plan)
    results = {}
    thread = threading.Thread(target=lambda: results.setdefault("follower", follower.wait({})))
    thread.start()
    results["lead"] = lead.wait({})
    thread.join(10)
    assert results["lead"]["failed"] and results["lead"]["culprits"] == [1]
    # the head's call was still watching when the line named the exit
    assert watched["head_watch_s"] > 0 and watched["named_during_the_call"]
    assert results["lead"]["exit_seen"]["rank"] == 1 and results["lead"]["exit_seen"]["exit_code"] == 1
    # the follower watched from where its previous call ended, so no exit falls between two calls
    polls = [c for c in follow_action.calls if not c.get("bundle_dir")]
    watching = [c for c in polls if c.get("exit_watch_s")]
    assert "exit_watch_s" not in polls[0] and watching
    sinces = [c["exit_watch_since"] for c in watching]
    assert sinces[0] == "1793342500.0"
    # and a call after the exit starts just after it: the same exit is not reported twice
    assert set(sinces) <= {"1793342500.0", "1793342502.500000001"} and sinces == sorted(sinces, key=float)
    with open(os.path.join(results["lead"]["bundle"], "verdict.json")) as handle:
        assert json.load(handle)["exit_seen"]["container"] == "lk-r1"


def test_without_the_exit_watch_the_wait_polls_as_before(tmp_path):
    crash = fixture_lines("sglang-g1-scale-c.log")
    head = lines_until("sglang-head.log", "32/64")
    script = [
        lambda a: {"containers": [container("lk-r0", head), container("lk-r1", head[:3])], "now": 1793342500.0,
                   "api": {"accepts": False}, "health": {}, "meminfo": {}},
        lambda a: {"containers": [container("lk-r0", []), container("lk-r1", crash, "exited", 1)],
                   "now": 1793342501.0, "api": {"accepts": False}, "health": {}, "meminfo": {}},
    ]
    ctx, action = make_ctx(tmp_path, script, exit_watch=False)
    result = ctx.wait({})
    polls = [c for c in action.calls if not c.get("bundle_dir")]
    assert result["failed"] and all("exit_watch_s" not in c for c in polls)
    assert result["exit_seen"] is None


def test_explain_message():
    matches, msg = lw.explain_message(
        "Error response from daemon: failed to create shim task: OCI runtime create failed: unable to start "
        "container process: exec: \"vllm\": stat /usr/local/bin/vllm: no such file or directory: unknown",
        context_sentence="Starting rank 3 on spark-04 failed")
    assert [m.id for m in matches] == ["image_not_unpacked"]
    assert msg.startswith("Starting rank 3 on spark-04 failed.")
    assert "Fix:" in msg
    assert lw.explain_message("boom")[1].endswith("No known failure signature matched.")


def test_argument_spec_matches_the_documentation():
    import yaml

    from ansible_collections.lanekit.serving.plugins.modules import lane_wait as doc
    documented = yaml.safe_load(doc.DOCUMENTATION)["options"]
    assert set(documented) == set(lw.ARGUMENT_SPEC)
    for name, spec in lw.ARGUMENT_SPEC.items():
        assert documented[name].get("type") == spec["type"], name
        if "default" in spec:
            assert documented[name].get("default") == spec["default"], name


def test_the_head_watches_the_plans_rendezvous_port(tmp_path):
    ctx, _unused = make_ctx(tmp_path, [])
    assert ctx.module_args()["listen_ports"] == [25000]
    single, _unused = make_ctx(tmp_path, [], plan=dict(PLAN, rendezvous_port=None))
    assert "listen_ports" not in single.module_args()


def test_the_bundle_goes_to_the_plans_reports_dir(tmp_path):
    crash = fixture_lines("sglang-g1-scale-c.log")
    script = [lambda a: {"containers": [container("lk-r0", []), container("lk-r1", crash, "exited", 1)],
                         "now": 1793342501.0, "api": {"accepts": False}, "health": {}, "meminfo": {}}]
    ctx, _unused = make_ctx(tmp_path, script)
    result = ctx.wait({})
    assert os.path.dirname(result["bundle"]) == ctx.plan["reports_dir"]


def test_wait_without_a_reports_dir_is_refused_in_one_sentence():
    plan = dict(TWO_NODES, reports_dir="")
    result = action_module(lw.ActionModule, {"plan": plan}).run(
        task_vars={"inventory_hostname": "spark-01", "ansible_play_batch": ["spark-01", "spark-02"]})
    assert result["failed"] and "names no reports_dir for failure bundles" in result["msg"]


def test_wait_without_ranks_is_refused_in_one_sentence():
    result = action_module(lw.ActionModule, {"plan": {"lane": "l"}}).run(task_vars={"inventory_hostname": "h"})
    assert result["failed"] and result["msg"].startswith("lane_wait has no ranks for lane l")


def test_wait_is_skipped_in_check_mode():
    plan = dict(TWO_NODES, reports_dir="/r/l")
    result = action_module(lw.ActionModule, {"plan": plan}, check_mode=True).run(
        task_vars={"inventory_hostname": "spark-01", "ansible_play_batch": ["spark-01", "spark-02"]})
    assert result["skipped"] and not result.get("failed")


def test_explain_mode_fails_with_the_explanation():
    result = action_module(lw.ActionModule, {
        "mode": "explain", "text": "AttributeError: 'FusedMoE' object has no attribute 'g1_scale_c'",
        "context": "Starting rank 1 failed"}).run(task_vars={"inventory_hostname": "h"})
    assert result["failed"] and result["signatures"][0]["id"] == "fusedmoe_g1_scale_c"
    assert result["msg"].startswith("Starting rank 1 failed.")


# --- the stall and never-joined verdicts on a virtual clock (issue #20) -----------------------------

# What molecule's test_scenario_02_ranks asserts on the deploy's output.
STALL_WORDS = re.compile(r"stall|no progress", re.IGNORECASE)
NEVER_JOINED_WORDS = re.compile(r"never joined|did not join|not joined|waiting for r5", re.IGNORECASE)
RANK_5 = re.compile(r"\br(ank )?5\b")
HUNG = 5


def read(bundle, rel):
    with open(os.path.join(bundle, rel), encoding="utf-8") as handle:
        return handle.read()


def test_a_rank_hung_mid_load_fails_the_wait_stall_s_after_the_lane_last_moved(tmp_path, monkeypatch):
    """Molecule's test_hung_rank_trips_stall_detection: rank 5 stops during the load (boot.stall_s 30).

    The others keep loading for longer than stall_s after r5's last line (vLLM's headless ranks
    print nothing while they load, so a rank's silence alone is no stall): the wait fails stall_s
    after the lane's last progress, not before, naming r5 and writing the bundle."""
    logs = {r: rendezvous(r) + formed(r) + loaded(r, 20.0 + 5 * r) for r in range(1, 8)}
    logs[0] = rendezvous(0) + formed(0) + shard_bar([7.0 + 6 * k for k in range(9)], 8) + loaded(0, 56.0)
    logs[HUNG] = rendezvous(HUNG) + formed(HUNG)  # hung after "assigned": never loads
    last_progress = 20.0 + 5 * 7                  # r7 loaded; then every rank but r5 waits at the barrier
    lane = VirtualLane(tmp_path, monkeypatch, vllm_plan(stall_s=30, budget_s=600), logs, peers=all_joined)
    result = lane.wait()

    assert result["failed"] and result["culprits"] == [HUNG]
    # Not before stall_s of lane-wide silence (r5 alone had been silent for stall_s at t 36), and
    # within the poll that crosses it.
    assert last_progress + 30 <= lane.ended_s <= last_progress + 30 + 2 * lane.poll_s
    msg = result["msg"]
    assert msg.startswith(f"Lane {lane.plan['lane']} failed to boot: lane stalled: no progress for 30s; "
                          "r5 at loading shards while others reached post-load barrier.")
    assert "Blamed: rank 5 (spark-06)." in msg
    assert STALL_WORDS.search(msg) and RANK_5.search(msg)
    assert [s["id"] for s in result["signatures"]] == ["stalled"]
    bundle = result["bundle"]
    assert "could not be copied" not in msg
    verdict = json.loads(read(bundle, "verdict.json"))
    assert verdict["culprits"] == [HUNG] and verdict["signatures"][0]["id"] == "stalled"
    assert "Launching vLLM" in read(bundle, "ranks/r5-spark-06/log-tail.txt")
    for rel in ("plan.json", "summary.txt", "status-history.log", "ranks/r5-spark-06/full.log",
                "ranks/r0-spark-01/full.log", "hosts/spark-06/meminfo.json"):
        assert os.path.isfile(os.path.join(bundle, rel)), rel
    # Every poll printed its line; the last names r5 behind the others.
    assert any("r5 loading" in line and "r1-4,6-7 barrier" in line for line in lane.lines)


@pytest.mark.parametrize("joined_seen", [True, False], ids=["store-connections", "silent-rank"])
def test_a_rank_that_never_joins_is_named_within_the_budget(tmp_path, monkeypatch, joined_seen):
    """Molecule's test_rank_that_never_joins_is_named: rank 5 hangs before the rendezvous.

    store-connections: r5 printed its launch line (the stand-in's and vLLM's headless start) and the
    head's node sees no connection from r5's address on the rendezvous port. silent-rank: r5 printed
    nothing and the head's node has no measure of the connections (the phases alone tell). Either
    way the wait names r5 as never joined when the stall window closes, long before the boot budget
    (and the engine's own rendezvous timeout, which the budget sets)."""
    logs = {r: rendezvous(r) for r in range(8)}
    logs[HUNG] = rendezvous(HUNG, launched=joined_seen, init=False)
    peers = (lambda t: [ip for ip in all_joined(t) if ip != "10.10.10.6"]) if joined_seen else None
    plan = vllm_plan(stall_s=60, budget_s=600)
    lane = VirtualLane(tmp_path, monkeypatch, plan, logs, peers=peers)
    result = lane.wait()

    assert result["failed"] and result["culprits"] == [HUNG]
    assert 3 + 60 <= lane.ended_s <= 3 + 60 + 2 * lane.poll_s < plan["boot"]["budget_s"]
    msg = result["msg"]
    assert NEVER_JOINED_WORDS.search(msg) and RANK_5.search(msg)
    assert "[rank_never_joined] a rank never joined the rendezvous: rank 5 (spark-06)." in msg
    assert [s["id"] for s in result["signatures"]] == ["rank_never_joined", "stalled"]
    if joined_seen:
        assert "r5 has no connection to the head's rendezvous port while 7 of 8 ranks joined" in msg
        assert "joined 7/8, waiting for r5" in lane.lines[-1]
    else:
        assert "r5 never reached the rendezvous; the other ranks wait there" in msg
    assert os.path.isfile(os.path.join(result["bundle"], "ranks/r5-spark-06/full.log"))


def test_a_slow_rank_whose_log_still_moves_is_not_called_stalled(tmp_path, monkeypatch):
    """Rank 5 captures its graphs at one graph per 25 s (stall_s 30) while every other rank is done
    and waits: far slower than the plan's warm-up (20 s), many stall windows long, yet each step
    is progress, so the wait keeps waiting and ends ready."""
    step, total = 25.0, 8
    slow = [27.0 + step * k for k in range(total + 1)]
    logs = {r: rendezvous(r) + formed(r) + loaded(r, 20.0) + graphs(r, [27.0, 28.0, 29.0], 2) for r in range(8)}
    logs[0] += shard_bar([7.0 + 1.5 * k for k in range(9)], 8)
    logs[HUNG] = rendezvous(HUNG) + formed(HUNG) + loaded(HUNG, 20.0) + graphs(HUNG, slow, total)
    api_at = slow[-1] + 5
    logs[0] += serving(api_at - 3)
    lane = VirtualLane(tmp_path, monkeypatch, vllm_plan(stall_s=30, expected_warmup_s=20), logs,
                       api=lambda t: API_UP if t >= api_at else {"accepts": False}, peers=all_joined)
    result = lane.wait()

    assert not result.get("failed"), result["msg"]
    assert result["status"] == "ready" and not result["already_serving"]
    # Ready once the API answered and stayed healthy for the window, after r5's slow capture.
    assert api_at + 10 <= lane.ended_s <= api_at + 10 + 2 * lane.poll_s
    # r5's capture took 200 s: ten times the plan's warm-up and more than six stall windows.
    assert slow[-1] - slow[0] == 200.0
    assert any(f"r5 graphs {k}/{total}" in line for line in lane.lines for k in range(1, total))
    # (the first line announces the window: "stall after 30s")
    assert lane.lines[0].startswith(f"lane_wait {lane.plan['lane']}:") and "stall after 30s" in lane.lines[0]
    assert not any(STALL_WORDS.search(line) for line in lane.lines[1:])


def _up_before_the_first_poll(tmp_path, monkeypatch, wait_args):
    """Every rank booted in 15 s and the API answers, but the wait's first poll comes at 60 s: on a
    loaded controller the ranks phase (eight starts, their checks) can take that long."""
    logs = {r: rendezvous(r) + formed(r) + loaded(r, 10.0) for r in range(8)}
    logs[0] += serving(15.0)
    lane = VirtualLane(tmp_path, monkeypatch, vllm_plan(stability_s=10), logs, api=lambda t: API_UP,
                       peers=all_joined, wait_args=wait_args)
    lane.clock.advance(60.0)
    return lane.wait()


def test_a_lane_this_run_started_is_a_boot_even_when_healthy_at_the_first_poll(tmp_path, monkeypatch):
    # The ranks phase began 3 s before the containers started (scenario 15's third deploy under CI load).
    result = _up_before_the_first_poll(tmp_path, monkeypatch, {"boot_since": "2026-10-30T05:59:57.000000Z"})
    assert result["status"] == "ready" and result["already_serving"] is False
    assert 60.0 <= result["boot_s"] <= 70.0
    assert "boot took" in result["msg"] and "already serving" not in result["msg"]


def test_a_lane_an_earlier_run_started_is_already_serving(tmp_path, monkeypatch):
    # This run's ranks phase began 50 s after the containers started: it started none of them.
    for since in ("2026-10-30T06:00:50.000000Z", str(1793340050.0), None):
        result = _up_before_the_first_poll(tmp_path / str(since), monkeypatch, {"boot_since": since})
        assert result["status"] == "ready" and result["already_serving"] is True and result["boot_s"] is None
        assert "it was already serving" in result["msg"]


def test_a_boot_since_that_is_not_a_time_is_one_sentence(tmp_path, monkeypatch):
    with pytest.raises(lw.LaneTaskError, match=r"lane_wait's boot_since 'yesterday' is not a time: give a UTC time "):
        _up_before_the_first_poll(tmp_path, monkeypatch, {"boot_since": "yesterday"})
