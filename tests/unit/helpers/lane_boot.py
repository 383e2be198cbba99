# Copyright: lanekit developers
# Apache-2.0
"""A whole lane booting on a virtual clock, for lane_wait's verdicts that take minutes on the sim.

Each node answers ``rank_status`` from its ranks' logs as they stand at the virtual time (a log is
a list of ``(seconds after the containers started, text)``), the head's node with its API probe and
the connections to its rendezvous port. The wait's own code runs unchanged: one
:class:`~lane_wait.Waiter` per node, the head's as the coordinator. Time passes only when the wait
sleeps to its next poll or a node watches its ranks for an exit (``exit_watch_s``), so a 30 s stall
window costs no real second. The other nodes are driven in step with the coordinator (they report
during its status call, and write their part of the failure bundle while it waits for them),
which keeps every poll deterministic.
"""
from __future__ import annotations

import os
import time

from ansible import context
from ansible.module_utils.common.collections import ImmutableDict

from ansible_collections.lanekit.serving.plugins.action import lane_wait as lw
from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import parse_docker_time
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _lane_poll as poll
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rendezvous import Rendezvous
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._tracker import BootConfig
from tests.unit.helpers.lane_fakes import FakeAction, container

# 2026-10-30T06:00:00Z: lane_fakes.STARTED, when every rank's container started (virtual t = 0).
T0 = 1793340000.0
LANE = "mistral-large4-nvfp4-8x-vllm"
API_UP = {"url": "http://10.10.10.1:8000", "accepts": True, "health_status": 200, "model_listed": True,
          "chat_ok": True, "ttft_s": 0.4}


def vllm_plan(nodes: int = 8, **boot) -> dict:
    """A vLLM lane of one rank per node (spark-01 the head), as the preflight role publishes it."""
    hosts = [f"spark-{i + 1:02d}" for i in range(nodes)]
    ranks = [{"host": h, "node_rank": i, "role": "head" if i == 0 else "worker", "container_name": f"lk-r{i}",
              "fabric_ip": f"10.10.10.{i + 1}", "spec_hash": f"h{i}"} for i, h in enumerate(hosts)]
    figures = dict(budget_s=1800, stall_s=30, poll_s=5, stability_s=10, expected_load_s=60, expected_warmup_s=20)
    figures.update(boot)
    return {"lane": LANE, "engine": "vllm",
            "api": {"host": hosts[0], "address": "10.10.10.1", "port": 8000, "served_model_name": "mistral-large-4"},
            "boot": figures, "rendezvous_port": 29501, "barrier_timeout_s": 1800.0, "reports_dir": "",
            "hosts": {h: [i] for i, h in enumerate(hosts)}, "ranks": ranks}


# --- vLLM log lines, each at its virtual time: [(t, text)] -------------------------------------

def say(rank: int, text: str) -> str:
    """A vLLM line of ``rank``'s engine process (the head's EngineCore, a headless rank's Worker)."""
    return f"({'EngineCore_DP0 pid=312' if rank == 0 else 'Worker pid=201'}) INFO 10-30 06:00:00 {text}"


def rendezvous(rank: int, *, launched: bool = True, init: bool = True) -> list:
    """The rank's lines up to the rendezvous: its start (t 1-2), then its init method (t 3)."""
    out = []
    if launched:
        out.append((1.0, "INFO 10-30 06:00:01 [api_server.py:1805] vLLM API server version 0.1.dev23730") if rank == 0
                   else (2.0, "INFO 10-30 06:00:02 [serve.py:221] Launching vLLM (v0.1.dev23730) headless "
                              "multiproc executor, with head node address 10.10.10.1 for torch.distributed "
                              "process group."))
    if init:
        out.append((3.0, say(rank, f"[parallel_state.py:1208] world_size=8 rank={rank} local_rank=0 "
                                   "distributed_init_method=tcp://10.10.10.1:29501 backend=nccl")))
    return out


def formed(rank: int, at: float = 6.0) -> list:
    """The group formed: the first line after it (vLLM prints nothing while it forms)."""
    return [(at, say(rank, f"[parallel_state.py:1411] rank {rank} in world size 8 is assigned as DP rank 0, "
                           f"PP rank 0, TP rank {rank}, EP rank {rank}"))]


def shard_bar(times: list, total: int) -> list:
    """The head's load bar (vLLM's headless ranks print none): shard k at times[k]."""
    start = times[0]
    return [(at, f"Loading safetensors checkpoint shards: {100 * k // total:3d}% Completed | {k}/{total} "
                 f"[00:{int(at - start):02d}<?, ?it/s]") for k, at in enumerate(times)]


def loaded(rank: int, at: float) -> list:
    return [(at, say(rank, f"[default_loader.py:267] Loading weights took {at - 6:.2f} seconds")),
            (at + 0.5, say(rank, "[gpu_model_runner.py:2653] Model loading took 73.8012 GiB memory"))]


def graphs(rank: int, times: list, total: int) -> list:
    """KV profiling just before the first capture line, the capture bar (k at times[k]), then done."""
    steps = [(at, say(rank, f"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): {100 * k // total:3d}%|"
                            f"          | {k}/{total} [00:00<?, ?it/s]")) for k, at in enumerate(times)]
    return ([(times[0] - 2, say(rank, "[gpu_worker.py:298] Available KV cache memory: 28.53 GiB"))] + steps
            + [(times[-1] + 1, say(rank, "[gpu_model_runner.py:3480] Graph capturing finished in 20 secs"))])


def serving(at: float) -> list:
    """The head's last lines: its engine is up, its API server starts."""
    return [(at, say(0, "[core.py:210] init engine (profile, create kv cache, warmup model) took 107.88 seconds")),
            (at + 2, "INFO 10-30 06:00:00 [api_server.py:1600] Starting vLLM API server 0 on http://0.0.0.0:8000"),
            (at + 3, "INFO:     Application startup complete.")]


def all_joined(t: float) -> list:
    """The workers' addresses on the head's rendezvous port: every one from its init line (t 3) on."""
    return [f"10.10.10.{r + 1}" for r in range(1, 8)] if t >= 3 else []


def stamp(t: float) -> str:
    """The docker timestamp of virtual time ``t``."""
    whole = int(T0 + t)
    nanos = int(round((T0 + t - whole) * 1e9))
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{nanos:09d}Z"


class VirtualClock:
    """lane_wait's and _lane_poll's ``time``: passes only when the wait sleeps or a node watches."""

    def __init__(self) -> None:
        self.t = 0.0
        self.on_sleep = []

    def time(self) -> float:
        return T0 + self.t

    def monotonic(self) -> float:
        return 1000.0 + self.t

    def advance(self, seconds: float) -> None:
        self.t += max(0.0, seconds)

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        for hook in self.on_sleep:
            hook()


class ScriptedNode:
    """One node's ``rank_status``: its ranks' log lines up to the virtual now, since the last call's."""

    def __init__(self, clock, logs, api=None, peers=None, after=None):
        self.clock = clock
        self.logs = logs          # {container: [(t, text)]}
        self.api = api            # t -> the API probe's result (head only)
        self.peers = peers        # t -> addresses connected to the rendezvous port (head; None: not measured)
        self.after = after        # called before the answer returns (the other nodes report)

    def __call__(self, margs):
        watch = float(margs.get("exit_watch_s") or 0.0)
        self.clock.advance(watch)  # the node watched its ranks until the next poll: none exited
        now = self.clock.time()
        t = now - T0
        containers = []
        for name in margs["containers"]:
            since = parse_docker_time((margs.get("since") or {}).get(name))
            lines = [f"{stamp(at)} {text}" for at, text in sorted(self.logs.get(name, []), key=lambda x: x[0])
                     if at <= t and (since is None or parse_docker_time(stamp(at)) > since)]
            containers.append(container(name, lines))
        result = {"containers": containers, "now": now, "health": {}, "meminfo": {"MemFree": 90000000},
                  "exit_watch": {"events": [], "watched_s": watch, "next_since": f"{now:.6f}"}}
        if margs.get("api_probe"):
            result["api"] = self.api(t) if self.api else {"accepts": False}
        if margs.get("listen_ports") and self.peers:
            result["tcp_peers"] = {str(port): list(self.peers(t)) for port in margs["listen_ports"]}
        if self.after:
            self.after()
        return result


class VirtualLane:
    """Every node of ``plan`` booting ``logs`` ({rank: [(t, text)]}); :meth:`wait` runs the coordinator."""

    def __init__(self, tmp_path, monkeypatch, plan, logs, api=None, peers=None, wait_args=None):
        self.clock = clock = VirtualClock()
        monkeypatch.setattr(lw, "time", clock)
        monkeypatch.setattr(poll, "time", clock)
        monkeypatch.setattr(context, "CLIARGS", ImmutableDict(forks=len(plan["hosts"])))
        self.lines = []
        monkeypatch.setattr(lw.display, "display", lambda msg, *_a, **_kw: self.lines.append(msg))
        self.plan = plan = dict(plan, reports_dir=str(tmp_path / "reports" / plan["lane"]))
        self.poll_s = float(plan["boot"]["poll_s"])
        self.rdv = Rendezvous(str(tmp_path / "rdv"))
        self.workers = {}
        self.actions = {}
        for host, node_ranks in plan["hosts"].items():
            head = host == plan["api"]["host"]
            node = ScriptedNode(clock, {f"lk-r{r}": logs.get(r, []) for r in node_ranks},
                                api=api if head else None, peers=peers if head else None,
                                after=self._others_report if head else None)
            action = FakeAction(str(tmp_path / ("node-" + host)), [node])
            os.makedirs(action._connection.node_dir, exist_ok=True)
            task_vars = {"inventory_hostname": host, "ansible_play_batch": list(plan["hosts"])}
            members = poll.lane_members(plan, task_vars, "lane_wait")
            args = {k: v.get("default") for k, v in lw.ARGUMENT_SPEC.items()}
            args.update(plan=plan, mode="wait", sync_timeout_s=0.5, bundle_timeout_s=60, **(wait_args or {}))
            self.workers[host] = lw.Waiter(action, args, task_vars, plan, members, BootConfig.from_plan(plan),
                                           self.rdv, plan["reports_dir"])
            self.actions[host] = action
        self.coordinator = self.workers[plan["api"]["host"]]
        self.others = [w for h, w in self.workers.items() if w is not self.coordinator]
        self.followed = False
        clock.on_sleep.append(self._others_follow)

    def _others_report(self) -> None:
        # Every other node's poll of this tick, read before the coordinator collects the reports.
        tick = int(self.clock.time() // self.poll_s)
        for worker in self.others:
            worker.report(tick, worker.gather())

    def _others_follow(self) -> None:
        # The others see the failed verdict and add their ranks to the bundle, as their loops do.
        shared = self.rdv.get_verdict()
        if self.followed or not shared or shared.get("status") != "failed":
            return
        self.followed = True
        for worker in self.others:
            worker.follow(shared, {})

    def wait(self) -> dict:
        result = self.coordinator.wait({})
        self.ended_s = result["ended_at"] - T0
        return result
