# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The ledger on the controller's disk: ``<lane reports dir>/ledger.jsonl`` and the plan of its last line.

One job: append a record so that a killed run leaves either the whole line or nothing a reader
takes, and read the ledger back. One append is one ``write`` of the whole line (newline
included) to a file opened ``O_APPEND`` (the kernel puts it at the end, whoever else appends),
then ``fsync``. A run killed inside that write can leave at most a torn last line, without its
newline: the reader ignores a last line that does not end in a newline or does not parse, and
the next append starts on a line of its own. The plan of the last record is kept beside it
(``ledger-plan.json``, replaced atomically) so the next record can say which keys changed.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._record import LedgerRecord

LEDGER_FILE = "ledger.jsonl"
PLAN_FILE = "ledger-plan.json"
TIMELINE_DIR = "timeline"
FILE_MODE = 0o600


def ledger_path(reports_dir: str) -> str:
    return os.path.join(reports_dir, LEDGER_FILE)


def parse(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """(the ledger's records as dicts, how many lines were skipped) from the file's bytes.

    A last line without its newline is a torn append (a killed run) and is not a record, even
    when it happens to parse. A line in the middle that does not parse is skipped and counted.
    """
    lines = data.split(b"\n")
    complete, torn = lines[:-1], lines[-1]
    records, skipped = [], (1 if torn.strip() else 0)
    for raw in complete:
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            skipped += 1
            continue
        if isinstance(doc, dict):
            records.append(doc)
        else:
            skipped += 1
    return records, skipped


def read(reports_dir: str) -> tuple[list[LedgerRecord], int]:
    """(the records, lines skipped) of a lane's ledger; an absent ledger is empty."""
    try:
        with open(ledger_path(reports_dir), "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return [], 0
    docs, skipped = parse(data)
    return [LedgerRecord.from_dict(d) for d in docs], skipped


def _needs_newline(path: str) -> bool:
    """Whether the file ends in a torn line (no newline): the next record must start a line of its own."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return False
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) != b"\n"
    except FileNotFoundError:
        return False


def append(reports_dir: str, record: LedgerRecord, plan: Mapping[str, Any] | None = None) -> LedgerRecord:
    """Number the record after the ledger's last one, append it as one line, and keep ``plan`` for the next diff."""
    os.makedirs(reports_dir, mode=0o700, exist_ok=True)
    path = ledger_path(reports_dir)
    records, _skipped = read(reports_dir)
    record.boot = (max((r.boot for r in records), default=0) + 1)
    line = json.dumps(record.to_dict(), sort_keys=True, default=str, separators=(",", ":")) + "\n"
    data = (b"\n" if _needs_newline(path) else b"") + line.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        written = os.write(fd, data)
        if written != len(data):  # a full disk: say so rather than leave half a line unnoticed
            raise OSError(f"only {written} of {len(data)} bytes of the ledger line reached {path}")
        os.fsync(fd)
    finally:
        os.close(fd)
    if plan and plan.get("plan_hash"):
        atomic_write(os.path.join(reports_dir, PLAN_FILE), json.dumps(plan, sort_keys=True, default=str),
                     mode=FILE_MODE)
    return record


def previous_plan(reports_dir: str) -> dict[str, Any] | None:
    """The plan of the ledger's last record (None: no record kept one, or it does not read)."""
    try:
        with open(os.path.join(reports_dir, PLAN_FILE), encoding="utf-8") as handle:
            doc = json.load(handle)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
