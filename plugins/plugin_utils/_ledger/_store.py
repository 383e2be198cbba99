# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The ledger on the controller's disk: ``<lane reports dir>/ledger.jsonl`` and the plan of its last line.

One job: append a record so that a killed run leaves either the whole line or nothing a reader
takes, and read the ledger back. One append is one ``write`` of the whole line (newline
included) to a file opened ``O_APPEND`` (the kernel puts it at the end, whoever else appends),
then ``fsync``. A run killed inside that write can leave at most a torn last line, without its
newline: the reader ignores a last line that does not end in a newline or does not parse, and
the next append starts on a line of its own. A line that is not a record (not JSON, or a field of
the wrong type: ``_types.BadRecord``) is skipped with a warning naming the file and the line,
never fatal: one bad line must not stop every later render and watch. The plan of the last record is kept beside it
(``ledger-plan.json``, replaced atomically) so the next record can say which keys changed.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._record import LedgerRecord
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._types import BadRecord

LEDGER_FILE = "ledger.jsonl"
PLAN_FILE = "ledger-plan.json"
TIMELINE_DIR = "timeline"
FILE_MODE = 0o600


def ledger_path(reports_dir: str) -> str:
    return os.path.join(reports_dir, LEDGER_FILE)


def parse_lines(data: bytes) -> list[tuple[int, dict[str, Any] | None, str]]:
    """(line number, the line's document or None, why it is none) for each non-blank line of the file's bytes.

    A last line without its newline is a torn append (a killed run) and is not a record, even
    when it happens to parse. A line in the middle that does not parse is not one either.
    """
    lines = data.split(b"\n")
    out: list[tuple[int, dict[str, Any] | None, str]] = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        if number == len(lines):
            out.append((number, None, "a torn last line (a run killed while appending it)"))
            continue
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            out.append((number, None, "not a line of JSON"))
            continue
        if isinstance(doc, dict):
            out.append((number, doc, ""))
        else:
            out.append((number, None, f"a JSON {type(doc).__name__}, not a record (a mapping)"))
    return out


def parse(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """(the ledger's records as dicts, how many lines were skipped) from the file's bytes."""
    lines = parse_lines(data)
    return [doc for _n, doc, _why in lines if doc is not None], sum(1 for _n, doc, _why in lines if doc is None)


def load(reports_dir: str) -> tuple[list[LedgerRecord], list[str]]:
    """(the records, one warning per line left out) of a lane's ledger; an absent ledger is empty.

    Each warning names the file, the line and what is wrong with it (``epoch is 'yesterday' (text),
    not a number``), and says how to keep it: a bad line is never fatal.
    """
    path = ledger_path(reports_dir)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return [], []
    records: list[LedgerRecord] = []
    warnings: list[str] = []
    for number, doc, why in parse_lines(data):
        if doc is not None:
            try:
                records.append(LedgerRecord.from_dict(doc))
                continue
            except BadRecord as err:
                why = str(err)
        warnings.append(f"{path} line {number} was left out: {why}. Correct or delete that line to keep the "
                        "ledger whole; the other records are read as usual.")
    return records, warnings


def read(reports_dir: str) -> tuple[list[LedgerRecord], int]:
    """(the records, lines skipped) of a lane's ledger; an absent ledger is empty. :func:`load` says which."""
    records, warnings = load(reports_dir)
    return records, len(warnings)


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
    try:
        with open(path, "rb") as handle:
            docs, _skipped = parse(handle.read())
    except FileNotFoundError:
        docs = []
    # Numbered after every line that holds a number, a line the reader skips too: no two lines share one.
    record.boot = max((d["boot"] for d in docs if isinstance(d.get("boot"), int) and not isinstance(d["boot"], bool)),
                      default=0) + 1
    line = json.dumps(record.to_dict(), sort_keys=True, default=str, separators=(",", ":")) + "\n"
    data = (b"\n" if _needs_newline(path) else b"") + line.encode("utf-8")
    # O_NOFOLLOW: a link planted at the ledger's name is not appended through; fchmod: a ledger an older
    # lanekit wrote world-readable becomes the operator's own.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
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
