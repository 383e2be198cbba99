# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Draw a ledger chart (a boot's timeline, or the ledger's history) from the data ``_timeline`` computed.

Run as a script with a Python that has matplotlib (the bench virtualenv's, as for the bench
chart): ``python _draw.py OUT.png CHART.json``. Standard library plus matplotlib only; nothing
is decided here. The rows (or points) drawn are written into the PNG's text chunk
``lanekit-chart`` (JSON), so a test can check them without image analysis.
"""
from __future__ import annotations

import json
import sys
from typing import Any


def _boot(ax: Any, chart: dict[str, Any]) -> list[str]:
    rows = chart["rows"]
    drawn = []
    for y, row in enumerate(rows):
        for segment in row["bars"]:
            width = max(segment["end"] - segment["start"], 0.3)
            ax.barh(y, width, left=segment["start"], height=0.6, color=chart["colors"].get(segment["phase"], "#999999"),
                    edgecolor="white", linewidth=0.5)
        if row.get("failed_at") is not None:
            ax.plot([row["failed_at"]], [y], marker="X", markersize=12, color="#d62728", zorder=5)
        if row.get("stopped_at") is not None:
            ax.plot([row["stopped_at"]], [y], marker="x", markersize=8, color="#555555", zorder=5)
        drawn.append(row["label"])
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["label"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the deploy's first phase")
    ax.grid(True, axis="x", alpha=0.3)
    from matplotlib.lines import Line2D  # pylint: disable=import-outside-toplevel
    from matplotlib.patches import Patch  # pylint: disable=import-outside-toplevel

    handles: list[Any] = [Patch(color=chart["colors"][p], label=p.replace("_", " ")) for p in chart["legend"]]
    if any(r.get("failed_at") is not None for r in rows):
        handles.append(Line2D([], [], marker="X", linestyle="", color="#d62728", markersize=9, label="failed here"))
    if any(r.get("stopped_at") is not None for r in rows):
        handles.append(Line2D([], [], marker="x", linestyle="", color="#555555", markersize=7, label="exited with it"))
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return drawn


def _history(ax: Any, chart: dict[str, Any]) -> list[str]:
    points = chart["points"]
    xs = [p["boot"] for p in points]
    ys = [p["duration_s"] if p["duration_s"] is not None else 0.0 for p in points]
    bars = ax.bar(xs, ys, color=[p["color"] for p in points], width=0.7)
    for rect, p in zip(bars, points, strict=True):
        if p.get("before_boot"):
            rect.set_hatch("//")  # not a boot: the phases of a deploy that failed before any rank booted
    for p, y in zip(points, ys, strict=True):
        text = p["outcome"] + (" (before boot)" if p.get("before_boot") else "")
        text += f"\n{p['label']}" if p["label"] else ""
        ax.annotate(text, (p["boot"], y), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
    ax.set_xlabel("ledger record")
    ax.set_ylabel("boot duration (s)")
    ax.set_xticks(xs)
    ax.margins(y=0.15)  # room for the labels above the tallest bar
    ax.grid(True, axis="y", alpha=0.3)
    return [f"{p['boot']} {p['outcome']}" for p in points]


def draw(out_png: str, chart: dict[str, Any]) -> list[str]:
    """Write the chart; returns the labels drawn (rows or points)."""
    # matplotlib lives in the bench virtualenv; mypy.ini ignores its missing stubs.
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    if chart.get("kind") == "boot":
        fig, ax = plt.subplots(figsize=(10, 1.2 + 0.45 * max(1, len(chart["rows"]))))
        drawn = _boot(ax, chart)
    else:
        fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(chart["points"]) + 3), 4))
        drawn = _history(ax, chart)
    ax.set_title(chart.get("title", ""), fontsize=9)
    fig.tight_layout()
    fig.savefig(out_png, dpi=90, metadata={"lanekit-chart": json.dumps(drawn)})
    plt.close(fig)
    return drawn


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: _draw.py OUT.png CHART.json\n")
        return 2
    with open(argv[1], encoding="utf-8") as fh:
        chart = json.load(fh)
    sys.stdout.write(json.dumps({"png": argv[0], "drawn": draw(argv[0], chart)}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
