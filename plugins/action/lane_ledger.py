# Copyright: lanekit developers
# Apache-2.0
"""Append one record to a lane's ledger (``reports/<lane>/ledger.jsonl``), or print the ledger.

One job: the ledger on the controller. ``mode: append`` builds the record of a deploy (ready,
already serving, or failed: the registered results of the ready phase, or the failed task's),
a teardown or a bench run (``_ledger._record``), appends it as one line (``_ledger._store``) and
draws its timeline PNG when a Python with matplotlib is at hand. ``mode: show`` prints the table
(Boot / When / Event / Result / Cause / What changed) as text, Markdown or JSON and draws the PNGs
that are missing. Runs on the controller only (``run_once``).
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import write_output
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _charts as charts
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _record as rec
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _store as store
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _table as table

display = Display()

ARGUMENT_SPEC = dict(
    mode=dict(type="str", default="show", choices=["append", "show"]),
    plan=dict(type="dict"),
    reports_dir=dict(type="path"),
    event=dict(type="str", choices=list(rec.EVENTS)),
    outcome=dict(type="str"),
    results=dict(type="list", elements="raw", default=[]),
    failed=dict(type="list", elements="raw", default=[]),
    failed_task=dict(type="str", default=""),
    serving=dict(type="bool", default=False),
    marks=dict(type="dict", default={}),
    bench_report=dict(type="path"),
    note=dict(type="str", default=""),
    charts=dict(type="bool", default=True),
    python=dict(type="str", default=""),
    ledger_format=dict(type="str", default="text", choices=list(table.FORMATS)),
    ledger_file=dict(type="path"),
    last=dict(type="int", default=0),
)


def reports_dir_of(args: dict[str, Any]) -> str:
    plan = args.get("plan") or {}
    where = args.get("reports_dir") or plan.get("reports_dir")
    if not where:
        raise LanekitError("lane_ledger needs the lane's plan (plan: \"{{ lanekit_plan }}\", published by the preflight "
                           "role) or reports_dir: neither was given, so there is no ledger to read or write.")
    return str(where)


def read_json(path: str | None) -> dict[str, Any] | None:
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def build(args: dict[str, Any], previous: dict[str, Any] | None, now: float) -> rec.LedgerRecord:
    """The record the task's arguments describe."""
    plan, event = args["plan"], args.get("event")
    failed = [f for f in args["failed"] if isinstance(f, dict) and f]
    if event == "deploy":
        wait = rec.pick_wait_result(args["results"])
        failure = rec.pick_wait_result(failed) or (failed[0] if failed else None)
        reports = plan.get("reports_dir")
        fabric = read_json(os.path.join(str(reports), "fabric.json")) if reports else None
        return rec.deploy_record(plan, previous, now, marks=args["marks"], wait=wait,
                                 failed_task=args["failed_task"], failed=failure, serving=args["serving"],
                                 fabric=fabric)
    if event == "bench":
        report = read_json(args.get("bench_report"))
        summary = rec.bench_summary(report)
        outcome = args.get("outcome") or ("valid" if summary and summary["valid"] else "invalid")
        cause = rec.Cause(title="; ".join(summary["problems"])[:300]) if summary and summary["problems"] else None
        return rec.new_record("bench", outcome, plan, previous, now, bench=summary, cause=cause, note=args["note"],
                              bundle=os.path.dirname(args.get("bench_report") or ""))
    if event == "teardown":
        return rec.new_record("teardown", args.get("outcome") or "stopped", plan, previous, now, note=args["note"])
    raise LanekitError(f"lane_ledger mode=append needs event: one of {', '.join(e for e in rec.EVENTS if e != 'watch')} "
                       f"(the watch appends its own records with lanekit.serving.lane_watch), got {event!r}.")


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        reports_dir = reports_dir_of(args)
        if args["mode"] == "append":
            return self._append(args, reports_dir, result)
        return self._show(args, reports_dir, result)

    def _append(self, args: dict[str, Any], reports_dir: str, result: dict[str, Any]) -> dict[str, Any]:
        if not args.get("plan"):
            raise LanekitError("lane_ledger mode=append needs the lane's plan (plan: \"{{ lanekit_plan }}\").")
        if self._play_context.check_mode:
            result.update(skipped=True, msg="Check mode: nothing ran, so the ledger gets no record.")
            return result
        record = store.append(reports_dir, build(args, store.previous_plan(reports_dir), time.time()), args["plan"])
        line = table.render_text([record])[-1]
        display.display(f"ledger {store.ledger_path(reports_dir)}: {line}")
        pngs: list[str] = []
        problem = ""
        if args["charts"] and record.event == "deploy" and record.outcome != "serving":
            records, _warnings = store.load(reports_dir)  # the show names the lines left out
            pngs, problem = charts.draw_ledger(reports_dir, records, args["python"], only_missing=False,
                                               boots=records[-1:])
        # The record is the controller's log of the run, not a change of the lane (as Ansible's own log is
        # not): the phases that changed the lane say so themselves, and a re-run reports changed=0.
        result.update(changed=False, record=record.to_dict(), ledger=store.ledger_path(reports_dir), pngs=pngs,
                      chart_note=problem, msg=f"Ledger record {record.boot}: {record.event} {record.outcome}.")
        return result

    def _show(self, args: dict[str, Any], reports_dir: str, result: dict[str, Any]) -> dict[str, Any]:
        records, warnings = store.load(reports_dir)
        for warning in warnings:
            display.warning(warning)
        lane = (args.get("plan") or {}).get("lane") or os.path.basename(reports_dir.rstrip("/"))
        shown = records[-args["last"]:] if args["last"] > 0 else records
        lines = table.render(shown, args["ledger_format"], lane)
        if args.get("ledger_file"):
            # A directory, or a path under a file, is one sentence naming the option, never an OS traceback.
            example = {"text": "ledger.txt", "md": "ledger.md", "json": "ledger.json"}[args["ledger_format"]]
            write_output(args["ledger_file"], "\n".join(lines) + "\n", f"ledger_file {args['ledger_file']}",
                         mode=0o600, example=example)
        else:
            for line in lines:
                display.display(line)
        skipped = len(warnings)
        notes = [f"{skipped} line(s) of {store.ledger_path(reports_dir)} did not read (a torn last line from a "
                 "killed run is one) and were left out; the warnings name them."] if skipped else []
        pngs: list[str] = []
        if args["charts"] and records:
            pngs, problem = charts.draw_ledger(reports_dir, records, args["python"])
            notes += [problem] if problem else []
        for note in notes:
            display.display(f"Note: {note}")
        if not records:
            notes.append(f"The ledger {store.ledger_path(reports_dir)} has no record yet: deploy the lane with "
                         "ansible-playbook lanekit.serving.deploy_lane first.")
        result.update(changed=False, records=[r.to_dict() for r in shown], ledger=store.ledger_path(reports_dir),
                      pngs=pngs, skipped=skipped, ledger_warnings=warnings, notes=notes,
                      msg=f"Ledger of lane {lane}: {len(records)} records" + (f"; {notes[-1]}" if notes else "."))
        return result
