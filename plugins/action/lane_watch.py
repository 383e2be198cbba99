# Copyright: lanekit developers
# Apache-2.0
"""The watch of a serving lane: probe it with real streamed completions, decide, and keep the ledger.

One job: the watch's steps on the controller (``run_once``), each a ``mode``:

- ``probe``: up to ``probes`` streamed completions, ``gap_s`` apart, each with a deadline; the
  first one that passes the floors (first token, tokens/s: ``_ledger._watch.floors`` from the
  lane's own ready probe and bench in the ledger) makes the lane healthy. Probes that miss the
  floors while tokens still come, or while the engine's generated-token counter (read by the probe
  from ``/metrics``) rises by more than their own, make it slow, not wedged
  (``_ledger._watch.verdict``): its ``progress`` goes to ``decide`` in the returned ``probe``.
- ``decide``: from the probe, the signatures in the rank logs (``rank_status`` results of every
  node) and the restarts the ledger holds: healthy, slow (reported, never restarted), restart, or
  report (a cause a restart cannot fix, a back-off, a spent budget). The decision goes into the
  ledger (a repeated report once).
- ``verify``: after the restart, probe again: healed (tokens come again), or the restart did not help.
- ``record``: a restart whose boot failed (the ready phase's result), into the ledger.

The playbook (``watch_lane.yml``) does the restart itself with the teardown, ranks and ready
roles, in the engine's order, holding the lane lock.
"""
from __future__ import annotations

import time
from typing import Any

from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _probe as head_probe
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _record as rec
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _store as store
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _watch as watch

display = Display()

ARGUMENT_SPEC = dict(
    mode=dict(type="str", required=True, choices=["probe", "decide", "verify", "record"]),
    plan=dict(type="dict", required=True),
    probes=dict(type="int", default=2),
    gap_s=dict(type="float", default=10.0),
    deadline_s=dict(type="float", default=60.0),
    max_tokens=dict(type="int", default=16),
    api_address=dict(type="str"),
    api_key=dict(type="str", no_log=True),
    ttft_max_s=dict(type="float"),
    tps_min=dict(type="float"),
    probe=dict(type="dict", default={}),
    nodes=dict(type="list", elements="raw", default=[]),
    # decide: each lane host's rank_status result by host name (an unreachable host's result says so)
    node_results=dict(type="dict", default={}),
    max_restarts=dict(type="int", default=3),
    window_s=dict(type="float", default=21600.0),
    backoff_s=dict(type="float", default=300.0),
    restarted_at=dict(type="float"),
    failed=dict(type="dict", default={}),
)


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        plan = args["plan"]
        reports_dir = plan.get("reports_dir")
        if not reports_dir or not plan.get("api"):
            raise LanekitError("lane_watch needs the lane's plan with its api and reports_dir (plan: \"{{ lanekit_plan "
                               "}}\", published by the preflight role): re-plan the lane with this collection.")
        if self._play_context.check_mode:
            result.update(skipped=True, msg="Check mode: the watch neither probes nor restarts.")
            return result
        # A bad ledger line is skipped with a warning naming it: the watch still runs on the others.
        records, warnings = store.load(reports_dir)
        for warning in warnings:
            display.warning(warning)
        result["ledger_warnings"] = warnings
        if args["mode"] in ("probe", "verify"):
            return self._probe(args, plan, records, result, task_vars)
        if args["mode"] == "decide":
            return self._decide(args, plan, records, result)
        return self._record(args, plan, result)

    def _probe(self, args: dict[str, Any], plan: dict, records: list, result: dict[str, Any],
               task_vars: dict[str, Any]) -> dict[str, Any]:
        floor = watch.floors(records, ttft_max_s=args.get("ttft_max_s"), tps_min=args.get("tps_min"))
        # The probe runs on the lane's head (the task is delegated there): the key goes to the head inside
        # the Ansible connection, and from the head only to a port its rank container holds (issue 38).
        head = head_probe.head_of(plan, self._task.delegate_to, task_vars.get("inventory_hostname"))
        margs = head_probe.probe_args(plan, args.get("api_address"), args["deadline_s"], args["max_tokens"],
                                      args.get("api_key"))
        tried: list[dict[str, Any]] = []
        healthy, reason = False, ""
        for attempt in range(max(1, args["probes"])):
            if attempt:
                time.sleep(max(0.0, args["gap_s"]))
            probe = head_probe.on_head(self, task_vars, head, margs)
            healthy, reason = watch.judge(probe, floor)
            probe["healthy"], probe["reason"] = healthy, reason
            tried.append(probe)
            slow = not healthy and watch.stream_progress(probe)
            # A probe that got no token may still show the engine generating for others (its counter rose).
            busy = not healthy and not slow and watch.engine_progress([probe])
            display.display(f"watch {plan.get('lane')}: probe {attempt + 1}/{args['probes']} "
                            + ("healthy" if healthy else f"slow, tokens still come: {reason}" if slow else
                               f"slow, {busy}: {reason}" if busy else f"failed: {reason}")
                            + (f" (first token {probe['ttft_s']} s" if probe["ttft_s"] is not None else "")
                            + (f", {probe['tps']} tok/s)" if probe["tps"] is not None else
                               (")" if probe["ttft_s"] is not None else "")))
            if healthy:
                break
        found = watch.verdict(tried, floor)
        # decide reads the run's progress from the probe it is given (the playbook passes the last one).
        tried[-1]["progress"] = found.progress
        result.update(changed=False, healthy=healthy, reason=reason, probes=tried, floors=floor.__dict__,
                      probe=tried[-1], verdict=found.state, progress=found.progress)
        if args["mode"] == "verify":
            return self._verified(args, plan, found.state != "wedged", reason, tried[-1], result)
        result["msg"] = f"Lane {plan.get('lane')}: " + {
            "healthy": "healthy.",
            "slow": f"slow but making progress ({found.progress}; {reason}): not wedged.",
            "wedged": f"wedged ({reason}).",
        }[found.state]
        return result

    def _decide(self, args: dict[str, Any], plan: dict, records: list, result: dict[str, Any]) -> dict[str, Any]:
        probe = args["probe"]
        healthy = bool(probe.get("healthy"))
        budget = watch.Budget(args["max_restarts"], args["window_s"], args["backoff_s"])
        now = time.time()
        state = watch.budget_state(watch.restart_times(records), now, budget)
        found = [] if healthy else watch.signatures_of(args["nodes"], plan.get("engine"))
        # The probe mode says the run's progress; a probe without the key (an older caller) speaks for itself.
        progress = probe.get("progress") if "progress" in probe else watch.stream_progress(probe)
        # The watch heals only what a deploy put there, on nodes it reaches (issue 37).
        not_here = "" if healthy else watch.not_deployed_here(plan, args["node_results"], probe)
        decision = watch.decide(healthy, found, state, progress if isinstance(progress, str) else "", not_here)
        record = None
        # A restart is recorded once it happened (its result: healed or restart-failed), never when decided.
        if decision.outcome != "restarted" and watch.worth_recording(records, decision.outcome):
            first = (watch.unfixable(found) or found)[:1]
            cause = rec.cause_of({"signatures": first} if first else {"msg": str(probe.get("reason") or "wedged")})
            # Only a back-off or a spent budget waits for a restart; a slow lane is not restarted at all.
            next_at = state.next_at if decision.outcome in ("backing-off", "gave-up") else None
            note = decision.reason + (f"; next restart allowed at {rec.iso(next_at)}" if next_at else "")
            record = store.append(plan["reports_dir"], rec.new_record(
                "watch", decision.outcome, plan, store.previous_plan(plan["reports_dir"]), now,
                probe=_probe_summary(probe), cause=cause, note=note), plan)
        message = {
            "healthy": f"Lane {plan.get('lane')} serves: a streamed completion passed the floors.",
            "slow": f"Lane {plan.get('lane')} is slow ({probe.get('reason')}) and not restarted: {decision.reason}.",
            "restarted": f"Lane {plan.get('lane')} is wedged ({probe.get('reason')}): restarting it in the engine's "
                         f"order ({decision.reason}).",
            "not-restartable": f"Lane {plan.get('lane')} does not serve and a restart cannot fix it: {decision.reason}. "
                               "Left for a person.",
            "backing-off": f"Lane {plan.get('lane')} is wedged ({probe.get('reason')}) and waits before its next "
                           f"restart: {decision.reason}.",
            "gave-up": f"Lane {plan.get('lane')} is wedged ({probe.get('reason')}) and the restart budget is spent "
                       f"({decision.reason}): left for a person"
                       + (f"; the next restart is allowed at {rec.iso(state.next_at)}." if state.next_at else "."),
        }[decision.outcome]
        display.display(message)
        result.update(changed=record is not None, outcome=decision.outcome, restart=decision.restart,
                      reason=decision.reason, signatures=found, budget=state.__dict__,
                      record=record.to_dict() if record else None, restarted_at=now, msg=message)
        return result

    def _verified(self, args: dict[str, Any], plan: dict, healthy: bool, reason: str, probe: dict,
                  result: dict[str, Any]) -> dict[str, Any]:
        now = time.time()
        took = now - args["restarted_at"] if args.get("restarted_at") else None
        outcome = "healed" if healthy else "restart-failed"
        cause = None if healthy else rec.Cause(title=f"still wedged after the restart: {reason}")
        record = store.append(plan["reports_dir"], rec.new_record(
            "watch", outcome, plan, store.previous_plan(plan["reports_dir"]), now, probe=_probe_summary(probe),
            cause=cause, boot_s=round(took, 1) if took is not None else None), plan)
        result.update(changed=True, outcome=outcome, record=record.to_dict(),
                      msg=(f"Lane {plan.get('lane')} healed by the restart" if healthy else
                           f"Lane {plan.get('lane')} still does not serve after the restart ({reason})")
                      + (f" ({took:.0f} s)." if took is not None else "."))
        return result

    def _record(self, args: dict[str, Any], plan: dict, result: dict[str, Any]) -> dict[str, Any]:
        # The ready phase's coordinator holds the boot's verdict; another failed task only its message.
        failed = dict(rec.pick_wait_result(args["nodes"]) or args["failed"])
        record = store.append(plan["reports_dir"], rec.new_record(
            "watch", "restart-failed", plan, store.previous_plan(plan["reports_dir"]), time.time(),
            cause=rec.cause_of(failed, "the restart's boot"), bundle=str(failed.get("bundle") or ""),
            ranks=rec.rank_boots(failed.get("ranks") or [], failed.get("culprits") or [])), plan)
        result.update(changed=True, outcome="restart-failed", record=record.to_dict(),
                      msg=f"Lane {plan.get('lane')}: the restart's boot failed; see the ledger record {record.boot}.")
        return result


def _probe_summary(probe: dict[str, Any]) -> dict[str, Any]:
    # The engine's counter and the last token's time too: a record says why the lane was judged slow or wedged.
    return {k: probe.get(k) for k in ("ok", "ttft_s", "last_token_s", "tps", "tokens", "total_s", "deadline_s",
                                      "max_tokens", "engine_tokens_before", "engine_tokens_after", "error", "url",
                                      "progress")}
