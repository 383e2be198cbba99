# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Write the ledger's PNGs beside it: ``timeline/boot-NNNN.png`` per deploy and ``timeline/history.png``.

One job: find a Python with matplotlib and run ``_draw.py`` with it on the data ``_timeline``
computed. matplotlib is not a controller requirement: the bench virtualenv has it (a checkout's
``.venv-bench``, or the one the bench made under ``~/.cache/lanekit``), or name one with
``python``. Without one the charts are skipped with a sentence saying how to get them; the
ledger itself never depends on them.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import tempfile
from collections.abc import Sequence

from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _timeline as timeline
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._record import LedgerRecord
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._store import TIMELINE_DIR

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_draw.py")
NO_PYTHON = ("no Python with matplotlib was found for the timeline PNGs (the bench virtualenv has one: run "
             "ansible-playbook lanekit.serving.bench_lane once, or pass -e ledger_python=PATH)")


def candidates(explicit: str = "") -> list[str]:
    """Pythons to try, best first: the one named, a checkout's .venv-bench, the bench's cached venvs."""
    if explicit:
        return [explicit]
    checkout = os.path.abspath(os.path.join(os.path.dirname(SCRIPT), "..", "..", "..", ".venv-bench", "bin", "python"))
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    cached = sorted(glob.glob(os.path.join(cache, "lanekit", "bench-venv*", "bin", "python")), key=os.path.getmtime,
                    reverse=True)
    return [p for p in [checkout, *cached] if os.path.exists(p)]


def find_python(explicit: str = "") -> str:
    """The first candidate that imports matplotlib, '' when none does."""
    for python in candidates(explicit):
        try:
            proc = subprocess.run([python, "-c", "import matplotlib"], capture_output=True, timeout=60,  # noqa: S603
                                  check=False, env={"PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"})
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0:
            return python
    return ""


def draw(python: str, out_png: str, chart: dict) -> str:
    """Draw one chart; '' on success, else the sentence saying why not."""
    folder = os.path.dirname(out_png)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=folder, delete=False, encoding="utf-8") as handle:
        json.dump(chart, handle)
        data = handle.name
    try:
        proc = subprocess.run([python, SCRIPT, out_png, data], capture_output=True, text=True, timeout=300,  # noqa: S603
                              check=False, env={"PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", "HOME": folder,
                                                "MPLCONFIGDIR": os.path.join(folder, ".mpl")})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the chart {out_png} was not drawn ({exc})"
    finally:
        os.unlink(data)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"the chart {out_png} was not drawn ({tail[0][:300]})"
    return ""


def boot_png(reports_dir: str, boot: int) -> str:
    return os.path.join(reports_dir, TIMELINE_DIR, f"boot-{boot:04d}.png")


def history_png(reports_dir: str) -> str:
    return os.path.join(reports_dir, TIMELINE_DIR, "history.png")


def draw_ledger(reports_dir: str, records: Sequence[LedgerRecord], python: str = "",
                only_missing: bool = True, boots: Sequence[LedgerRecord] | None = None) -> tuple[list[str], str]:
    """(PNGs written, why some were not): a boot chart for each deploy record of ``boots`` (every record
    when None), and the history chart over every record: a deploy that draws only its own boot chart
    still passes the whole ledger, or its history would show that one deploy."""
    if not records:
        return [], ""
    found = find_python(python)
    if not found:
        return [], NO_PYTHON
    written, problems = [], []
    for record in records if boots is None else boots:
        if record.event != "deploy" or record.outcome == "serving":
            continue
        out = boot_png(reports_dir, record.boot)
        if only_missing and os.path.exists(out):
            continue
        problem = draw(found, out, timeline.boot_chart(record))
        (problems.append(problem) if problem else written.append(out))
    out = history_png(reports_dir)
    problem = draw(found, out, timeline.history_chart(records))
    (problems.append(problem) if problem else written.append(out))
    return written, "; ".join(problems)
