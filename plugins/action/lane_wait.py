# Copyright: lanekit developers
# Apache-2.0
"""Wait for a lane to boot, with one status line per poll; fail fast and keep the evidence.

One job: the boot wait (and, with ``mode: explain``, the explanation of a free error text by
the failure signatures). The per-rank table is ``lane_status``.

How the status of 8 nodes is gathered (design)
------------------------------------------------
The task runs on every node of the lane at once (not ``run_once``): each node's worker process
runs ``lanekit.serving.rank_status`` on its own node through Ansible's own connection for that
host (ssh on hardware, ``community.docker.docker`` on the simulated cluster), once per poll,
and asks only for the log lines written since the previous poll
(:mod:`~..plugin_utils._boot._lane_poll`). So no plugin code has to open connections to other hosts,
every node is polled in parallel, and a poll costs one small module run per node (about 0.3 s
of CPU each).

The workers meet in a private directory on the controller (:mod:`~..plugin_utils._boot._rendezvous`).
Polls are aligned on the wall clock (every ``poll_s``), each worker writes its ranks' parsed
status there, and one of them, the *coordinator* (the head's host), reads all of them, prints
the status line, and decides with :class:`~..plugin_utils._boot._tracker.LaneTracker`: waiting, ready,
or failed. Its verdict file ends the other workers' loops within one poll. On failure every
worker fetches its own ranks' full logs and ``docker inspect`` into the bundle
(:mod:`~..plugin_utils._boot._bundle`, in the plan's ``reports_dir``); the coordinator writes the
plan, the verdict and the status history, and fails the task with the explanation. The others
end ``ok`` (the role marks the task ``any_errors_fatal``, so the play stops on the
coordinator's failure).

A rank's exit is seen at the event, not at the next poll (``exit_watch``, on by default): the
time between two polls is spent inside the next ``rank_status`` call, which watches its ranks'
``docker events`` on the node until the poll's time or the first ``die``, then reads the status
(:mod:`~..module_utils._boot._events`); each watch replays from where the previous call ended,
so an exit between two calls is not lost. A node that saw an exit reports at once and leaves a
note in the rendezvous; the coordinator runs its own node's call in a thread and looks for such
notes every 0.1 s, so it judges the lane (and names the rank) within about a second of the exit
at any poll interval (:mod:`~..plugin_utils._boot._exitwatch` orders the exits). This keeps one
module run per node and poll over Ansible's own connection: a long-running module for the whole
wait would need a channel to stream partial results back, which Ansible's connection plugins do
not have, and a process of our own beside the connection (``ssh host docker events``) would have
to rebuild every connection plugin's command line (ssh options, become, the docker connection
of the simulated cluster).

The API probes (port, ``/health``, ``/v1/models``, one streamed chat completion) run from the
head node by default (``probe_from: head``): the head always reaches its own fabric address,
while the controller may sit on a management network. ``probe_from: controller`` probes from
the controller instead. SGLang worker health servers are probed by their own nodes.

Requirements: one fork per lane node (``forks`` >= nodes), all lane nodes in the same batch
(no ``serial``/``--limit`` that drops a node).
"""
from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _signatures as sigs
from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import parse_docker_time
from ansible_collections.lanekit.serving.plugins.plugin_utils import _become_files as becomefiles
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._bundle import Bundle, new_bundle_dir, secret_args
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._exitwatch import (
    exits_from_reports,
    first_exits,
    named_after,
    watch_seconds,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._lane_poll import (
    LaneMembers,
    LaneTaskError,
    LaneWorker,
    lane_members,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rankstatus import RankStatus
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rendezvous import Rendezvous
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._report import failure_message, fmt_duration
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._tracker import (
    READY,
    BootConfig,
    LaneTracker,
    Verdict,
)

display = Display()

ARGUMENT_SPEC = dict(
    plan=dict(type="dict"),
    mode=dict(type="str", default="wait", choices=["wait", "explain"]),
    budget_s=dict(type="float"),
    stall_s=dict(type="float"),
    poll_s=dict(type="float"),
    stability_s=dict(type="float"),
    chat_probe=dict(type="bool", default=True),
    exit_watch=dict(type="bool", default=True),
    chat_timeout_s=dict(type="float", default=120.0),
    probe_from=dict(type="str", default="head", choices=["head", "controller"]),
    probe_address=dict(type="str"),
    boot_since=dict(type="str"),
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
# A node's clock may run this far behind the controller's: a rank started right after the ranks phase
# began still counts as started by this run. No earlier run starts ranks this close (the lane lock).
BOOT_SINCE_SKEW_S = 2.0
# How often the coordinator looks for another node's exit while its own status call runs.
EXIT_LOOK_S = 0.1


def boot_since_epoch(value: str | None) -> float | None:
    """boot_since as epoch seconds: a UTC time ('2026-12-02T11:58:40.123456Z') or epoch seconds."""
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    epoch = parse_docker_time(text)
    if epoch is None:
        raise LaneTaskError(f"lane_wait's boot_since {text!r} is not a time: give a UTC time such as "
                            "2026-12-02T11:58:40.123456Z (the deploy passes when its ranks phase began) or leave it unset.")
    return epoch


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


def sync_timeout(args: dict, poll_s: float) -> float:
    """How long the coordinator waits each poll for the others: 0.8 x poll, 3 to 30 s."""
    return args.get("sync_timeout_s") or min(max(poll_s * 0.8, 3.0), 30.0)


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    EXPECTED_ERRORS = (LaneTaskError,)

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        if args["mode"] == "explain":
            return self._explain(args, result)
        return self._wait(args, task_vars, result)

    # --- explain: match a free text (e.g. a docker start error) ------------------------------

    def _explain(self, args: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        matches, msg = explain_message(args.get("text") or "", args.get("engine"), args.get("context") or "")
        result.update(signatures=[m.to_dict() for m in matches], msg=msg, changed=False)
        if args.get("fail"):
            result["failed"] = True
        return result

    # --- wait ------------------------------------------------------------------------------

    def _wait(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        plan = args.get("plan") or {}
        members = lane_members(plan, task_vars, "lane_wait", engine=args.get("engine"))
        if not plan.get("ranks"):
            raise LaneTaskError(f"lane_wait has no ranks for lane {members.lane}: pass the plan published by the "
                                "preflight role (plan: \"{{ lanekit_plan }}\").")
        reports_dir = args.get("reports_dir") or plan.get("reports_dir")
        if not reports_dir:
            raise LaneTaskError(f"The plan of lane {members.lane} names no reports_dir for failure bundles; re-plan "
                                "the lane with this collection's preflight role or pass reports_dir.")
        me = task_vars.get("inventory_hostname")
        if me not in members.hosts:
            result.update(skipped=True, msg=f"No rank of lane {members.lane} runs on {me}.")
            return result
        if self._play_context.check_mode:
            result.update(skipped=True, msg="Check mode: nothing was started, so there is nothing to wait for.")
            return result
        cfg = BootConfig.from_plan(
            plan, budget_s=args.get("budget_s"), stall_s=args.get("stall_s"), poll_s=args.get("poll_s"),
            stability_s=args.get("stability_s"), chat_probe=args["chat_probe"])
        cfg.poll_s = max(1.0, cfg.poll_s)
        rdv = Rendezvous(Rendezvous.default_root(self._task._uuid))
        waiter = Waiter(self, args, task_vars, plan, members, cfg, rdv, reports_dir)
        # The lane's key for every probe, and its secrets to redact (never in this task's arguments).
        waiter.secret_args = secret_args(self._templar.template, task_vars, plan)
        return waiter.wait(result)


class Waiter(LaneWorker):
    """One worker's part of a lane wait (see the module docstring for the design)."""

    def __init__(self, action: Any, args: dict, task_vars: dict, plan: dict, members: LaneMembers,
                 cfg: BootConfig, rdv: Rendezvous, reports_dir: str) -> None:
        super().__init__(action, task_vars, plan, members, rdv, tail_lines=args["tail_lines"],
                         probe_from=args["probe_from"], probe_address=args.get("probe_address"),
                         chat_probe=args["chat_probe"], chat_timeout_s=args["chat_timeout_s"],
                         sync_timeout_s=sync_timeout(args, cfg.poll_s))
        self.cfg = cfg
        self.reports_dir = reports_dir
        self.bundle_timeout_s = args["bundle_timeout_s"]
        self.exit_watch = bool(args["exit_watch"])
        self.boot_since = boot_since_epoch(args.get("boot_since"))
        self.exit_seen: dict[str, Any] | None = None
        self.judged_at: float | None = None  # when the line that ended the wait was printed

    def wait(self, result: dict[str, Any]) -> dict[str, Any]:
        poll = self.cfg.poll_s
        tracker = LaneTracker(self.lane, self.engine, self.cfg, self.rank_hosts)
        started = time.monotonic()
        hard_stop = started + self.cfg.budget_s + self.cfg.stall_s + 600.0
        beat_limit = 3 * poll + self.chat_timeout_s + HEARTBEAT_SLACK_S
        if self.is_coordinator:
            self.rdv.heartbeat()
            display.display(
                f"lane_wait {self.lane}: {len(self.members.ranks)} ranks on {len(self.members.hosts)} nodes, poll "
                f"every {fmt_duration(poll)}, stall after {fmt_duration(self.cfg.stall_s)}, "
                f"budget {fmt_duration(self.cfg.budget_s)}"
                + (", exits watched at the event" if self.exit_watch else ""))
        verdict = None
        statuses: dict[int, RankStatus] = {}
        deadline: float | None = None  # the next poll; the first one is now
        try:
            while True:
                watch_s = 0.0
                if deadline is not None:
                    if self.exit_watch:
                        watch_s = watch_seconds(time.time(), deadline, self.call_overhead_s)
                    if not watch_s:
                        self._sleep_until(deadline)
                early = None
                if self.is_coordinator and watch_s:
                    mine, early = self._gather_judging(watch_s, tracker, poll)
                else:
                    mine = self.gather(watch_s)
                tick = int(time.time() // poll)
                self.report(tick, mine)
                if self.is_coordinator:
                    self.rdv.heartbeat()
                    if early is not None:
                        verdict, statuses = early
                        break
                    statuses, reports = self.all_statuses(tick, first=tracker.polls == 0)
                    verdict = self._judge(tracker, statuses, reports)
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
                            f"(no news for {fmt_duration(age)}); see that host's result."))
                        return result
                deadline = (tick + 1) * poll
        except Exception as exc:  # the coordinator must always leave a verdict for the others
            if self.is_coordinator:
                self.rdv.put_verdict({"status": "error", "summary": to_text(exc)})
            raise
        return self.conclude(verdict, statuses, tracker, result, started)

    def _judge(self, tracker: LaneTracker, statuses: dict[int, RankStatus], reports: dict[str, dict]) -> Verdict:
        """One look at the lane: the tracker's verdict, printed; a failure the nodes saw at the
        event carries the exit that came first and how long after it the line named it."""
        verdict = tracker.update(time.monotonic(), statuses)
        display.display(verdict.line)
        if verdict.done:
            self.judged_at = time.time()
        if verdict.done and verdict.status != READY:
            rank_of = {r["container_name"]: int(r["node_rank"]) for r in self.members.ranks}
            exits = first_exits(exits_from_reports(reports, rank_of))
            if exits:
                self.exit_seen = dict(exits[0].to_dict(), named_at=time.time(),
                                      named_after_s=round(named_after(exits[0], time.time()), 3))
                verdict.noticed_after_s = self.exit_seen["named_after_s"]
        return verdict

    def _gather_judging(self, watch_s: float, tracker: LaneTracker,
                        poll: float) -> tuple[dict[int, RankStatus], tuple[Verdict, dict[int, RankStatus]] | None]:
        """The coordinator's own status call (watching its node for exits) in a thread, while this
        thread judges the lane as soon as another node reports an exit, not at the next poll.

        Returns this host's statuses and, when an exit ended the wait meanwhile, (verdict,
        statuses). The call always ends before this returns: the connection is used by one
        thread at a time (the failure bundle uses it next)."""
        box: dict[str, Any] = {}

        def own_call() -> None:
            try:
                box["statuses"] = self.gather(watch_s)
            except Exception as exc:  # re-raised below, in the task's own thread
                box["error"] = exc

        seen = {host: note.get("time") for host, note in self.rdv.exits().items()}
        thread = threading.Thread(target=own_call, name="lane_wait-own-node", daemon=True)
        thread.start()
        early = None
        while thread.is_alive():
            thread.join(EXIT_LOOK_S)
            if early is not None:
                continue
            notes = self.rdv.exits()
            fresh = [h for h, note in notes.items() if h != self.me and note.get("time") != seen.get(h)]
            if not fresh:
                continue
            seen.update({h: notes[h].get("time") for h in fresh})
            statuses, reports = self.all_statuses(int(time.time() // poll), timeout_s=0.0)
            verdict = self._judge(tracker, statuses, reports)
            if verdict.done:
                early = (verdict, statuses)
        if "error" in box:
            raise box["error"]
        return box["statuses"], early

    @staticmethod
    def _sleep_until(when: float) -> None:
        delay = when - time.time()
        if delay > 0:
            time.sleep(delay)

    def started_by_this_run(self, statuses: dict[int, RankStatus]) -> list[int]:
        """The ranks whose container started after boot_since (with the nodes' clock skew allowed)."""
        if self.boot_since is None:
            return []
        return sorted(r for r, s in statuses.items()
                      if s.started_at is not None and s.started_at >= self.boot_since - BOOT_SINCE_SKEW_S)

    def conclude(self, verdict: Verdict, statuses: dict[int, RankStatus], tracker: LaneTracker, result: dict,
                 started: float) -> dict:
        ranks = [statuses[k].to_dict() for k in sorted(statuses)]
        # When the last poll was read (controller clock): places each rank's boot on the deploy's
        # clock in the ledger's timeline (the ranks' ages are from that poll).
        result["ended_at"] = time.time()
        if verdict.status == READY:
            self.rdv.put_verdict({"status": "ready"})
            head = next((s for s in statuses.values() if s.is_head), None)
            api = (head.probes.get("api") if head else None) or {}
            elapsed = verdict.elapsed_s
            # Healthy at the first poll is not "already serving" when this run started a rank: on a
            # loaded controller the ranks phase can outlast a fast boot (the ledger then lost boot_s).
            if verdict.already_serving and self.started_by_this_run(statuses):
                verdict.already_serving = False
            msg = (f"Lane {self.lane} is ready: {len(statuses)} ranks up, API {api.get('url', '?')} serves "
                   f"{(self.plan.get('api') or {}).get('served_model_name', '?')}"
                   + (f", first token in {api.get('ttft_s')} s" if api.get("ttft_s") is not None else "")
                   + (f"; it was already serving (up {fmt_duration(elapsed)})." if verdict.already_serving else
                      f"; boot took {fmt_duration(elapsed)} of a {fmt_duration(self.cfg.budget_s)} budget."))
            result.update(changed=False, msg=msg, status="ready", boot_s=None if verdict.already_serving else elapsed,
                          already_serving=verdict.already_serving, api=api, ranks=ranks,
                          history=tracker.history[-50:])
            display.display(msg)
            return result
        # Failed: write the bundle, with every worker fetching its own ranks' logs.
        bundle = Bundle(new_bundle_dir(self.reports_dir), self.secret_values())
        message = failure_message(self.lane, verdict, self.rank_hosts, bundle.root, poll_s=self.cfg.poll_s)
        verdict_dict = dict(verdict.to_dict(), bundle=bundle.root, waited_s=time.monotonic() - started,
                            exit_seen=self.exit_seen, judged_at=self.judged_at)
        self.rdv.put_verdict(dict(verdict_dict, status="failed"))
        bundle.write_summary(self.plan, verdict_dict, message, tracker.history)
        for host in self.members.hosts:
            report = self.rdv.get_host(host) or {}
            bundle.write_json(os.path.join("hosts", host, "meminfo.json"), report.get("meminfo") or {})
        self.contribute(bundle)
        deadline = time.monotonic() + self.bundle_timeout_s
        while time.monotonic() < deadline and not set(self.members.hosts) <= bundle.done_hosts():
            time.sleep(1.0)
        missing = sorted(set(self.members.hosts) - bundle.done_hosts())
        if missing:
            message += f"\nThe full logs of {', '.join(missing)} could not be copied into the bundle in time."
        result.update(failed=True, msg=message, status="failed", bundle=bundle.root, exit_seen=self.exit_seen,
                      culprits=verdict.culprits, signatures=[m.to_dict() for m in verdict.matches],
                      status_line=verdict.line, history=tracker.history[-50:], ranks=ranks)
        return result

    def secret_values(self) -> list[str]:
        return [self.secret_args.get("api_key") or "", *(self.secret_args.get("secret_values") or [])]

    def follow(self, shared: dict, result: dict) -> dict:
        """A non-coordinator's end: help write the bundle on failure, then finish quietly."""
        status = shared.get("status")
        if status == "failed" and shared.get("bundle"):
            self.contribute(Bundle(shared["bundle"], self.secret_values()))
        result.update(changed=False, lane_status=status,
                      msg=f"Lane {self.lane}: {status}; the verdict is reported by {self.coordinator}.")
        return result

    def contribute(self, bundle: Bundle) -> None:
        """Put this host's ranks' tails, full logs, inspect and meminfo into the bundle."""
        me = str(self.me)  # a worker that waits is a host of the lane (_wait skips the others)
        notes = []
        for spec in self.my_ranks:
            rank = int(spec["node_rank"])
            last = self.watcher.last.get(rank)
            bundle.write_rank(rank, me, last.to_dict() if last else {},
                              list(self.watcher.tails.get(rank, [])))
        # A root-private directory on the node, read back through file_chunk: over SSH as an operator
        # who becomes root, the login user can neither keep it private nor read root's 0600 files.
        remote_dir = f"{becomefiles.REMOTE_BUNDLE_ROOT}/{self.lane}-{uuid.uuid4().hex[:12]}"
        task_vars = self.task_vars

        def fetch(remote: str, local: str) -> None:
            becomefiles.fetch(self.action, task_vars, remote, local)

        try:
            res, error = self.run_module(self.module_args(bundle_dir=remote_dir))
            if res is None:
                notes.append(f"full logs not collected: {error}")
            else:
                files = list(res.get("bundle_files") or [])
                for spec in self.my_ranks:
                    try:
                        bundle.fetch_rank_files(int(spec["node_rank"]), me, spec["container_name"], files, fetch)
                    except AnsibleError as exc:
                        notes.append(f"r{spec['node_rank']}: {to_text(exc)}")
                try:
                    bundle.fetch_host_files(me, files, fetch)
                except AnsibleError as exc:
                    notes.append(f"meminfo: {to_text(exc)}")
        finally:
            try:
                becomefiles.remove(self.action, task_vars, remote_dir)
            except AnsibleError as exc:
                notes.append(f"the node's copy {remote_dir} was not removed: {to_text(exc)}")
            bundle.mark_done(me, "; ".join(notes))
