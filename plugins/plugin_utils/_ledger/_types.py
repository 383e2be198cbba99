# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The types of a ledger line, field by field, and the checks that hold a record to them.

One job: say what each field of a ledger record (and of its cause, probe, bench and ranks) may hold,
and check a document against it: ``record_problems`` for a line read back (the reader skips a line
with problems, naming them, instead of every later render and watch failing on it) and
``typed_part`` for what a node returned, before it is recorded (a value of the wrong type is left
out and named). Pure: no I/O.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard


class BadRecord(ValueError):
    """A ledger line that is not a record of the ledger's types; ``str()`` says which field holds what."""


def is_number(value: Any) -> TypeGuard[float]:
    """A real, finite number: not a bool (JSON's true is no count), not a numeric string."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# A field's check and the words for what it must hold.
Check = tuple[Callable[[Any], bool], str]
NUMBER: Check = (is_number, "a number")
INTEGER: Check = (is_int, "a whole number")
TEXT: Check = (lambda v: isinstance(v, str), "text")
FLAG: Check = (lambda v: isinstance(v, bool), "true or false")
MAPPING: Check = (lambda v: isinstance(v, Mapping), "a mapping")
LIST: Check = (lambda v: isinstance(v, list), "a list")
TEXTS: Check = (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of text")
INTEGERS: Check = (lambda v: isinstance(v, list) and all(is_int(x) for x in v), "a list of whole numbers")
TEXT_MAP: Check = (lambda v: isinstance(v, Mapping) and all(isinstance(x, str) for x in v.values()),
                   "a mapping of text")
NUMBER_MAP: Check = (lambda v: isinstance(v, Mapping) and all(is_number(x) for x in v.values()),
                     "a mapping of numbers")

# The type of each field of a record (null, or a missing key, is always allowed: the field's default).
RECORD_TYPES: dict[str, Check] = {
    "event": TEXT, "outcome": TEXT, "lane": TEXT, "time": TEXT, "epoch": NUMBER, "boot": INTEGER,
    "version": INTEGER, "engine": TEXT, "plan_hash": TEXT, "changed_keys": TEXTS, "changes": TEXTS,
    "images": TEXT_MAP, "weights": MAPPING, "fabric": MAPPING, "phases": NUMBER_MAP, "ranks": LIST,
    "boot_s": NUMBER, "cause": MAPPING, "bench": MAPPING, "probe": MAPPING, "note": TEXT, "bundle": TEXT,
}
RANK_TYPES: dict[str, Check] = {
    "rank": INTEGER, "host": TEXT, "state": TEXT, "exit_code": INTEGER, "milestones": NUMBER_MAP, "end_s": NUMBER,
    "started_before_end_s": NUMBER, "failed": FLAG, "start_s": NUMBER,
}
CAUSE_TYPES: dict[str, Check] = {"signature": TEXT, "title": TEXT, "evidence": TEXT, "fix": TEXT, "ranks": INTEGERS}
# The keys of ``probe`` and ``bench`` that the table, the floors and the charts read; other keys are kept as they are.
PROBE_TYPES: dict[str, Check] = {
    "ok": FLAG, "ttft_s": NUMBER, "tps": NUMBER, "tokens": INTEGER, "total_s": NUMBER, "deadline_s": NUMBER,
    "error": TEXT, "url": TEXT, "progress": TEXT, "last_token_s": NUMBER, "max_tokens": INTEGER,
    "engine_tokens_before": NUMBER, "engine_tokens_after": NUMBER,
}
BENCH_TYPES: dict[str, Check] = {
    "valid": FLAG, "tg_tps": NUMBER, "pp_tps": NUMBER, "ttft_ms": NUMBER, "depth": NUMBER, "concurrency": NUMBER,
    "problems": TEXTS,
}
NESTED_TYPES = {"cause": CAUSE_TYPES, "bench": BENCH_TYPES, "probe": PROBE_TYPES}


def shown(value: Any) -> str:
    """'yesterday' (text), [1, 2] (a list): what a field holds, short."""
    if isinstance(value, str):
        text, kind = repr(value), "text"
    else:
        text = json.dumps(value, default=str)
        kind = ("true/false" if isinstance(value, bool) else "a list" if isinstance(value, list) else
                "a mapping" if isinstance(value, Mapping) else "a number" if isinstance(value, (int, float)) else
                type(value).__name__)
    return f"{text[:40]}{'…' if len(text) > 40 else ''} ({kind})"


def type_problems(data: Mapping[str, Any], types: Mapping[str, Check], where: str = "") -> list[str]:
    """"epoch is 'yesterday' (text), not a number" for each field of ``data`` that is not of its type."""
    out = []
    for key, (check, want) in types.items():
        value = data.get(key)
        if value is not None and not check(value):
            out.append(f"{where}{key} is {shown(value)}, not {want}")
    return out


def record_problems(data: Any) -> list[str]:
    """Why a ledger line's document is not a record: each field, nested ones too, that is not of its type."""
    if not isinstance(data, Mapping):
        return [f"the line holds {shown(data)}, not a record (a mapping)"]
    problems = type_problems(data, RECORD_TYPES)
    for name, types in NESTED_TYPES.items():
        if isinstance(data.get(name), Mapping):
            problems += type_problems(data[name], types, f"{name}.")
    ranks = data.get("ranks")
    for i, rank in enumerate(ranks if isinstance(ranks, list) else []):
        if not isinstance(rank, Mapping) or rank.get("rank") is None:
            problems.append(f"ranks[{i}] is {shown(rank)}, not a rank (a mapping with its rank)")
        else:
            problems += type_problems(rank, RANK_TYPES, f"ranks[{i}].")
    return problems


def typed_part(part: Any, types: Mapping[str, Check], name: str) -> tuple[dict[str, Any] | None, list[str]]:
    """(``part`` with each value of the wrong type left out, what was left out), for what a node returned."""
    if part is None:
        return None, []
    if not isinstance(part, Mapping):
        return None, [f"{name} is {shown(part)}, not a mapping"]
    problems = type_problems(part, types, f"{name}.")
    clean = {str(k): None if k in types and v is not None and not types[k][0](v) else v for k, v in part.items()}
    # JSON-safe now, so that the line reads back as it was written.
    return json.loads(json.dumps(clean, default=str)), problems
