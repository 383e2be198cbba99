# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Every rank's log in one stream: merged in time order, filtered, engine noise folded.

One job: turn per-rank ``docker logs --timestamps`` lines (live, or an archived ``full.log``)
into the lines ``lanekit.serving.logs_lane`` prints, each prefixed with its time, rank and host. Folding
keeps the signal readable: consecutive progress-bar updates of one rank become their last
update with a count, and a line a rank repeats becomes its first occurrence with a count.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import split_timestamp
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import ascii_digits, whole_number

_SINCE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
# tqdm bars ("Loading safetensors checkpoint shards:  50% Completed | 32/64 [...]", "xx%|###|").
_PROGRESS = re.compile(r"\d{1,3}%\s*(?:Completed\s*)?\|.*?\d+/\d+|\d+/\d+\s*\[\d[\d:]*<")
# The engine's own clock prefix ("INFO 11-30 17:09:07 "), ignored when comparing repeated lines.
_ENGINE_CLOCK = re.compile(r"^(\S+\s+)?\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+")
_ANY_NUMBER = re.compile(r"\d+")


class LogOptionError(LanekitError, ValueError):
    """An option of the logs playbook the user must correct: its text is the sentence they read."""


@dataclass
class LogLine:
    """One line of one rank, with its docker time (None when the line carries none)."""

    ts: float | None
    rank: int
    host: str
    text: str
    note: str = ""

    def render(self) -> str:
        if self.ts is None:
            when = "-" * 24
        else:
            when = datetime.fromtimestamp(self.ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return f"{when} r{self.rank} {self.host} | {self.text}" + (f"  [{self.note}]" if self.note else "")


def parse_since(value: str | None) -> float | None:
    """'10m' -> 600.0 seconds ('90', '30s', '2h', '1d'); None for no limit."""
    if value in (None, ""):
        return None
    match = _SINCE.match(str(value))
    if not match:
        raise LogOptionError(f"logs_since={value!r} is not a duration; use for example logs_since=90s, logs_since=10m or logs_since=2h.")
    return float(match.group(1)) * _UNITS[match.group(2)]


# More node ranks than any lane has: a range beyond it is a typo (and would be a huge set).
MAX_RANK = 4095
DEFAULT_LINES = 100


def parse_ranks(value: str | Sequence[int] | None) -> list[int] | None:
    """'0,3' or '0-2,5' or [0, 3] -> sorted ranks; None (or '') for every rank."""
    if value in (None, "", []):
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, list, tuple)):
        raise LogOptionError(f"logs_ranks={value!r} is not a list of node ranks; use for example logs_ranks=0,3 or logs_ranks=0-3.")
    items = value.split(",") if isinstance(value, str) else [value] if isinstance(value, int) else list(value)
    ranks: set[int] = set()
    for item in items:
        text = str(item).strip().lstrip("r")
        bounds = text.split("-", 1) if "-" in text else [text] if text else []
        # ASCII digits only: int() reads '٣' as 3 and refuses '²' with a Python error.
        if isinstance(item, bool) or not all(ascii_digits(b.strip()) for b in bounds):
            raise LogOptionError(f"logs_ranks={value!r} is not a list of node ranks; use for example logs_ranks=0,3 "
                                 "or logs_ranks=0-3.")
        numbers = [int(b) for b in bounds]
        if numbers and (max(numbers) > MAX_RANK or numbers[0] > numbers[-1]):
            raise LogOptionError(f"logs_ranks={value!r} asks for rank {max(numbers)}"
                                 + (f" down to {numbers[-1]}" if numbers[0] > numbers[-1] else "")
                                 + "; give node ranks from 0 up, low to high (e.g. logs_ranks=0-3).")
        ranks.update(range(numbers[0], numbers[-1] + 1) if numbers else ())
    return sorted(ranks)


def parse_lines(value: Any) -> int:
    """``lines``: a whole number of at least 1 (unset: 100); '-5' or 'all' is a sentence, not 0 or everything."""
    if value in (None, ""):
        return DEFAULT_LINES
    number = whole_number(value)
    if number is None or number < 1:
        raise LogOptionError(f"logs_lines={value!r} is not a count of lines; use a whole number of at least 1 (logs_lines=100 "
                             "is the last 100 lines of each rank), or logs_since=10m for every line of a time window.")
    return number


def check_options(*, lines: Any = None, ranks: str | Sequence[int] | None = None, since: str | None = None,
                  grep: str | None = None) -> dict:
    """Every logs-lane option parsed, or the LogOptionError sentence of the first bad one (before any host is read)."""
    return {"lines": parse_lines(lines), "ranks": parse_ranks(ranks), "since_s": parse_since(since),
            "grep": compile_grep(grep)}


def missing_ranks(asked: Sequence[int] | None, streams: Mapping[tuple[int, str], Sequence[str]],
                  notes: Sequence[str] = ()) -> str | None:
    """The sentence for ranks asked for that no stream has (ranks=9 on an 8-rank lane), None when all are there
    or when a node gave no answer (its note says why its ranks are missing)."""
    if not asked:
        return None
    have = sorted({rank for rank, _host in streams})
    absent = [r for r in asked if r not in have]
    if not absent or notes:
        return None
    shown = ", ".join(map(str, have)) if have else "none"
    return (f"logs_ranks={','.join(map(str, asked))}: the lane has no rank {', '.join(map(str, absent))} (its logs hold "
            f"ranks {shown}); ask for ranks among those, or leave ranks unset for all.")


def compile_grep(pattern: str | None) -> re.Pattern | None:
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise LogOptionError(f"logs_grep={pattern!r} is not a regular expression ({exc}).") from None


def rank_lines(rank: int, host: str, raw: Iterable[str]) -> list[LogLine]:
    """One rank's ``docker logs --timestamps`` lines as records (a line without a stamp keeps the previous one)."""
    out: list[LogLine] = []
    last: float | None = None
    for line in raw:
        ts, text = split_timestamp(line.rstrip("\n"))
        if ts is None:
            ts = last
        last = ts
        # tqdm redraws with carriage returns: the last drawing is what a terminal shows.
        text = text.rstrip("\r").rsplit("\r", 1)[-1]
        out.append(LogLine(ts, rank, host, text))
    return out


def is_progress(text: str) -> bool:
    return bool(_PROGRESS.search(text))


def _repeat_key(text: str) -> str:
    return _ANY_NUMBER.sub("#", _ENGINE_CLOCK.sub("", text)).strip()


def fold(lines: Sequence[LogLine]) -> list[LogLine]:
    """One rank's lines with noise folded: runs of progress-bar updates keep their last update,
    and a line repeated later keeps its first occurrence (numbers and the engine's clock ignored)
    with a count."""
    out: list[LogLine] = []
    progress_run: list[LogLine] = []
    first_seen: dict[str, LogLine] = {}
    repeats: dict[str, int] = {}

    def flush() -> None:
        if progress_run:
            last = progress_run[-1]
            if len(progress_run) > 1:
                last.note = f"{len(progress_run) - 1} earlier progress updates folded"
            out.append(last)
            progress_run.clear()

    for line in lines:
        if is_progress(line.text):
            progress_run.append(line)
            continue
        flush()
        key = _repeat_key(line.text)
        if not key:
            out.append(line)
            continue
        if key in first_seen:
            repeats[key] = repeats.get(key, 0) + 1
            first_seen[key].note = f"repeated {repeats[key]} more times"
            continue
        first_seen[key] = line
        out.append(line)
    flush()
    return out


def merge(streams: Mapping[tuple[int, str], Sequence[str]], *, ranks: Sequence[int] | None = None,
          lines: int | None = None, since_s: float | None = None, now: float | None = None,
          grep: re.Pattern | None = None, folding: bool = True) -> list[LogLine]:
    """Every selected rank's lines in time order.

    ``streams`` maps (rank, host) to that rank's time-stamped lines, oldest first. Per rank: lines
    older than ``since_s`` before ``now`` and lines not matching ``grep`` are dropped (before
    folding, so a folded line cannot hide a match), noise folded, and the last ``lines`` kept;
    then the ranks are merged by time (ties by rank).
    """
    per_rank: list[list[LogLine]] = []
    for (rank, host), raw in sorted(streams.items()):
        if ranks is not None and rank not in ranks:
            continue
        records = rank_lines(rank, host, raw)
        if since_s is not None and now is not None:
            cutoff = now - since_s
            records = [r for r in records if r.ts is None or r.ts >= cutoff]
        if grep is not None:
            records = [r for r in records if grep.search(r.text)]
        if folding:
            records = fold(records)
        if lines is not None and lines >= 0:
            records = records[-lines:] if lines else []
        per_rank.append(records)
    return list(heapq.merge(*per_rank, key=lambda r: (r.ts if r.ts is not None else float("-inf"), r.rank)))


_ARCHIVED_RANK = re.compile(r"^r(\d+)-(.+)$")


def archived_rank(dirname: str) -> tuple[int, str] | None:
    """(rank, host) of a bundle's ``ranks/r<rank>-<host>`` folder name; None for another name."""
    match = _ARCHIVED_RANK.match(dirname)
    if not match:
        return None
    return int(match.group(1)), match.group(2)
