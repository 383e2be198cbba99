# Copyright: lanekit developers
# Apache-2.0
"""Wait for a lane to boot, with one status line per poll; fail fast and keep the evidence.

How the status of 8 nodes is gathered (design)
------------------------------------------------
The task runs on every node of the lane at once (not ``run_once``): each node's worker process
runs ``lanekit.serving.rank_status`` on its own node through Ansible's own connection for that
host (ssh on hardware, ``community.docker.docker`` on the simulated cluster), once per poll,
and asks only for the log lines written since the previous poll. So no plugin code has to open
connections to other hosts, every node is polled in parallel, and a poll costs one small module
run per node (about 0.3 s of CPU each).

The workers meet in a private directory on the controller (``$TMPDIR/lanekit-lane-wait-<uid>/
<playbook pid>-<task uuid>/``). Polls are aligned on the wall clock (every ``poll_s``), each
worker writes its ranks' parsed status there, and one of them, the *coordinator* (the head's
host), reads all of them, prints the status line, and decides with
:class:`~..module_utils._progress.LaneTracker`: waiting, ready, or failed. Its verdict file
ends the other workers' loops within one poll. On failure every worker fetches its own ranks'
full logs and ``docker inspect`` into the bundle; the coordinator writes the plan, the verdict
and the status history, and fails the task with the explanation. The others end ``ok`` (the
role marks the task ``any_errors_fatal``, so the play stops on the coordinator's failure).

The API probes (port, ``/health``, ``/v1/models``, one streamed chat completion) run from the
head node by default (``probe_from: head``): the head always reaches its own fabric address,
while the controller may sit on a management network. ``probe_from: controller`` probes from
the controller instead. SGLang worker health servers are probed by their own nodes.

Requirements: one fork per lane node (``forks`` >= nodes), all lane nodes in the same batch
(no ``serial``/``--limit`` that drops a node).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections import deque
from typing import Any, Callable, Mapping

from ansible import context
from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils import _progress as progress
from ansible_collections.lanekit.serving.plugins.module_utils import _signatures as sigs

display = Display()

ARGUMENT_SPEC = dict(
    plan=dict(type="dict"),
    lane=dict(type="str"),
    mode=dict(type="str", default="wait", choices=["wait", "status", "explain"]),
    budget_s=dict(type="float"),
    stall_s=dict(type="float"),
    poll_s=dict(type="float"),
    stability_s=dict(type="float"),
    chat_probe=dict(type="bool", default=True),
    chat_timeout_s=dict(type="float", default=120.0),
    probe_from=dict(type="str", default="head", choices=["head", "controller"]),
    probe_address=dict(type="str"),
    tail_lines=dict(type="int", default=400),
    reports_dir=dict(type="path"),
    sync_timeout_s=dict(type="float"),
    bundle_timeout_s=dict(type="float", default=300.0),
    text=dict(type="str"),
    engine=dict(type="str"),
    context=dict(type="str", default=""),
    fail=dict(type="bool", default=True),
)

HEARTBEAT_SLACK_S = 90.0
FIRST_SYNC_S = 30.0


class LaneWaitError(Exception):
    """An expected failure of the wait: its text is the sentence the user reads."""


def default_reports_dir(task_vars: Mapping[str, Any]) -> str:
    """``lanekit_reports_dir``, else ``reports/`` beside the playbooks directory."""
    explicit = task_vars.get("lanekit_reports_dir")
    if explicit:
        return os.path.abspath(str(explicit))
    base = str(task_vars.get("playbook_dir") or os.getcwd())
    if os.path.basename(os.path.normpath(base)) == "playbooks":
        base = os.path.dirname(os.path.normpath(base))
    return os.path.join(base, "reports")


def explain_message(text: str, engine: str | None = None, context_sentence: str = "") -> tuple[list, str]:
    """(matches, message) for a free text such as a docker start error."""
    matches = sigs.explain_text(text, engine)
    lines = []
    if context_sentence:
        lines.append(context_sentence.rstrip(".") + ".")
    if text.strip():
        lines.append("The error was: " + text.strip().splitlines()[-1][:500])
    for match in matches:
        lines.append(sigs.describe(match))
    if not matches:
        lines.append("No known failure signature matched.")
    return matches, "\n".join(lines)


def new_bundle_dir(reports_dir: str, lane: str, now: float | None = None) -> str:
    """``<reports>/<lane>/<UTC timestamp>``, made unique, created."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))
    path = os.path.join(reports_dir, lane, stamp)
    candidate, n = path, 1
    while os.path.exists(candidate):
        n += 1
        candidate = f"{path}-{n}"
    os.makedirs(candidate)
    return candidate


def _atomic_write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def _read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


class Bundle:
    """The failure bundle on the controller: reports/<lane>/<timestamp>/."""

    def __init__(self, root: str) -> None:
        self.root = root

    def path(self, *parts: str) -> str:
        full = os.path.join(self.root, *parts)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        return full

    @staticmethod
    def rank_dir(rank: int, host: str) -> str:
        return os.path.join("ranks", f"r{rank}-{host}")

    def write_text(self, rel: str, text: str) -> str:
        path = self.path(rel)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text if text.endswith("\n") or not text else text + "\n")
        return path

    def write_json(self, rel: str, obj: Any) -> str:
        return self.write_text(rel, json.dumps(obj, indent=2, sort_keys=True, default=str))

    def write_rank(self, rank: int, host: str, status: Mapping[str, Any], tail: list[str]) -> None:
        base = self.rank_dir(rank, host)
        self.write_text(os.path.join(base, "log-tail.txt"), "\n".join(tail))
        self.write_json(os.path.join(base, "status.json"), status)

    def fetch_rank_files(self, rank: int, host: str, container: str, remote_files: list[str],
                         fetch: Callable[[str, str], None]) -> list[str]:
        """Copy a node's full log and inspect of one container into the rank's folder."""
        written = []
        base = self.rank_dir(rank, host)
        for remote in remote_files:
            name = os.path.basename(remote)
            if name == container + ".log":
                local = self.path(base, "full.log")
            elif name == container + ".inspect.json":
                local = self.path(base, "inspect.json")
            else:
                continue
            fetch(remote, local)
            written.append(local)
        return written

    def fetch_host_files(self, host: str, remote_files: list[str], fetch: Callable[[str, str], None]) -> list[str]:
        written = []
        for remote in remote_files:
            if os.path.basename(remote) == "meminfo.txt":
                local = self.path("hosts", host, "meminfo.txt")
                fetch(remote, local)
                written.append(local)
        return written

    def write_summary(self, lane: str, plan: Any, verdict: Mapping[str, Any], message: str,
                      history: list[str]) -> None:
        self.write_json("plan.json", plan)
        self.write_json("verdict.json", verdict)
        self.write_text("summary.txt", message)
        self.write_text("status-history.log", "\n".join(history))

    def mark_done(self, host: str, note: str = "") -> None:
        self.write_text(os.path.join(".done", host), note or "ok")

    def done_hosts(self) -> set[str]:
        folder = os.path.join(self.root, ".done")
        try:
            return set(os.listdir(folder))
        except OSError:
            return set()


class Rendezvous:
    """The controller-side meeting point of the lane's worker processes."""

    def __init__(self, root: str) -> None:
        self.root = root
        os.makedirs(os.path.join(root, "hosts"), exist_ok=True)

    @staticmethod
    def default_root(task_uuid: str) -> str:
        base = os.path.join(tempfile.gettempdir(), f"lanekit-lane-wait-{os.getuid()}")
        os.makedirs(base, mode=0o700, exist_ok=True)
        Rendezvous.prune(base)
        return os.path.join(base, f"{os.getppid()}-{task_uuid}")

    @staticmethod
    def prune(base: str, max_age_s: float = 86400.0) -> None:
        now = time.time()
        try:
            entries = os.listdir(base)
        except OSError:
            return
        for name in entries:
            path = os.path.join(base, name)
            try:
                if now - os.path.getmtime(path) > max_age_s:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                continue

    def put_host(self, host: str, report: Mapping[str, Any]) -> None:
        _atomic_write(os.path.join(self.root, "hosts", host + ".json"), json.dumps(report, default=str))

    def get_host(self, host: str) -> dict | None:
        return _read_json(os.path.join(self.root, "hosts", host + ".json"))

    def put_verdict(self, verdict: Mapping[str, Any]) -> None:
        _atomic_write(os.path.join(self.root, "verdict.json"), json.dumps(verdict, default=str))

    def get_verdict(self) -> dict | None:
        return _read_json(os.path.join(self.root, "verdict.json"))

    def heartbeat(self) -> None:
        _atomic_write(os.path.join(self.root, "coordinator.json"), json.dumps({"time": time.time()}))

    def heartbeat_age(self) -> float | None:
        beat = _read_json(os.path.join(self.root, "coordinator.json"))
        if not beat:
            return None
        return time.time() - float(beat.get("time", 0))

    def collect(self, hosts: list[str], tick: int, timeout_s: float,
                sleep: Callable[[float], None] = time.sleep) -> dict[str, dict]:
        """Every host's latest report, waiting up to timeout_s for reports of this tick."""
        deadline = time.monotonic() + timeout_s
        reports: dict[str, dict] = {}
        while True:
            for host in hosts:
                report = self.get_host(host)
                if report is not None:
                    reports[host] = report
            fresh = [h for h in hosts if h in reports and int(reports[h].get("tick", -1)) >= tick]
            if len(fresh) == len(hosts) or time.monotonic() >= deadline:
                return reports
            sleep(0.5)


def plan_ranks(plan: Mapping[str, Any]) -> list[dict]:
    ranks = []
    for spec in plan.get("ranks") or []:
        ranks.append({
            "rank": int(spec.get("node_rank", len(ranks))),
            "host": spec.get("host", ""),
            "role": spec.get("role") or ("head" if int(spec.get("node_rank", 1)) == 0 else "worker"),
            "container": spec.get("container_name", ""),
            "health_port": spec.get("health_port"),
            "image": spec.get("image", ""),
            "spec_hash": spec.get("spec_hash", ""),
            "fabric_ip": spec.get("fabric_ip") or (spec.get("env") or {}).get("VLLM_HOST_IP")
            or (spec.get("env") or {}).get("SGLANG_HOST_IP") or "",
        })
    return ranks


def rendezvous_port(plan: Mapping[str, Any]) -> int | None:
    """The head's rendezvous (TCPStore) port, read from the head rank's command."""
    heads = [r for r in plan.get("ranks") or [] if r.get("role") == "head" or r.get("node_rank") == 0]
    if not heads:
        return None
    argv = [str(a) for a in heads[0].get("command") or []]
    for i, arg in enumerate(argv):
        value = None
        if arg in ("--master-port", "--dist-init-addr", "--nccl-init-addr") and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(("--master-port=", "--dist-init-addr=", "--nccl-init-addr=")):
            value = arg.split("=", 1)[1]
        if value is None:
            continue
        port = value.rsplit(":", 1)[-1]
        if port.isdigit():
            return int(port)
    if plan.get("engine") == "vllm" and any("--nnodes" in str(a) for a in argv):
        return 29501
    return None


def api_url(plan: Mapping[str, Any], address: str | None = None) -> str:
    api = plan.get("api") or {}
    host = address or api.get("address") or "127.0.0.1"
    port = int(api.get("port") or 8000)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def last_timestamp(lines: list[str]) -> str | None:
    for line in reversed(lines):
        token = line.split(" ", 1)[0]
        if progress.split_timestamp(line)[0] is not None:
            return token
    return None


class HostWatcher:
    """What one host's worker process keeps between polls: a log parser per rank."""

    def __init__(self, ranks: list[dict], engine: str | None, tail_lines: int) -> None:
        self.ranks = ranks
        self.engine = engine
        self.tail_lines = tail_lines
        self.logs: dict[int, progress.RankLog] = {}
        self.tails: dict[int, deque] = {}
        self.since: dict[str, str] = {}
        self.started: dict[int, str] = {}
        self.last: dict[int, dict] = {}
        self.errors = 0
        self.chat_ok: dict | None = None
        self.meminfo: dict = {}

    def _log(self, rank: dict, started_at: str | None) -> progress.RankLog:
        key = rank["rank"]
        if key not in self.logs or self.started.get(key) != started_at:
            # A new run of the container (restarted or recreated): start over.
            self.logs[key] = progress.RankLog(self.engine, rank["role"])
            self.tails[key] = deque(maxlen=self.tail_lines)
            self.since.pop(rank["container"], None)
            self.started[key] = started_at or ""
        return self.logs[key]

    def absorb(self, result: Mapping[str, Any] | None, error: str = "") -> dict[int, dict]:
        """Turn one rank_status result into per-rank status dicts."""
        if result is None:
            self.errors += 1
            out = {}
            for rank in self.ranks:
                previous = self.last.get(rank["rank"])
                if previous is not None and self.errors < 3:
                    status = dict(previous, gather_error=error)
                else:
                    status = progress.rank_status(rank, None, None, time.time(), gather_error=error or "no report")
                out[rank["rank"]] = status
            return out
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
        for rank in self.ranks:
            entry = by_name.get(rank["container"]) or {"exists": False}
            if not entry.get("exists"):
                out[rank["rank"]] = progress.rank_status(rank, None, None, node_now)
                continue
            inspect = entry.get("inspect") or {}
            started_at = (inspect.get("State") or {}).get("StartedAt")
            log = self._log(rank, started_at)
            lines = list(entry.get("lines") or [])
            fresh = []
            for line in lines:
                ts, _ = progress.split_timestamp(line)
                if ts is not None and log.last_ts is not None and ts <= log.last_ts:
                    continue
                fresh.append(line)
            log.feed_docker(fresh)
            self.tails[rank["rank"]].extend(fresh)
            stamp = last_timestamp(lines)
            if stamp:
                self.since[rank["container"]] = stamp
            probes = {}
            if rank["role"] == "head" and api is not None:
                probes["api"] = api
            peers = result.get("tcp_peers") or {}
            if rank["role"] == "head" and peers:
                port, ips = next(iter(peers.items()))
                probes["rendezvous"] = {"port": int(port), "peers": list(ips)}
            health = (result.get("health") or {}).get(rank["container"])
            if health is not None:
                probes["health"] = health
            status = progress.rank_status(rank, inspect, log, node_now, probes,
                                          tail=list(self.tails[rank["rank"]])[-20:],
                                          gather_error=entry.get("log_error") or "")
            if "MemFree" in self.meminfo:
                status["mem_free_kb"] = self.meminfo["MemFree"]
                status["mem_available_kb"] = self.meminfo.get("MemAvailable")
            out[rank["rank"]] = status
        self.last.update(out)
        return out


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    # --- entry ---------------------------------------------------------------------------

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            if args["mode"] == "explain":
                return self._explain(args, result)
            return self._watch(args, task_vars, result)
        except LaneWaitError as exc:
            result.update(failed=True, msg=str(exc))
            return result

    # --- explain: match a free text (e.g. a docker start error) ------------------------------

    def _explain(self, args, result):
        matches, msg = explain_message(args.get("text") or "", args.get("engine"), args.get("context") or "")
        result.update(signatures=[m.to_dict() for m in matches], msg=msg, changed=False)
        if args.get("fail"):
            result["failed"] = True
        return result

    # --- wait / status ----------------------------------------------------------------------

    def _watch(self, args, task_vars, result):
        plan = args.get("plan") or {}
        lane = plan.get("lane") or args.get("lane")
        if not lane:
            raise LaneWaitError("lane_wait needs the lane's plan (plan: \"{{ lanekit_plan }}\") or, for the "
                                "status mode, the lane name (lane: NAME).")
        if args["mode"] == "wait" and not plan.get("ranks"):
            raise LaneWaitError(f"lane_wait has no ranks for lane {lane}: pass the plan published by the "
                                "preflight role (plan: \"{{ lanekit_plan }}\").")
        me = task_vars.get("inventory_hostname")
        batch = list(task_vars.get("ansible_play_batch") or [me])
        if plan.get("ranks"):
            ranks = plan_ranks(plan)
            hosts = sorted({r["host"] for r in ranks}, key=lambda h: min(x["rank"] for x in ranks if x["host"] == h))
            absent = [h for h in hosts if h not in batch]
            if absent:
                raise LaneWaitError(
                    f"lane_wait must run on every node of lane {lane} at once, but {', '.join(absent)} "
                    "is not in this play's batch; drop --limit/serial for this play.")
        else:
            ranks = []
            hosts = list(batch)
        if me not in hosts:
            result.update(skipped=True, msg=f"No rank of lane {lane} runs on {me}.")
            return result
        forks = int(context.CLIARGS.get("forks") or 5)
        if forks < len(hosts):
            raise LaneWaitError(
                f"lane_wait needs one fork per node: lane {lane} has {len(hosts)} nodes but forks is {forks}; "
                f"run with -f {len(hosts)} or set forks in ansible.cfg.")
        if self._play_context.check_mode and args["mode"] == "wait":
            result.update(skipped=True, msg="Check mode: nothing was started, so there is nothing to wait for.")
            return result

        engine = plan.get("engine") or args.get("engine")
        api_head = (plan.get("api") or {}).get("host")
        head_hosts = [r["host"] for r in ranks if r["role"] == "head"]
        coordinator = api_head if api_head in hosts else (head_hosts[0] if head_hosts else hosts[0])
        cfg = progress.BootConfig.from_plan(
            plan, budget_s=args.get("budget_s"), stall_s=args.get("stall_s"), poll_s=args.get("poll_s"),
            stability_s=args.get("stability_s"), chat_probe=args["chat_probe"])
        cfg.poll_s = max(1.0, cfg.poll_s)
        rdv = Rendezvous(Rendezvous.default_root(self._task._uuid))
        ctx = _Ctx(self, args, task_vars, plan, lane, engine, ranks, hosts, me, coordinator, cfg, rdv)
        if args["mode"] == "status":
            return ctx.status(result)
        return ctx.wait(result)


class _Ctx:
    """One worker's part of a lane wait (see the module docstring for the design)."""

    def __init__(self, action, args, task_vars, plan, lane, engine, ranks, hosts, me, coordinator, cfg, rdv):
        self.action = action
        self.args = args
        self.task_vars = task_vars
        self.plan = plan
        self.lane = lane
        self.engine = engine
        self.ranks = ranks
        self.hosts = hosts
        self.me = me
        self.coordinator = coordinator
        self.is_coordinator = me == coordinator
        self.cfg = cfg
        self.rdv = rdv
        self.my_ranks = [r for r in ranks if r["host"] == me]
        self.rank_hosts = {r["rank"]: r["host"] for r in ranks}
        self.watcher = HostWatcher(self.my_ranks, engine, args["tail_lines"])
        self.sync_timeout = args.get("sync_timeout_s") or min(max(cfg.poll_s * 0.8, 3.0), 30.0)
        self.rdzv_port = rendezvous_port(plan) if plan else None

    # --- gathering ---------------------------------------------------------------------------

    def module_args(self, bundle_dir: str | None = None) -> dict:
        margs: dict[str, Any] = {
            "containers": [r["container"] for r in self.my_ranks],
            "tail": self.args["tail_lines"],
            "since": dict(self.watcher.since),
        }
        if not self.my_ranks:
            margs["lane"] = self.lane
        heads = [r for r in self.my_ranks if r["role"] == "head"]
        if heads and self.plan.get("api") and self.args["probe_from"] == "head":
            margs["api_probe"] = {
                "url": api_url(self.plan, self.args.get("probe_address")),
                "model": (self.plan.get("api") or {}).get("served_model_name") or "",
                "chat": bool(self.args["chat_probe"]) and not self.watcher.chat_ok,
                "chat_timeout": self.args["chat_timeout_s"],
            }
        if heads and self.rdzv_port:
            margs["listen_ports"] = [self.rdzv_port]
        if self.engine == "sglang":
            margs["health_probes"] = [
                {"name": r["container"], "url": f"http://127.0.0.1:{int(r['health_port'])}/health"}
                for r in self.my_ranks if r["role"] != "head" and r.get("health_port")
            ]
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
            return None, f"cannot reach {self.me}: {to_text(exc).splitlines()[0]}"
        if res.get("failed") or res.get("unreachable"):
            return None, to_text(res.get("msg") or "rank_status failed").splitlines()[0]
        return res, ""

    def gather(self) -> dict[int, dict]:
        res, error = self.run_module(self.module_args())
        statuses = self.watcher.absorb(res, error)
        if self.args["probe_from"] == "controller" and self.is_coordinator and self.plan.get("api"):
            from ansible_collections.lanekit.serving.plugins.modules.rank_status import probe_api
            api = probe_api({
                "url": api_url(self.plan, self.args.get("probe_address")),
                "model": (self.plan.get("api") or {}).get("served_model_name") or "",
                "chat": bool(self.args["chat_probe"]) and not self.watcher.chat_ok,
                "chat_timeout": self.args["chat_timeout_s"],
            })
            if api.get("chat_ok"):
                self.watcher.chat_ok = {k: api.get(k) for k in ("chat_ok", "ttft_s", "first_token")}
            elif self.watcher.chat_ok and api.get("model_listed"):
                api.update(self.watcher.chat_ok)
            for status in statuses.values():
                if status.get("role") == "head":
                    status.setdefault("probes", {})["api"] = api
        return statuses

    def report(self, tick: int, statuses: dict[int, dict]) -> None:
        self.rdv.put_host(self.me, {
            "tick": tick, "time": time.time(), "host": self.me,
            "ranks": {str(k): v for k, v in statuses.items()}, "meminfo": self.watcher.meminfo,
        })

    def all_statuses(self, tick: int, first: bool = False) -> tuple[dict[int, dict], dict[str, dict]]:
        # The first reports take longer (module transfer, interpreter discovery on every node).
        timeout = max(self.sync_timeout, FIRST_SYNC_S) if first else self.sync_timeout
        reports = self.rdv.collect(self.hosts, tick, timeout)
        statuses: dict[int, dict] = {}
        for rank in self.ranks:
            report = reports.get(rank["host"])
            status = (report or {}).get("ranks", {}).get(str(rank["rank"])) if report else None
            if status is None:
                status = progress.rank_status(rank, None, None, time.time(),
                                              gather_error=f"no report from {rank['host']} yet")
            elif report and int(report.get("tick", -1)) < tick - 2:
                status = dict(status, gather_error=f"last report from {rank['host']} is "
                                                   f"{progress.fmt_duration(time.time() - report.get('time', 0))} old")
            statuses[rank["rank"]] = status
        if not self.ranks:
            for host, report in reports.items():
                for key, status in (report.get("ranks") or {}).items():
                    statuses[int(key)] = status
        return statuses, reports

    # --- status mode --------------------------------------------------------------------------

    def status(self, result):
        # A status must not send traffic beyond the health probes, and reads a longer tail.
        self.args = dict(self.args, chat_probe=False, tail_lines=max(self.args["tail_lines"], 2000))
        if not self.ranks:
            # No plan: discover the lane's containers by label on every node.
            res, error = self.run_module(self.module_args())
            statuses = {}
            if res:
                for entry in res.get("containers") or []:
                    if not entry.get("exists"):
                        continue
                    rank = entry.get("rank")
                    if rank is None:
                        continue
                    meta = {"rank": rank, "host": self.me, "container": entry["name"],
                            "role": entry.get("role") or ("head" if rank == 0 else "worker")}
                    log = progress.RankLog(self.engine, meta["role"])
                    log.feed_docker(entry.get("lines") or [])
                    statuses[rank] = progress.rank_status(meta, entry.get("inspect"), log,
                                                          float(res.get("now") or time.time()))
            self.report(0, statuses)
        else:
            statuses = self.gather()
            self.report(0, statuses)
        if not self.is_coordinator:
            result.update(changed=False, msg=f"Status of {self.me} reported to {self.coordinator}.",
                          ranks=list(statuses.values()))
            return result
        self.sync_timeout = max(self.sync_timeout, 60.0)
        every, _ = self.all_statuses(0)
        tracker = progress.LaneTracker(self.lane, self.engine, self.cfg, self.rank_hosts)
        table = progress.render_table(tracker.infer(every), self.lane)
        for line in table:
            display.display(line)
        result.update(changed=False, table=table, ranks=[every[k] for k in sorted(every)],
                      msg=f"Lane {self.lane}: {sum(1 for s in every.values() if s.get('state') == 'running')}"
                          f"/{len(every)} rank containers running.")
        return result

    # --- wait mode ----------------------------------------------------------------------------

    def wait(self, result):
        poll = self.cfg.poll_s
        tracker = progress.LaneTracker(self.lane, self.engine, self.cfg, self.rank_hosts)
        started = time.monotonic()
        hard_stop = started + self.cfg.budget_s + self.cfg.stall_s + 600.0
        beat_limit = 3 * poll + self.args["chat_timeout_s"] + HEARTBEAT_SLACK_S
        if self.is_coordinator:
            self.rdv.heartbeat()
            display.display(
                f"lane_wait {self.lane}: {len(self.ranks)} ranks on {len(self.hosts)} nodes, poll every "
                f"{progress.fmt_duration(poll)}, stall after {progress.fmt_duration(self.cfg.stall_s)}, "
                f"budget {progress.fmt_duration(self.cfg.budget_s)}")
        verdict = None
        statuses: dict[int, dict] = {}
        try:
            while True:
                tick = int(time.time() // poll)
                mine = self.gather()
                self.report(tick, mine)
                if self.is_coordinator:
                    self.rdv.heartbeat()
                    statuses, _ = self.all_statuses(tick, first=tracker.polls == 0)
                    verdict = tracker.update(time.monotonic(), statuses)
                    display.display(verdict.line)
                    if verdict.done:
                        break
                else:
                    shared = self.rdv.get_verdict()
                    if shared:
                        return self.follow(shared, result)
                    age = self.rdv.heartbeat_age()
                    if (age is not None and age > beat_limit) or time.monotonic() > hard_stop:
                        result.update(failed=True, msg=(
                            f"The wait for lane {self.lane} lost its coordinator on {self.coordinator} "
                            f"(no news for {progress.fmt_duration(age)}); see that host's result."))
                        return result
                self._sleep_until((tick + 1) * poll)
        except Exception as exc:  # the coordinator must always leave a verdict for the others
            if self.is_coordinator:
                self.rdv.put_verdict({"status": "error", "summary": to_text(exc)})
            raise
        return self.conclude(verdict, statuses, tracker, result, started)

    @staticmethod
    def _sleep_until(when: float) -> None:
        delay = when - time.time()
        if delay > 0:
            time.sleep(delay)

    def conclude(self, verdict, statuses, tracker, result, started):
        hosts = self.rank_hosts
        if verdict.status == progress.READY:
            self.rdv.put_verdict({"status": "ready"})
            head = next((s for s in statuses.values() if s.get("role") == "head"), {})
            api = (head.get("probes") or {}).get("api") or {}
            elapsed = verdict.elapsed_s
            msg = (f"Lane {self.lane} is ready: {len(statuses)} ranks up, API {api.get('url', '?')} serves "
                   f"{(self.plan.get('api') or {}).get('served_model_name', '?')}"
                   + (f", first token in {api.get('ttft_s')} s" if api.get("ttft_s") is not None else "")
                   + (f"; it was already serving (up {progress.fmt_duration(elapsed)})." if verdict.already_serving else
                      f"; boot took {progress.fmt_duration(elapsed)} of a {progress.fmt_duration(self.cfg.budget_s)} budget."))
            result.update(changed=False, msg=msg, status="ready", boot_s=None if verdict.already_serving else elapsed,
                          already_serving=verdict.already_serving, api=api,
                          ranks=[statuses[k] for k in sorted(statuses)], history=tracker.history[-50:])
            display.display(msg)
            return result
        # Failed: write the bundle, with every worker fetching its own ranks' logs.
        reports_dir = self.args.get("reports_dir") or default_reports_dir(self.task_vars)
        bundle = Bundle(new_bundle_dir(reports_dir, self.lane))
        message = progress.failure_message(self.lane, verdict, hosts, bundle.root, poll_s=self.cfg.poll_s)
        verdict_dict = dict(verdict.to_dict(), bundle=bundle.root, waited_s=time.monotonic() - started)
        self.rdv.put_verdict(dict(verdict_dict, status="failed"))
        bundle.write_summary(self.lane, self.plan, verdict_dict, message, tracker.history)
        for host in self.hosts:
            report = self.rdv.get_host(host) or {}
            bundle.write_json(os.path.join("hosts", host, "meminfo.json"), report.get("meminfo") or {})
        self.contribute(bundle)
        deadline = time.monotonic() + self.args["bundle_timeout_s"]
        while time.monotonic() < deadline and not set(self.hosts) <= bundle.done_hosts():
            time.sleep(1.0)
        missing = sorted(set(self.hosts) - bundle.done_hosts())
        if missing:
            message += f"\nThe full logs of {', '.join(missing)} could not be copied into the bundle in time."
        result.update(failed=True, msg=message, status="failed", bundle=bundle.root,
                      culprits=verdict.culprits, signatures=[m.to_dict() for m in verdict.matches],
                      status_line=verdict.line, history=tracker.history[-50:],
                      ranks=[statuses[k] for k in sorted(statuses)])
        return result

    def follow(self, shared, result):
        """A non-coordinator's end: help write the bundle on failure, then finish quietly."""
        status = shared.get("status")
        if status == "failed" and shared.get("bundle"):
            self.contribute(Bundle(shared["bundle"]))
        result.update(changed=False, lane_status=status,
                      msg=f"Lane {self.lane}: {status}; the verdict is reported by {self.coordinator}.")
        return result

    def contribute(self, bundle: Bundle) -> None:
        """Put this host's ranks' tails, full logs, inspect and meminfo into the bundle."""
        notes = []
        for rank in self.my_ranks:
            status = self.watcher.last.get(rank["rank"]) or {}
            bundle.write_rank(rank["rank"], self.me, status, list(self.watcher.tails.get(rank["rank"], [])))
        try:
            tmpdir = self.action._make_tmp_path()
        except AnsibleError as exc:
            bundle.mark_done(self.me, f"could not create a remote temporary directory: {to_text(exc)}")
            return
        try:
            remote_dir = self.action._connection._shell.join_path(tmpdir, "bundle")
            res, error = self.run_module(self.module_args(bundle_dir=remote_dir))
            if res is None:
                notes.append(f"full logs not collected: {error}")
            else:
                files = list(res.get("bundle_files") or [])
                fetch = self.action._connection.fetch_file
                for rank in self.my_ranks:
                    try:
                        bundle.fetch_rank_files(rank["rank"], self.me, rank["container"], files, fetch)
                    except AnsibleError as exc:
                        notes.append(f"r{rank['rank']}: {to_text(exc)}")
                try:
                    bundle.fetch_host_files(self.me, files, fetch)
                except AnsibleError as exc:
                    notes.append(f"meminfo: {to_text(exc)}")
        finally:
            try:
                self.action._remove_tmp_path(tmpdir, force=True)
            except AnsibleError:
                pass
            bundle.mark_done(self.me, "; ".join(notes))
