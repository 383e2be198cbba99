# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The ledger as a person reads it: Boot / When / Event / Result / Cause / What changed.

One job: words and tables, as the bring-up report's hand-kept ledger had them (text for the
terminal, Markdown for a report, JSON for a program), and the one line the status prints.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._report import fmt_duration
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._record import LedgerRecord
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._types import is_number

HEADER = ("Boot", "When", "Event", "Result", "Cause", "What changed")
FORMATS = ("text", "md", "json")
# Text cells longer than this are cut (the Markdown and the JSON keep them whole).
TEXT_WIDTH = 60
# In the text table each value of a change is cut to this, so that a long value (an error line put
# in an env var) does not hide what it became: "env X: AttributeError: 'Fu… -> unset".
TEXT_VALUE_WIDTH = 24
_RANK_PREFIX = re.compile(r"^ranks? [\d, -]+ ")


def result_cell(record: LedgerRecord) -> str:
    """'ready in 4m12s', 'failed (r3)', 'healthy, first token 0.21 s', 'valid, 24.8 tok/s'."""
    # Figures are shown only when they are numbers: a record built in memory is not type-checked as a read one is.
    text = record.outcome
    if is_number(record.boot_s) and record.outcome in ("ready", "healed"):
        text += f" in {fmt_duration(record.boot_s)}"
    if record.cause and record.cause.ranks:
        text += " (" + ",".join(f"r{r}" for r in record.cause.ranks) + ")"
    probe = record.probe if isinstance(record.probe, dict) else {}
    if is_number(probe.get("ttft_s")):
        text += f", first token {probe['ttft_s']:.2f} s"
    if is_number(probe.get("tps")):
        text += f", {probe['tps']:.1f} tok/s"
    bench = record.bench if isinstance(record.bench, dict) else {}
    if is_number(bench.get("tg_tps")):
        text += f", {bench['tg_tps']} tok/s decode"
    return text


def cause_cell(record: LedgerRecord) -> str:
    """The signature and its title ('kv_budget_refused: KV budget refused'), else the note, else '-'."""
    cause = record.cause
    if cause and cause.signature:
        return f"{cause.signature}: {cause.title}"
    if cause and cause.title:
        return cause.title
    return record.note or "-"


def _short_values(line: str, width: int) -> str:
    """'env X: <old> -> <new>' with each value cut to ``width`` (a line without ' -> ' as it is)."""
    key, sep, change = line.partition(": ")
    old, arrow, new = change.partition(" -> ")
    if not sep or not arrow:
        return line
    return f"{key}: {_cut(old, width)} -> {_cut(new, width)}"


def changed_cell(record: LedgerRecord, value_width: int = 0) -> str:
    """The plan diff's lines without their rank prefix ('argv --max-num-seqs: 128 -> 64'), '-' for none;
    with ``value_width``, each line's old and new values cut to it."""
    if not record.changes and not record.changed_keys:
        return "-"
    if record.changes == ["no previous plan in the ledger"]:
        return "first plan in the ledger"
    lines = []
    for line in record.changes or record.changed_keys:
        short = _RANK_PREFIX.sub("", line)
        if value_width:
            short = _short_values(short, value_width)
        if short not in lines:
            lines.append(short)
    text = "; ".join(lines[:2])
    return text + (f" (+{len(lines) - 2} more)" if len(lines) > 2 else "")


def rows(records: Sequence[LedgerRecord], value_width: int = 0) -> list[tuple[str, ...]]:
    return [(str(r.boot), r.time.replace("T", " ").rstrip("Z"), r.event, result_cell(r), cause_cell(r),
             changed_cell(r, value_width)) for r in records]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def render_text(records: Sequence[LedgerRecord], lane: str = "") -> list[str]:
    table = [HEADER] + [tuple(_cut(c, TEXT_WIDTH) for c in row) for row in rows(records, TEXT_VALUE_WIDTH)]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
    out = [f"ledger of lane {lane}: {len(records)} records"] if lane else []
    out += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in table]
    return out


def render_md(records: Sequence[LedgerRecord], lane: str = "") -> list[str]:
    out = [f"## Ledger of lane {lane}", ""] if lane else []
    out.append("| " + " | ".join(HEADER) + " |")
    out.append("|" + "---|" * len(HEADER))
    for record, row in zip(records, rows(records), strict=True):
        cells = list(row)
        if record.cause and record.cause.fix:
            cells[4] += f" — fix: {record.cause.fix}"
        out.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return out


def render(records: Sequence[LedgerRecord], fmt: str, lane: str = "") -> list[str]:
    """The ledger in ``fmt`` (text, md or json), as lines."""
    if fmt == "json":
        return json.dumps([r.to_dict() for r in records], indent=2, sort_keys=True).splitlines()
    if fmt == "md":
        return render_md(records, lane)
    if fmt == "text":
        return render_text(records, lane)
    raise ValueError(f"ledger_format must be one of {', '.join(FORMATS)}, got {fmt!r}")


def status_line(records: Sequence[LedgerRecord], ledger: str, timeline: str = "") -> str:
    """What the status prints under its table: the last record and where the ledger and its timeline are."""
    if not records:
        return ""
    last = records[-1]
    text = (f"ledger {ledger}: {len(records)} records, last #{last.boot} {last.event} {result_cell(last)} "
            f"at {last.time}")
    return text + (f"; timeline {timeline}" if timeline else "")
