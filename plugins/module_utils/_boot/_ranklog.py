# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""One rank's boot, read from its log: the phase it reached and when.

One job: parse a rank's ``docker logs --timestamps`` lines as they arrive. :class:`RankLog` keeps
the rank's phase (container started, rendezvous, loading k/N shards, post-load barrier, KV
profiling, graph capture, warm-up, up), the times it entered each, the weight-bar and
graph-capture progress, and the failure signatures the rank printed. Which lines mark which
phase is engine knowledge: the milestones come from the engine table (``_engines``), as does
the guess of the engine from a log whose engine is not known.

Pure: no I/O, no Ansible imports, no clock (times come from the log's own timestamps).
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _signatures as sigs
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines as engines

PHASES: tuple[str, ...] = (
    "missing",
    "created",
    "started",
    "rendezvous",
    "loading",
    "barrier",
    "kv_profile",
    "graph_capture",
    "warmup",
    "ready",
)
ORDER: dict[str, int] = {p: i for i, p in enumerate(PHASES)}

_DOCKER_TS = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2}) ?")


def parse_docker_time(value: str | None) -> float | None:
    """Epoch seconds of a docker RFC 3339 time ('2026-10-30T06:07:08.123456789Z'); None if unset."""
    if not value or value.startswith("0001-01-01"):
        return None
    match = _DOCKER_TS.match(value)
    if not match:
        return None
    base, frac, zone = match.groups()
    stamp = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    fraction = int((frac or "0").ljust(9, "0")) / 1e9
    if zone == "Z":
        return stamp.timestamp() + fraction
    sign = 1 if zone[0] == "+" else -1
    hours, minutes = int(zone[1:3]), int(zone[4:6])
    return stamp.timestamp() - sign * (hours * 3600 + minutes * 60) + fraction


def split_timestamp(line: str) -> tuple[float | None, str]:
    """Split a ``docker logs --timestamps`` line into (epoch seconds, text)."""
    match = _DOCKER_TS.match(line)
    if not match:
        return None, line
    return parse_docker_time(line[: match.end()].strip()), line[match.end():]


def last_timestamp(lines: list[str]) -> str | None:
    """The docker timestamp token of the last stamped line (the next poll's ``since``)."""
    for line in reversed(lines):
        if split_timestamp(line)[0] is not None:
            return line.split(" ", 1)[0]
    return None


# Progress bars every engine prints the same way (tqdm), so they are not engine records.
_SHARDS = re.compile(
    r"(?:checkpoint|safetensors|consolidated|weight)s?\s+shards?:?\s*(\d+)%[^|\n]*\|[^0-9\n]*?(\d+)/(\d+)"
    r"(?:\s*\[(\d[\d:]*)<(\d[\d:]*|\?))?",
    re.IGNORECASE,
)
_CAPTURE = re.compile(
    r"Captur\w*\s+(?:CUDA graphs?|cuda graphs?|batches)[^:]*:\s*(\d+)%[^|\n]*\|[^0-9\n]*?(\d+)/(\d+)",
    re.IGNORECASE,
)


def _clock(text: str) -> float | None:
    """'01:02:03' / '02:03' -> seconds (tqdm elapsed/remaining); None for '?'."""
    if not text or text == "?":
        return None
    total = 0
    for part in text.split(":"):
        if not part.isdigit():
            return None
        total = total * 60 + int(part)
    return float(total)


class RankLog:
    """The phase of one rank, read incrementally from its log."""

    def __init__(self, engine: str | None = None, role: str = "worker") -> None:
        self.engine = engine if engine in engines.ENGINES else None
        self.role = role
        self.phase = "started"
        self.events: dict[str, float | None] = {}
        self.shards: tuple[int, int] | None = None
        self.shards_at: float | None = None
        self.bar_start: tuple[float, int] | None = None
        self.shard_pct = 0
        self.tqdm_remaining_s: float | None = None
        self.capture: tuple[int, int] | None = None
        self.lines_seen = 0
        self.last_line_at: float | None = None
        self.last_line = ""
        self.scanner = sigs.LineScanner(self.engine, role)
        self.last_ts: float | None = None
        self._milestones = engines.milestones(self.engine, role)

    # A line may hold several tqdm updates separated by carriage returns.
    def feed(self, lines: Iterable[tuple[float | None, str]]) -> None:
        for ts, raw in lines:
            for text in raw.split("\r"):
                text = text.rstrip("\n")
                if not text.strip():
                    continue
                self._line(ts, text)

    def feed_docker(self, raw_lines: Iterable[str]) -> None:
        """Feed ``docker logs --timestamps`` lines."""
        self.feed(split_timestamp(line) for line in raw_lines)

    def _advance(self, phase: str, event: str, ts: float | None) -> None:
        if event not in self.events:
            self.events[event] = ts
        if ORDER[phase] > ORDER[self.phase]:
            self.phase = phase
            self.events.setdefault("phase:" + phase, ts)

    def _guess_engine(self, text: str) -> None:
        engine = engines.guess_from_log(text)
        if engine is None:
            return
        self.engine = engine
        self._milestones = engines.milestones(engine)
        rescanned = sigs.LineScanner(engine, self.role)
        rescanned.found = dict(self.scanner.found)
        rescanned.last_exception = self.scanner.last_exception
        self.scanner = rescanned

    def _line(self, ts: float | None, text: str) -> None:
        self.lines_seen += 1
        if ts is not None:
            self.last_line_at = ts
            self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)
        self.last_line = text.strip()[:200]
        if self.engine is None:
            self._guess_engine(text)
        self.scanner.feed([text])
        shard = _SHARDS.search(text)
        if shard:
            pct, done, total = int(shard.group(1)), int(shard.group(2)), int(shard.group(3))
            if ts is not None and (self.bar_start is None or total != (self.shards or (0, total))[1]):
                self.bar_start = (ts, done)
            if self.shards is None or done >= self.shards[0] or total != self.shards[1]:
                self.shards = (done, total)
                self.shard_pct = pct
                self.shards_at = ts
                self.tqdm_remaining_s = _clock(shard.group(5) or "")
            self._advance("loading", "load_begin", ts)
            if done == 0:
                self.events["load_begin"] = self.events.get("load_begin") or ts
            return
        capture = _CAPTURE.search(text)
        if capture:
            self.capture = (int(capture.group(2)), int(capture.group(3)))
            self._advance("graph_capture", "capture", ts)
            return
        for milestone in self._milestones:
            if self.engine is None and milestone.event == "api_up":
                # 'Uvicorn running' means up for vLLM but only warm-up for SGLang: an engine's
                # own word is needed before a line may say the API is up.
                continue
            if milestone.pattern.search(text):
                self._advance(milestone.phase, milestone.event, ts)

    @property
    def signatures(self) -> dict[str, str]:
        return dict(self.scanner.found)

    def load_rate(self) -> float | None:
        """Shards per second on this rank, from the weight bar's timestamps."""
        if self.shards is None or self.shards_at is None:
            return None
        done = self.shards[0]
        if self.bar_start is not None and done > self.bar_start[1] and self.shards_at > self.bar_start[0]:
            return (done - self.bar_start[1]) / (self.shards_at - self.bar_start[0])
        begin = self.events.get("load_begin")
        if begin is None or done <= 0 or self.shards_at <= begin:
            return None
        return done / (self.shards_at - begin)
