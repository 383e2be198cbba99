# Copyright: lanekit developers
# Apache-2.0
"""Compare bench runs, lanes and baselines side by side: compare.md, compare.json, compare.png.

One job: the comparison. Each reference is a report.json, a run directory, a lane name (its
latest valid run) or ``baseline:<lane>`` (the shipped baseline); the table shows every column's
difference from the first in percent, and the chart draws them beside each other.
"""
from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

from ansible.utils.display import Display

from ansible_collections.lanekit.serving.plugins.module_utils._bench._api import draw_chart
from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.plugin_utils._action import LanekitAction
from ansible_collections.lanekit.serving.plugins.plugin_utils._bench import _compare as cmp
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import reports_root

display = Display()

ARGUMENT_SPEC = dict(
    compare=dict(type="list", elements="str", required=True),
    # Default: lanekit_reports_dir's rule (reports/ beside a checkout's playbooks, else in the working
    # directory), never inside an installed collection.
    reports_root=dict(type="path"),
    baselines_dir=dict(type="path", required=True),
    out_dir=dict(type="path"),
    venv=dict(type="path"),
)


class ActionModule(LanekitAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def lanekit_run(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        if not args.get("reports_root"):
            args["reports_root"] = reports_root(None, (task_vars or {}).get("playbook_dir"), os.getcwd())
        refs = [r for r in args["compare"] if str(r).strip()]
        if len(refs) < 2:
            result.update(failed=True, msg="bench compare needs two or more runs, lanes or baselines: pass e.g. "
                                           "-e compare=mistral-large4-nvfp4-8x-vllm,baseline:mistral-large4-nvfp4-8x-vllm.")
            return result
        paths, docs = [], []
        try:
            for ref in refs:
                path = cmp.resolve(ref, args["reports_root"], args["baselines_dir"])
                with open(path, encoding="utf-8") as fh:
                    try:
                        doc = json.load(fh)
                    except ValueError:
                        raise ValueError(f"{path} is not valid JSON.") from None
                docs.append(cmp.check_report(doc, path))
                paths.append(path)
        except ValueError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        table = cmp.compare(docs)
        md = "# Bench comparison\n\n" + "".join(f"- {c}: {p}\n" for c, p in zip(table["columns"], paths, strict=True)) + "\n"
        md += cmp.render_markdown(table)
        out_dir = args.get("out_dir") or os.path.join(
            args["reports_root"], "compare", datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"))
        os.makedirs(out_dir, mode=0o755, exist_ok=True)
        atomic_write(os.path.join(out_dir, "compare.json"),
                     json.dumps({"sources": paths, **table}, indent=2, sort_keys=True) + "\n")
        series: list[Any] = []
        chart_error = ""
        if args.get("venv"):
            series, chart_error = draw_chart(args["venv"], os.path.join(out_dir, "compare.png"), paths)
            if chart_error:
                md += f"\nNote: {chart_error}\n"
        atomic_write(os.path.join(out_dir, "compare.md"), md)
        for line in cmp.render_markdown(table).splitlines():
            display.display(line)
        result.update(changed=True, out_dir=out_dir, table=table, series=series, chart_error=chart_error,
                      msg=f"Comparison of {len(paths)} bench reports written to {out_dir}")
        return result
