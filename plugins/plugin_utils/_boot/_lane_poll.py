# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""One lane node's worker in a lane-wide task: poll its own ranks, share their statuses.

One job: the polling that ``lane_wait`` and ``lane_status`` share. The task runs on every node
of the lane at once; each node's worker process runs ``lanekit.serving.rank_status`` on its own
node through Ansible's connection for that host, asking only for the log lines written since
the previous poll, and turns the answer into :class:`~..plugin_utils._boot._rankstatus.RankStatus`
records (:class:`HostWatcher`). Workers exchange those records as JSON through a
:class:`~._rendezvous.Rendezvous`; the *coordinator* (the head's host) reads everyone's.

Who takes part comes from the plan: its ``ranks`` (in node-rank order), its per-host index
``hosts`` and its ``rendezvous_port``; nothing here parses a rank's command line.
"""
from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from ansible import context
from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.lanekit.serving.plugins.module_utils._boot._probes import api_url, probe_api
from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import (
    RankLog,
    last_timestamp,
    split_timestamp,
)
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines as engines
from ansible_collections.lanekit.serving.plugins.plugin_utils import _reach as reach
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _rankstatus as rankstatus
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rankstatus import RankStatus
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rendezvous import Rendezvous
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._report import fmt_duration

# The first reports take longer (module transfer, interpreter discovery on every node).
FIRST_SYNC_S = 30.0


class LaneTaskError(Exception):
    """An expected failure of a lane-wide task: its text is the sentence the user reads."""


@dataclass
class LaneMembers:
    """Who takes part in a lane-wide task, and who coordinates it."""

    lane: str
    engine: str | None
    ranks: list[dict]  # plan["ranks"] entries (empty: a status without a plan)
    hosts: list[str]
    coordinator: str

    def mine(self, host: str) -> list[dict]:
        return [r for r in self.ranks if r["host"] == host]

    @property
    def rank_hosts(self) -> dict[int, str]:
        return {int(r["node_rank"]): r["host"] for r in self.ranks}


def lane_members(plan: Mapping[str, Any], task_vars: Mapping[str, Any], task: str, lane: str | None = None,
                 engine: str | None = None) -> LaneMembers:
    """The lane's ranks and hosts from the plan, checked against the play (batch and forks)."""
    lane = plan.get("lane") or lane
    if not lane:
        raise LaneTaskError(f"{task} needs the lane's plan (plan: \"{{{{ lanekit_plan }}}}\") or the lane's name "
                            "(lane: NAME).")
    me = cast(str, task_vars.get("inventory_hostname"))  # Ansible sets it for every task
    batch = list(task_vars.get("ansible_play_batch") or [me])
    ranks = list(plan.get("ranks") or [])
    if ranks:
        index = plan.get("hosts")
        if not isinstance(index, Mapping):
            raise LaneTaskError(f"The plan of lane {lane} has no per-host index (plan.hosts); re-plan the lane "
                                "with this collection's preflight role.")
        hosts: list[str] = sorted(index, key=lambda h: min(index[h] or [1 << 30]))
        absent = [h for h in hosts if h not in batch]
        if absent:
            raise LaneTaskError(
                f"{task} must run on every node of lane {lane} at once, but {', '.join(absent)} "
                "is not in this play's batch; drop --limit/serial for this play.")
    else:
        hosts = batch
    forks = int(context.CLIARGS.get("forks") or 5)
    if me in hosts and forks < len(hosts):
        raise LaneTaskError(
            f"{task} needs one fork per node: lane {lane} has {len(hosts)} nodes but forks is {forks}; "
            f"run with -f {len(hosts)} or set forks in ansible.cfg.")
    api_head = (plan.get("api") or {}).get("host")
    head_hosts = [r["host"] for r in ranks if r.get("role") in engines.API_ROLES]
    coordinator = api_head if isinstance(api_head, str) and api_head in hosts else (head_hosts[0] if head_hosts else hosts[0])
    return LaneMembers(lane, plan.get("engine") or engine, ranks, hosts, coordinator)


class HostWatcher:
    """What one host's worker process keeps between polls: a log parser per rank."""

    def __init__(self, ranks: list[dict], engine: str | None, tail_lines: int) -> None:
        self.ranks = ranks
        self.engine = engine
        self.tail_lines = tail_lines
        self.logs: dict[int, RankLog] = {}
        self.tails: dict[int, deque] = {}
        self.since: dict[str, str] = {}
        self.started: dict[int, str] = {}
        self.last: dict[int, RankStatus] = {}
        self.errors = 0
        self.chat_ok: dict | None = None
        self.meminfo: dict = {}

    def _log(self, spec: Mapping[str, Any], started_at: str | None) -> RankLog:
        key = int(spec["node_rank"])
        if key not in self.logs or self.started.get(key) != started_at:
            # A new run of the container (restarted or recreated): start over.
            self.logs[key] = RankLog(self.engine, spec.get("role") or "worker")
            self.tails[key] = deque(maxlen=self.tail_lines)
            self.since.pop(spec["container_name"], None)
            self.started[key] = started_at or ""
        return self.logs[key]

    def _unreachable(self, error: str) -> dict[int, RankStatus]:
        self.errors += 1
        out = {}
        for spec in self.ranks:
            rank = int(spec["node_rank"])
            previous = self.last.get(rank)
            if previous is not None and self.errors < 3:
                # A single missed poll is often a slow connection: keep the last status briefly.
                out[rank] = dataclasses.replace(previous, gather_error=error)
            else:
                out[rank] = rankstatus.build(spec, None, None, time.time(), gather_error=error or "no report")
        return out

    def absorb(self, result: Mapping[str, Any] | None, error: str = "") -> dict[int, RankStatus]:
        """Turn one rank_status result into this host's rank statuses."""
        if result is None:
            return self._unreachable(error)
        self.errors = 0
        node_now = float(result.get("now") or time.time())
        self.meminfo = result.get("meminfo") or {}
        by_name = {c.get("name"): c for c in result.get("containers") or []}
        api = result.get("api")
        if api and api.get("chat_ok"):
            self.chat_ok = {k: api.get(k) for k in ("chat_ok", "ttft_s", "first_token")}
        if api and self.chat_ok and api.get("model_listed"):
            api = dict(api, **self.chat_ok)
        out = {}
        for spec in self.ranks:
            rank, name = int(spec["node_rank"]), spec["container_name"]
            entry = by_name.get(name) or {"exists": False}
            if not entry.get("exists"):
                out[rank] = rankstatus.build(spec, None, None, node_now)
                continue
            inspect = entry.get("inspect") or {}
            log = self._log(spec, (inspect.get("State") or {}).get("StartedAt"))
            lines = list(entry.get("lines") or [])
            fresh = []
            for line in lines:
                ts, _unused = split_timestamp(line)
                if ts is not None and log.last_ts is not None and ts <= log.last_ts:
                    continue
                fresh.append(line)
            log.feed_docker(fresh)
            self.tails[rank].extend(fresh)
            stamp = last_timestamp(lines)
            if stamp:
                self.since[name] = stamp
            status = rankstatus.build(spec, inspect, log, node_now, self._probes(spec, result, api),
                                      tail=list(self.tails[rank])[-20:], gather_error=entry.get("log_error") or "")
            if "MemFree" in self.meminfo:
                status.mem_free_kb = self.meminfo["MemFree"]
                status.mem_available_kb = self.meminfo.get("MemAvailable")
            out[rank] = status
        self.last.update(out)
        return out

    @staticmethod
    def _probes(spec: Mapping[str, Any], result: Mapping[str, Any], api: Mapping[str, Any] | None) -> dict:
        probes: dict[str, Any] = {}
        head = spec.get("role") in engines.API_ROLES
        if head and api is not None:
            probes["api"] = api
        peers = result.get("tcp_peers") or {}
        if head and peers:
            port, ips = next(iter(peers.items()))
            probes["rendezvous"] = {"port": int(port), "peers": list(ips)}
        health = (result.get("health") or {}).get(spec["container_name"])
        if health is not None:
            probes["health"] = health
        return probes


class LaneWorker:
    """One worker's part of a lane-wide task: gather its own ranks, share, read everyone's."""

    # rank_status's api_key / secret_values / secret_env_names (no_log there); the actions set it
    # from lanekit_api_key and lanekit_secret_env (plugin_utils/_boot/_bundle.secret_args).
    secret_args: Mapping[str, Any] = {}

    def __init__(self, action: Any, task_vars: Mapping[str, Any], plan: Mapping[str, Any], members: LaneMembers,
                 rdv: Rendezvous, *, tail_lines: int, probe_from: str = "head", probe_address: str | None = None,
                 chat_probe: bool = True, chat_timeout_s: float = 120.0, sync_timeout_s: float = 3.0) -> None:
        self.action = action
        self.task_vars = task_vars
        self.plan = plan
        self.members = members
        self.lane = members.lane
        self.engine = members.engine
        self.me = cast(str, task_vars.get("inventory_hostname"))  # Ansible sets it for every task
        self.coordinator = members.coordinator
        self.is_coordinator = self.me == members.coordinator
        self.rdv = rdv
        self.my_ranks = members.mine(self.me)
        self.rank_hosts = members.rank_hosts
        self.tail_lines = tail_lines
        self.probe_from = probe_from
        self.probe_address = probe_address
        self.chat_probe = chat_probe
        self.chat_timeout_s = chat_timeout_s
        self.sync_timeout = sync_timeout_s
        self.watcher = HostWatcher(self.my_ranks, self.engine, tail_lines)
        # The exit watch (lane_wait): where the node's next watch replays from, the exits the last
        # call saw, and what a call costs besides its watch (so a watch ends near the next poll).
        self.exit_since: str | None = None
        self.exit_events: list[dict] = []  # every exit seen in this task, oldest first
        self.new_exits = False
        self.call_overhead_s = 1.0

    # --- gathering ---------------------------------------------------------------------------

    def _api_probe(self) -> dict:
        spec = {
            "url": api_url(self.plan, self.probe_address),
            "model": (self.plan.get("api") or {}).get("served_model_name") or "",
            "chat": bool(self.chat_probe) and not self.watcher.chat_ok,
            "chat_timeout": self.chat_timeout_s,
        }
        # The node sends the key only to a port this container holds (rank_status, issue 38).
        api_rank = next((r for r in self.members.ranks if r.get("role") in engines.API_ROLES), None)
        if api_rank is not None:
            spec["container"] = api_rank["container_name"]
        return spec

    def module_args(self, bundle_dir: str | None = None, watch_s: float = 0.0) -> dict:
        margs: dict[str, Any] = {
            "containers": [r["container_name"] for r in self.my_ranks],
            "tail": self.tail_lines,
            "since": dict(self.watcher.since),
        }
        if watch_s > 0 and self.my_ranks:
            margs["exit_watch_s"] = watch_s
            if self.exit_since:
                margs["exit_watch_since"] = self.exit_since
        if not self.my_ranks:
            margs["lane"] = self.lane
        # The rank that answers the lane's API: the head, or a P/D lane's router.
        heads = [r for r in self.my_ranks if r.get("role") in engines.API_ROLES]
        if heads and self.plan.get("api") and self.probe_from == "head":
            margs["api_probe"] = self._api_probe()
        if heads and self.plan.get("rendezvous_port"):
            margs["listen_ports"] = [int(self.plan["rendezvous_port"])]
        # Every other rank that serves HTTP (SGLang workers, data-parallel engines, P/D pool heads):
        # the plan gives it a health port.
        probed = [r for r in self.my_ranks if r.get("role") not in engines.API_ROLES and r.get("health_port")]
        if probed or (self.engine in engines.ENGINES and engines.get(self.engine).workers_serve_health):
            margs["health_probes"] = [
                {"name": r["container_name"], "url": f"http://127.0.0.1:{int(r['health_port'])}/health"}
                for r in probed
            ]
        margs.update(self.secret_args)
        if bundle_dir:
            margs.pop("api_probe", None)
            margs.pop("health_probes", None)
            margs["bundle_dir"] = bundle_dir
            margs["tail"] = 1
        return margs

    def run_module(self, margs: dict) -> tuple[dict | None, str]:
        try:
            res = self.action._execute_module(
                module_name="lanekit.serving.rank_status", module_args=margs, task_vars=self.task_vars)
        except AnsibleError as exc:
            return None, self._reach_error(to_text(exc), unreachable=True)
        if res.get("failed") or res.get("unreachable"):
            # When the node is gone the module prints nothing; the connection's own words say why.
            stderr = [line for line in to_text(res.get("module_stderr") or "").splitlines() if line.strip()]
            if stderr and "deserialization failed" in to_text(res.get("msg") or ""):
                return None, self._reach_error(stderr[-1].strip(), unreachable=True)
            if res.get("unreachable"):
                return None, self._reach_error(to_text(res.get("msg") or ""), unreachable=True)
            return None, to_text(res.get("msg") or "rank_status failed").splitlines()[0]
        return res, ""

    def _reach_error(self, message: str, unreachable: bool) -> str:
        """The connection's words as one sentence with the cause (timeout, host key, sudo, ...)."""
        # Task variables are not templated yet: template the few the sentence names.
        templar = getattr(self.action, "_templar", None)
        names = ("ansible_host", "ansible_user", "ansible_ssh_timeout", "ansible_timeout")
        hostvars = {k: self.task_vars[k] for k in names if self.task_vars.get(k) is not None}
        if templar is not None:
            hostvars = {k: templar.template(v) for k, v in hostvars.items()}
        verdict = reach.explain_for(str(self.me), message, hostvars, unreachable=unreachable)
        if verdict.kind in ("unreachable", "failed"):
            return f"cannot reach {self.me}: {message.strip().splitlines()[-1] if message.strip() else 'no answer'}"
        return verdict.sentence.rstrip(".")

    def gather(self, watch_s: float = 0.0) -> dict[int, RankStatus]:
        """This host's rank statuses; with ``watch_s`` the node first watches its ranks for an exit
        for up to that long (``rank_status`` exit_watch_s), so the call returns at the next poll or
        right after an exit."""
        began = time.monotonic()
        res, error = self.run_module(self.module_args(watch_s=watch_s))
        watch = (res or {}).get("exit_watch") or {}
        new = [e for e in watch.get("events") or [] if e not in self.exit_events]
        self.exit_events += new
        self.new_exits = bool(new)
        if watch.get("next_since"):
            self.exit_since = str(watch["next_since"])
        if res is not None:
            spent = time.monotonic() - began - float(watch.get("watched_s") or 0.0)
            self.call_overhead_s = 0.5 * self.call_overhead_s + 0.5 * max(0.0, spent)
        statuses = self.watcher.absorb(res, error)
        if self.probe_from == "controller" and self.is_coordinator and self.plan.get("api"):
            # From the controller no check of who holds the port can run (its /proc is not the head's),
            # and the key crosses the network in clear: probe_from controller is for a trusted network
            # only (docs/security.md). /health still goes without the key.
            api = probe_api(dict(self._api_probe(), api_key=self.secret_args.get("api_key")))
            if api.get("chat_ok"):
                self.watcher.chat_ok = {k: api.get(k) for k in ("chat_ok", "ttft_s", "first_token")}
            elif self.watcher.chat_ok and api.get("model_listed"):
                api.update(self.watcher.chat_ok)
            for status in statuses.values():
                if status.is_head:
                    status.probes["api"] = api
        return statuses

    def report(self, tick: int, statuses: Mapping[int, RankStatus]) -> None:
        self.rdv.put_host(self.me, {
            "tick": tick, "time": time.time(), "host": self.me,
            "ranks": {str(k): v.to_dict() for k, v in statuses.items()}, "meminfo": self.watcher.meminfo,
            "exit_events": self.exit_events,
        })
        if self.new_exits:
            # the coordinator looks for these between its polls: the exit is judged at once
            self.rdv.put_exit(self.me, {"time": time.time(), "events": self.exit_events})

    def all_statuses(self, tick: int, first: bool = False,
                     timeout_s: float | None = None) -> tuple[dict[int, RankStatus], dict[str, dict]]:
        """Every rank's status of this tick (or the latest, marked stale), from every host's report."""
        timeout = max(self.sync_timeout, FIRST_SYNC_S) if first else self.sync_timeout
        if timeout_s is not None:
            timeout = timeout_s
        reports = self.rdv.collect(self.members.hosts, tick, timeout)
        statuses: dict[int, RankStatus] = {}
        for spec in self.members.ranks:
            rank, host = int(spec["node_rank"]), spec["host"]
            report = reports.get(host) or {}
            data = (report.get("ranks") or {}).get(str(rank))
            if data is None:
                status = rankstatus.build(spec, None, None, time.time(), gather_error=f"no report from {host} yet")
            else:
                status = RankStatus.from_dict(data)
                if int(report.get("tick", -1)) < tick - 2:
                    status.gather_error = (f"last report from {host} is "
                                           f"{fmt_duration(time.time() - report.get('time', 0))} old")
            statuses[rank] = status
        if not self.members.ranks:
            for report in reports.values():
                for data in (report.get("ranks") or {}).values():
                    status = RankStatus.from_dict(data)
                    statuses[status.rank] = status
        return statuses, reports
