# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Shape a bench run into the bring-up report's table: report.json and report.md.

Input: tool-eval-bench's result.json (quality, deployability, responsiveness, safety warnings,
the llama-benchy throughput grid), the gate's verdict and the provenance the playbook gathered.
The same document shape serves the shipped baselines (roles/bench/files/baselines/) and the compare.
"""
from __future__ import annotations

import re
from typing import Any

SCHEMA = "lanekit-bench-report/1"
_SCENARIO_RE = re.compile(r"\bTC-\d+\b")


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def safety_ids(warnings: Any) -> list[str]:
    """Scenario ids named by the tool's safety warnings (strings or objects), in order, once each."""
    found: list[str] = []
    for item in warnings or []:
        text = item if isinstance(item, str) else " ".join(str(v) for v in (item or {}).values()) \
            if isinstance(item, dict) else str(item)
        for sid in _SCENARIO_RE.findall(text):
            if sid not in found:
                found.append(sid)
    return found


def throughput_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (depth, concurrency): the mean of the tool's samples (runs)."""
    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for r in results or []:
        if not isinstance(r, dict) or r.get("depth") is None or r.get("concurrency") is None:
            continue
        groups.setdefault((int(r["depth"]), int(r["concurrency"])), []).append(r)
    rows = []
    for (depth, conc), items in sorted(groups.items()):
        row: dict[str, Any] = {"depth": depth, "concurrency": conc, "samples": len(items)}
        for key in ("pp_tps", "tg_tps", "ttft_ms"):
            vals = [v for v in (_num(i.get(key)) for i in items) if v is not None]
            row[key] = round(sum(vals) / len(vals), 2) if vals else None
        row["pp_tokens"] = items[0].get("pp_tokens")
        row["tg_tokens"] = items[0].get("tg_tokens")
        rows.append(row)
    return rows


def tool_summary(result: dict[str, Any] | None, rc: int | None, error: str = "") -> dict[str, Any]:
    """What the gate reads from the tool: rc, status, samples, failed (and why there is nothing)."""
    if not result:
        return {"rc": rc, "status": None, "samples": 0, "failed": 0,
                "error": error or f"tool-eval-bench wrote no result (exit code {rc}): see raw/tool-eval-bench.log."}
    tp = (result.get("scores") or {}).get("throughput") or {}
    return {"rc": rc, "status": result.get("status"), "samples": int(tp.get("samples") or 0),
            "failed": int(tp.get("failed") or 0), "error": error}


def build(result: dict[str, Any] | None, provenance: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """report.json: the table's figures, the verdict and the provenance."""
    result = result or {}
    scores = result.get("scores") or {}
    tp = scores.get("throughput") or {}
    median_ms = _num(scores.get("median_turn_ms"))
    return {
        "schema": SCHEMA,
        "lane": provenance.get("lane"),
        "valid": not problems,
        "problems": list(problems),
        "provenance": provenance,
        "quality": {"score": result.get("final_score"), "points": scores.get("total_points"),
                    "max_points": scores.get("max_points"), "rating": result.get("rating"),
                    "scenarios": result.get("total_scenarios")},
        "deployability": result.get("deployability", scores.get("deployability")),
        "responsiveness": {"score": result.get("responsiveness", scores.get("responsiveness")),
                           "median_turn_s": round(median_ms / 1000.0, 2) if median_ms is not None else None},
        "safety_warnings": safety_ids(result.get("safety_warnings")),
        "throughput": throughput_rows(tp.get("results") or []),
        "samples": int(tp.get("samples") or 0),
        "failed": int(tp.get("failed") or 0),
    }


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def metrics(report: dict[str, Any]) -> list[tuple[str, Any, bool]]:
    """(label, value, higher_is_better) rows of the table, in the bring-up report's order."""
    q = report.get("quality") or {}
    pts = f" ({q.get('points')}/{q.get('max_points')})" if q.get("points") is not None else ""
    rows: list[tuple[str, Any, bool]] = [
        ("Quality", f"{_fmt(q.get('score'))}/100{pts}" if q.get("score") is not None else None, True),
        ("Deployability", report.get("deployability"), True),
        ("Responsiveness (median turn, s)", (report.get("responsiveness") or {}).get("median_turn_s"), False),
        ("Safety warnings", ", ".join(report.get("safety_warnings") or []) or "none", False),
    ]
    for row in report.get("throughput") or []:
        pp = row.get("pp_tokens") or "?"
        tg = row.get("tg_tokens") or "?"
        where = f"@d{row['depth']} c{row['concurrency']}"
        rows.append((f"pp{pp} {where} (tok/s)", row.get("pp_tps"), True))
        rows.append((f"tg{tg} {where} (tok/s)", row.get("tg_tps"), True))
    return rows


def render_markdown(report: dict[str, Any]) -> str:
    """report.md: verdict, the table, then the provenance."""
    prov = report.get("provenance") or {}
    lines = [f"# Bench of lane {report.get('lane')}", ""]
    if report.get("valid"):
        lines.append("Verdict: **valid** (every rank up on the plan, no restart, the tools completed with no failed sample).")
    else:
        lines.append("Verdict: **INVALID, not a result** (kept as a record):")
        lines += [f"- {p}" for p in report.get("problems") or []]
    settings = prov.get("settings") or {}
    lines += ["", f"tool-eval-bench {(prov.get('tools') or {}).get('tool-eval-bench', '?')}, seed {settings.get('seed')}, "
              f"{'hard mode, ' if settings.get('hard_mode') else ''}suite {settings.get('suite')}, "
              f"concurrency {settings.get('concurrency')}, depths {settings.get('depths')}, "
              f"pp {settings.get('pp')}, tg {settings.get('tg')}, runs {settings.get('runs')}", "",
              "| Metric | Value |", "|---|---|"]
    for label, value, _unused in metrics(report):
        lines.append(f"| {label} | {_fmt(value)} |")
    lines += ["", "## Provenance", ""]
    for key in ("lane", "engine", "plan_hash", "image", "weights", "engine_version", "collection_version", "tools",
                "api", "started", "ended", "tokenizer_sha256", "corpus_sha256", "source"):
        if key in prov:
            value = prov[key]
            if isinstance(value, dict):
                value = ", ".join(f"{k} {v}" for k, v in value.items() if v not in (None, "", [], {})) or "-"
            lines.append(f"- {key}: {value}")
    return "\n".join(lines) + "\n"
