# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Compare bench reports (runs, lanes, baselines) side by side: the bring-up report's
multi-column table with each column's difference from the first in percent.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any

from ansible_collections.lanekit.serving.plugins.plugin_utils._bench._report import SCHEMA, metrics

_LEADING_NUMBER = re.compile(r"^\s*(-?[\d,]*\.?\d+)")


def number(value: Any) -> float | None:
    """The figure in a table cell: numbers as they are, "91/100 (174/192)" as 91."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        m = _LEADING_NUMBER.match(value)
        if m:
            return float(m.group(1).replace(",", ""))
    return None


def delta_pct(ref: Any, value: Any) -> float | None:
    """(value - ref) / ref in percent, None when either is not a number or ref is 0."""
    a, b = number(ref), number(value)
    if a is None or b is None or a == 0:
        return None
    return round((b - a) / abs(a) * 100.0, 1)


def check_report(doc: Any, source: str) -> dict[str, Any]:
    """A report or baseline document, or one sentence saying why it is not one."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"{source} is not a lanekit bench report (report.json or a baseline with "
                         f"schema: {SCHEMA}).")
    return doc


def label_of(doc: dict[str, Any]) -> str:
    prov = doc.get("provenance") or {}
    when = prov.get("started") or ""
    kind = "baseline" if prov.get("source") else (when[:16] if when else "run")
    return f"{doc.get('lane')} ({kind})"


def compare(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """{columns, rows[{metric, values, deltas, higher_is_better}]}; deltas against column 0."""
    columns = [label_of(d) for d in docs]
    table: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for i, doc in enumerate(docs):
        for label, value, better in metrics(doc):
            if label not in table:
                table[label] = {"metric": label, "values": [None] * len(docs), "higher_is_better": better}
                order.append(label)
            table[label]["values"][i] = value
    rows = []
    for label in order:
        row = table[label]
        ref = row["values"][0]
        row["deltas"] = [None] + [delta_pct(ref, v) for v in row["values"][1:]]
        rows.append(row)
    return {"columns": columns, "valid": [bool(d.get("valid", True)) for d in docs], "rows": rows}


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def render_markdown(result: dict[str, Any]) -> str:
    """The side-by-side table; every column after the first shows its difference in percent."""
    cols = result["columns"]
    head = "| Metric | " + " | ".join(
        c + ("" if ok else " (INVALID)") for c, ok in zip(cols, result["valid"], strict=True)) + " |"
    lines = [head, "|---" * (len(cols) + 1) + "|"]
    for row in result["rows"]:
        cells = [_cell(row["values"][0])]
        for value, delta in zip(row["values"][1:], row["deltas"][1:], strict=True):
            cells.append(_cell(value) + (f" ({delta:+.1f}%)" if delta is not None else ""))
        lines.append(f"| {row['metric']} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Differences are against {cols[0]}; for responsiveness (seconds) lower is better.")
    return "\n".join(lines) + "\n"


def resolve(ref: str, reports_root: str, baselines_dir: str) -> str:
    """The report.json a reference names: a file, a run directory, ``baseline:<lane>`` (the
    shipped baseline) or a lane name (its latest valid run under <reports_root>/<lane>/bench/)."""
    ref = str(ref).strip()
    if ref.startswith("baseline:"):
        path = os.path.join(baselines_dir, ref.split(":", 1)[1] + ".json")
        if not os.path.isfile(path):
            known = sorted(f[:-5] for f in os.listdir(baselines_dir) if f.endswith(".json")) \
                if os.path.isdir(baselines_dir) else []
            raise ValueError(f"No baseline {ref}: {path} does not exist (baselines: {', '.join(known) or 'none'}).")
        return path
    if os.path.isfile(ref):
        return ref
    if os.path.isdir(ref):
        path = os.path.join(ref, "report.json")
        if not os.path.isfile(path):
            raise ValueError(f"{ref} holds no report.json: name a bench run directory (reports/<lane>/bench/<time>).")
        return path
    runs = os.path.join(reports_root, ref, "bench")
    candidates = sorted(os.listdir(runs), reverse=True) if os.path.isdir(runs) else []
    for name in candidates:
        path = os.path.join(runs, name, "report.json")
        try:
            with open(path, encoding="utf-8") as fh:
                if json.load(fh).get("valid"):
                    return path
        except (OSError, ValueError, AttributeError):
            continue
    raise ValueError(f"{ref!r} is neither a report file, a run directory, baseline:<lane>, nor a lane with a valid "
                     f"bench run under {runs}: run ansible-playbook lanekit.serving.bench_lane -i <inventory> -e lane={ref} first.")
