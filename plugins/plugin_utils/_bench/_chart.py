# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Draw report.png: prefill and decode tokens/s against context depth, one line per
concurrency, one column per report (the run first, comparison lanes or baselines beside).

Run as a script with the bench virtualenv's Python (matplotlib lives there, not in the
controller's venv):  python _chart.py OUT.png REPORT.json [REPORT.json ...]
Standard library plus matplotlib only. The series drawn are written into the PNG's text chunk
``lanekit-series`` (JSON), so a test can check them without image analysis.
"""
from __future__ import annotations

import json
import sys
from typing import Any


def series(report: dict[str, Any]) -> dict[int, list[tuple[int, float | None, float | None]]]:
    """{concurrency: [(depth, pp_tps, tg_tps), ...]} of one report, depths ascending."""
    out: dict[int, list[tuple[int, float | None, float | None]]] = {}
    for row in report.get("throughput") or []:
        out.setdefault(int(row["concurrency"]), []).append((int(row["depth"]), row.get("pp_tps"), row.get("tg_tps")))
    return {c: sorted(v) for c, v in sorted(out.items())}


def column_title(report: dict[str, Any]) -> str:
    prov = report.get("provenance") or {}
    kind = "baseline" if prov.get("source") else ("run" if report.get("valid", True) else "INVALID run")
    return f"{report.get('lane')}\n({kind})"


def draw(out_png: str, reports: list[dict[str, Any]]) -> list[str]:
    """Write the chart; returns the series labels ("<lane> [col] pp c1", ...)."""
    # matplotlib lives in the bench virtualenv; mypy.ini ignores its missing stubs.
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    ncol = max(1, len(reports))
    fig, axes = plt.subplots(2, ncol, figsize=(4.2 * ncol + 1, 6.5), sharey="row", squeeze=False)
    labels: list[str] = []
    for col, report in enumerate(reports):
        for row, (metric, idx) in enumerate((("pp", 1), ("tg", 2))):
            ax = axes[row][col]
            for conc, points in series(report).items():
                xs = [p[0] for p in points if p[idx] is not None]
                ys = [p[idx] for p in points if p[idx] is not None]
                label = f"{report.get('lane')} [{col}] {metric} c{conc}"
                ax.plot(xs, ys, marker="o", label=f"c{conc}")
                labels.append(label)
            ax.set_xlabel("context depth (tokens)")
            ax.set_ylabel(f"{'prefill' if metric == 'pp' else 'decode'} tokens/s")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
            if row == 0:
                ax.set_title(column_title(report), fontsize=9)
    fig.suptitle("lanekit bench: prefill (top) and decode (bottom) throughput vs depth", fontsize=10)
    fig.tight_layout()
    fig.savefig(out_png, dpi=90, metadata={"lanekit-series": json.dumps(labels)})
    plt.close(fig)
    return labels


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: _chart.py OUT.png REPORT.json [REPORT.json ...]\n")
        return 2
    reports = []
    for path in argv[1:]:
        with open(path, encoding="utf-8") as fh:
            reports.append(json.load(fh))
    sys.stdout.write(json.dumps({"png": argv[0], "series": draw(argv[0], reports)}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
