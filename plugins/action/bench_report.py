# Copyright: lanekit developers
# Apache-2.0
"""Close a bench run's validity gate and write its report: report.json, report.md, report.png.

One job: the verdict and the report of a run ``bench_run`` left in its run directory. The
"after" half of the gate compares every rank with the "before" snapshot (same container start,
same restart count, same plan hash), asks the API again and reads the tools' own status and
failed-sample count. A run with a problem keeps its files but is marked invalid, and the task
fails with the reasons (so the playbook's exit code says it). The chart is drawn by the bench
virtualenv's Python (matplotlib), with the comparison reports beside the run.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils._bench import _api as api
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _compare as cmp
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _gate as gate
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _report as report

display = Display()

ARGUMENT_SPEC = dict(
    plan=dict(type="dict", required=True),
    run_dir=dict(type="path", required=True),
    venv=dict(type="path", required=True),
    containers=dict(type="list", elements="dict", default=[]),
    unreachable=dict(type="list", elements="str", default=[]),
    api_address=dict(type="str"),
    api_key=dict(type="str", no_log=True),
    api_check=dict(type="dict"),
    manifest=dict(type="path"),
    compare_with=dict(type="list", elements="str", default=[]),
    reports_root=dict(type="path"),
    baselines_dir=dict(type="path"),
)


def manifest_provenance(path: str | None) -> dict:
    """The staged weights' MANIFEST.json: its sha256, model id and revision (or why unknown)."""
    if not path or not os.path.isfile(path):
        return {"manifest_sha256": None, "note": "no MANIFEST.json in the staged model directory"}
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        doc = json.loads(data)
    except ValueError:
        doc = {}
    doc = doc if isinstance(doc, dict) else {}
    return {"manifest_sha256": hashlib.sha256(data).hexdigest(), "manifest_revision": doc.get("revision"),
            "manifest_model_id": doc.get("model_id") or doc.get("repo_id")}


def provenance(plan: dict, record: dict, manifest: dict, engine_version: str) -> dict:
    image = plan.get("image") or {}
    weights = plan.get("weights") or {}
    return {
        "lane": plan.get("lane"), "engine": plan.get("engine"), "plan_hash": plan.get("plan_hash"),
        "image": {"ref": image.get("ref"), "base_ref": image.get("base_ref"), "base_digest": image.get("base_digest"),
                  "content_hash": image.get("content_hash"), "pinned": image.get("pinned")},
        "weights": {"model_id": weights.get("model_id"), "revision": weights.get("revision"),
                    "path": weights.get("path"), **manifest},
        "engine_version": engine_version,
        "collection_version": api.collection_version(os.path.dirname(__file__)),
        "tools": record.get("tools") or {},
        "settings": record.get("settings") or {},
        "api": {"url": record.get("api_url"), "served_model_name": (plan.get("api") or {}).get("served_model_name")},
        "started": record.get("started"), "ended": record.get("ended"),
        "tokenizer_sha256": record.get("tokenizer_sha256"), "corpus_sha256": record.get("corpus_sha256"),
    }


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        return self._report(args, result)

    def _report(self, args: dict, result: dict) -> dict:
        plan, run_dir = args["plan"], args["run_dir"]
        lane = plan.get("lane", "?")
        try:
            with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as fh:
                record = json.load(fh)
        except (OSError, ValueError):
            raise LanekitError(f"{run_dir}/run.json is missing or unreadable: the bench_run step did not finish; "
                               "run ansible-playbook lanekit.serving.bench_lane again.") from None
        tool_result = None
        json_file = os.path.join(run_dir, "raw", "tool-eval-bench.json")
        if os.path.isfile(json_file):
            with open(json_file, encoding="utf-8") as fh:
                tool_result = json.load(fh)
        model = (plan.get("api") or {}).get("served_model_name", "")
        # From a bench_host the role checks the API there (bench_exec mode=api) and hands the result in.
        api_after = args.get("api_check") or api.check_api(api.api_url(plan, args.get("api_address")), model,
                                                           args.get("api_key"))
        containers = list(args["containers"]) + [
            {"name": s.get("container_name"), "unreachable": True}
            for s in plan.get("ranks") or [] if s.get("host") in args["unreachable"]]
        after = gate.rank_snapshot(plan, containers)
        problems = gate.check_after(lane, record.get("before") or [], after, api_after, record.get("tool") or {})
        engine_version = ((tool_result or {}).get("metadata") or {}).get("engine_version") or "unknown"
        prov = provenance(plan, record, manifest_provenance(args.get("manifest")), engine_version)
        doc = report.build(tool_result, prov, problems)
        doc["gate"] = {"before": record.get("before"), "after": after}
        report_json = os.path.join(run_dir, "report.json")
        # Private as the run's other files (bench_run made the run directory 0700).
        atomic_write(report_json, json.dumps(doc, indent=2, sort_keys=True) + "\n", mode=0o600)

        others, notes = [], []
        for ref in args["compare_with"]:
            try:
                others.append(cmp.resolve(ref, args.get("reports_root") or "", args.get("baselines_dir") or ""))
            except ValueError as exc:
                notes.append(str(exc))
        series, chart_error = api.draw_chart(args["venv"], os.path.join(run_dir, "report.png"), [report_json, *others])
        md = report.render_markdown(doc)
        if others:
            docs = [doc]
            for path in others:
                with open(path, encoding="utf-8") as fh:
                    docs.append(json.load(fh))
            md += "\n## Compared\n\n" + cmp.render_markdown(cmp.compare(docs))
        md += "".join(f"\nNote: {n}\n" for n in notes + ([chart_error] if chart_error else []))
        atomic_write(os.path.join(run_dir, "report.md"), md, mode=0o600)
        for made in (os.path.join(run_dir, "report.png"), os.path.join(run_dir, ".mpl")):
            # The chart script writes with its umask; a link is never chmod-ed through.
            if os.path.exists(made) and not os.path.islink(made):
                os.chmod(made, 0o700 if os.path.isdir(made) else 0o600)

        for line in md.splitlines():
            if line.startswith("|") or line.startswith("Verdict") or line.startswith("- "):
                display.display(line)
        result.update(changed=True, valid=doc["valid"], problems=problems, run_dir=run_dir, report=report_json,
                      series=series, chart_error=chart_error)
        if problems:
            result.update(failed=True, msg=f"The bench run of lane {lane} is INVALID and is not a result (kept in "
                                           f"{run_dir}): " + " ".join(problems))
        else:
            result["msg"] = f"Bench of lane {lane}: valid; report in {run_dir}/report.md"
        return result
