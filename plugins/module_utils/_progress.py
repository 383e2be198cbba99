# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Boot progress of a lane, read from its ranks' logs.

Three layers, all pure (no I/O, no Ansible imports, clocks passed in):

* :class:`RankLog` reads one rank's log lines as they arrive (``docker logs --timestamps``) and
  keeps its phase (container started, rendezvous, loading k/N shards, post-load barrier, KV
  profiling, graph capture, warm-up, up), the times it entered each, the shard and graph
  progress, and the failure signatures it printed. vLLM and SGLang print different milestones
  (see the engines' log lines in the launch notes); both are understood.
* :func:`rank_status` turns a rank's container state (from ``docker inspect``), its
  :class:`RankLog` and its probe results into a plain dict, the unit the wait loop exchanges.
* :class:`LaneTracker` takes every rank's status at each poll, infers what only the whole lane
  shows (a loaded rank is *waiting at the barrier* until every rank has loaded), fingerprints
  the progress, and decides: keep waiting, ready, or failed (exited, fatal line, stall, budget,
  unhealthy API) with the signatures and the ranks to blame. It also estimates the time left and
  renders the one status line per poll.
"""
from __future__ import annotations

import re
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence

from ansible_collections.lanekit.serving.plugins.module_utils import _signatures as sigs

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

# Short labels for the status line, long ones for tables and messages.
SHORT = {
    "missing": "missing",
    "created": "created",
    "started": "started",
    "rendezvous": "rendezvous",
    "loading": "loading",
    "barrier": "barrier",
    "kv_profile": "kv-profile",
    "graph_capture": "graphs",
    "warmup": "warm-up",
    "ready": "up",
}
LONG = {
    "missing": "no container",
    "created": "container created",
    "started": "container started",
    "rendezvous": "rendezvous",
    "loading": "loading shards",
    "barrier": "post-load barrier",
    "kv_profile": "KV profiling",
    "graph_capture": "graph capture",
    "warmup": "warm-up",
    "ready": "up",
}

RUNNING = "running"

_DOCKER_TS = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2}) ?")


def parse_docker_time(value: str | None) -> float | None:
    """Epoch seconds of a docker RFC 3339 time ('2026-10-30T06:07:08.123456789Z'); None if unset."""
    if not value or value.startswith("0001-01-01"):
        return None
    match = _DOCKER_TS.match(value)
    if not match:
        return None
    base, frac, zone = match.groups()
    stamp = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
    if zone == "Z":
        stamp = stamp.replace(tzinfo=timezone.utc)
    else:
        sign = 1 if zone[0] == "+" else -1
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        stamp = stamp.replace(tzinfo=timezone.utc)
        return stamp.timestamp() - sign * (hours * 3600 + minutes * 60) + (int((frac or "0").ljust(9, "0")) / 1e9)
    return stamp.timestamp() + int((frac or "0").ljust(9, "0")) / 1e9


def split_timestamp(line: str) -> tuple[float | None, str]:
    """Split a ``docker logs --timestamps`` line into (epoch seconds, text)."""
    match = _DOCKER_TS.match(line)
    if not match:
        return None, line
    return parse_docker_time(line[: match.end()].strip()), line[match.end():]


# --- milestones --------------------------------------------------------------------------

_SHARDS = re.compile(
    r"(?:checkpoint|safetensors|consolidated|weight)s?\s+shards?:?\s*(\d+)%[^|\n]*\|[^0-9\n]*?(\d+)/(\d+)"
    r"(?:\s*\[(\d[\d:]*)<(\d[\d:]*|\?))?",
    re.IGNORECASE,
)
_CAPTURE = re.compile(
    r"Captur\w*\s+(?:CUDA graphs?|cuda graphs?|batches)[^:]*:\s*(\d+)%[^|\n]*\|[^0-9\n]*?(\d+)/(\d+)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Milestone:
    pattern: re.Pattern
    phase: str
    event: str
    engines: tuple[str, ...] = ()


def _m(pattern: str, phase: str, event: str, engines: tuple[str, ...] = ()) -> Milestone:
    return Milestone(re.compile(pattern), phase, event, engines)


# Order does not matter: a line moves the phase forward only. Events record the first time.
MILESTONES: tuple[Milestone, ...] = (
    # vLLM
    _m(r"Launching vLLM .*headless|headless multiproc executor|Initializing a V1 LLM engine"
       r"|distributed_init_method=|vLLM API server version|Waiting for \d+ node\(s\) to join",
       "rendezvous", "rendezvous", ("vllm",)),
    _m(r"is assigned as DP rank|vLLM is using nccl|Starting to load model|All \d+ nodes joined",
       "loading", "load_begin", ("vllm",)),
    _m(r"Loading weights took|Model loading took", "barrier", "loaded", ("vllm",)),
    _m(r"Memory profiling takes|Available KV cache memory|KV cache size: |Maximum concurrency for"
       r"|torch\.compile takes|Dynamo bytecode transform", "kv_profile", "profile", ("vllm",)),
    _m(r"Capturing CUDA graphs", "graph_capture", "capture", ("vllm",)),
    _m(r"Graph capturing finished|init engine \(profile, create kv cache, warmup model\) took",
       "warmup", "warmup", ("vllm",)),
    _m(r"Starting vLLM (?:API )?server(?: \d+)? on|Application startup complete|Uvicorn running on", "ready", "api_up", ("vllm",)),
    # SGLang
    _m(r"server_args=ServerArgs|Init torch distributed begin", "rendezvous", "rendezvous", ("sglang",)),
    _m(r"Init torch distributed ends|Load weight begin", "loading", "load_begin", ("sglang",)),
    _m(r"Load weight end|Post-load barrier", "barrier", "loaded", ("sglang",)),
    _m(r"Memory pool end|KV Cache is allocated|max_total_num_tokens=", "kv_profile", "profile", ("sglang",)),
    _m(r"Capture cuda graph begin|Capturing batches", "graph_capture", "capture", ("sglang",)),
    _m(r"Capture cuda graph end|NCCL/RCCL/HCCL warmup completed|Uvicorn running on|Application startup complete",
       "warmup", "warmup", ("sglang",)),
    _m(r"The server is fired up and ready to roll", "ready", "api_up", ("sglang",)),
    _m(r"Dummy health check server started", "ready", "worker_ready", ("sglang",)),
    # Both (the weight bar names the phase on its own)
    _m(r"Loading safetensors checkpoint shards", "loading", "load_begin"),
)

_ENGINE_HINTS = (
    (re.compile(r"\bvLLM\b|vllm\.entrypoints"), "vllm"),
    (re.compile(r"\bsglang\b|SGLang|ServerArgs\("), "sglang"),
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
        self.engine = engine if engine in ("vllm", "sglang") else None
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
        self.scanner = sigs.LineScanner(self.engine)
        self.last_ts: float | None = None

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

    def _line(self, ts: float | None, text: str) -> None:
        self.lines_seen += 1
        if ts is not None:
            self.last_line_at = ts
            self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)
        self.last_line = text.strip()[:200]
        if self.engine is None:
            for pattern, engine in _ENGINE_HINTS:
                if pattern.search(text):
                    self.engine = engine
                    self.scanner = _rescan(self.scanner, engine)
                    break
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
        for milestone in MILESTONES:
            if milestone.engines and self.engine is not None and self.engine not in milestone.engines:
                continue
            if milestone.engines and self.engine is None and milestone.event == "api_up":
                # 'Uvicorn running' means up for vLLM but only warm-up for SGLang.
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


def _rescan(old: sigs.LineScanner, engine: str) -> sigs.LineScanner:
    new = sigs.LineScanner(engine)
    new.found = dict(old.found)
    new.last_exception = old.last_exception
    return new


# --- one rank's status (the unit exchanged between hosts) -------------------------------------

def _age(now: float, ts: float | None) -> float | None:
    if ts is None:
        return None
    return max(0.0, now - ts)


def rank_status(
    meta: Mapping[str, Any],
    inspect: Mapping[str, Any] | None,
    log: RankLog | None,
    node_now: float,
    probes: Mapping[str, Any] | None = None,
    tail: Sequence[str] = (),
    gather_error: str = "",
) -> dict[str, Any]:
    """Plain dict describing one rank at one poll. Ages are seconds before the node's 'now'.

    ``meta`` holds rank, host, role, container; ``inspect`` is the container's
    ``docker inspect`` object (None when the container does not exist).
    """
    status: dict[str, Any] = {
        "rank": int(meta["rank"]),
        "host": meta.get("host", ""),
        "role": meta.get("role", "worker"),
        "container": meta.get("container", ""),
        "fabric_ip": meta.get("fabric_ip", ""),
        "planned_spec_hash": meta.get("spec_hash", ""),
        "engine": log.engine if log else meta.get("engine"),
        "gather_error": gather_error,
        "probes": dict(probes or {}),
        "tail": list(tail)[-20:],
    }
    if gather_error and inspect is None and log is None:
        status.update(state="unknown", phase="started")
        return status
    if inspect is None:
        status.update(state="missing", phase="missing", signatures={}, last_exception="")
        return status
    st = inspect.get("State") or {}
    started = parse_docker_time(st.get("StartedAt"))
    finished = parse_docker_time(st.get("FinishedAt"))
    state = st.get("Status") or ("running" if st.get("Running") else "unknown")
    status.update(
        state=state,
        exit_code=st.get("ExitCode"),
        oom_killed=bool(st.get("OOMKilled")),
        error=st.get("Error") or "",
        restart_count=int(inspect.get("RestartCount") or 0),
        image=(inspect.get("Config") or {}).get("Image", ""),
        labels=(inspect.get("Config") or {}).get("Labels") or {},
        uptime_s=_age(node_now, started) if state == RUNNING else None,
        started_age_s=_age(node_now, started),
        finished_age_s=_age(node_now, finished) if state != RUNNING else None,
    )
    found = dict(log.signatures) if log else {}
    if status["error"]:
        found.update({k: v for k, v in sigs.scan_text(status["error"]).items() if k not in found})
    status["signatures"] = found
    status["last_exception"] = log.scanner.last_exception if log else ""
    if state == "created":
        status["phase"] = "created"
        return status
    if log is None:
        status["phase"] = "started"
        return status
    status.update(
        phase=log.phase,
        shards=list(log.shards) if log.shards else None,
        shard_pct=log.shard_pct,
        load_rate=log.load_rate(),
        tqdm_remaining_s=log.tqdm_remaining_s,
        capture=list(log.capture) if log.capture else None,
        last_line=log.last_line,
        last_line_age_s=_age(node_now, log.last_line_at),
        events_age_s={k: _age(node_now, v) for k, v in log.events.items() if not k.startswith("phase:")},
        phase_age_s=_age(node_now, log.events.get("phase:" + log.phase)),
    )
    if log.events.get("load_begin") is not None:
        end = log.events.get("loaded")
        if end is None:
            end = node_now
        status["load_elapsed_s"] = max(0.0, end - log.events["load_begin"])
    return status


# --- formatting helpers ---------------------------------------------------------------------

def fmt_duration(seconds: float | None) -> str:
    """'45s', '12m05s', '1h20m'."""
    if seconds is None:
        return "?"
    seconds = int(round(max(0.0, seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def fmt_ranks(ranks: Sequence[int]) -> str:
    """[1, 2, 4, 5, 7] -> 'r1-2,4-5,7'."""
    ranks = sorted(set(ranks))
    if not ranks:
        return ""
    parts: list[str] = []
    start = prev = ranks[0]
    for rank in ranks[1:] + [None]:  # type: ignore[operator]
        if rank is not None and rank == prev + 1:
            prev = rank
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if rank is not None:
            start = prev = rank
    return "r" + ",".join(parts)


def rank_label(status: Mapping[str, Any], long: bool = False) -> str:
    """What the status line says about one rank: 'loading 37/64 (58%)', 'EXITED(1)'."""
    state = status.get("state")
    if state not in (RUNNING, "created", "missing", "unknown"):
        code = status.get("exit_code")
        text = f"EXITED({code})" if state in ("exited", "dead") else state.upper()
        return text + (" OOM" if status.get("oom_killed") else "")
    if state == "unknown":
        return "no-status"
    phase = status.get("phase", "started")
    label = (LONG if long else SHORT)[phase]
    if phase == "loading" and status.get("shards"):
        done, total = status["shards"]
        label += f" {done}/{total}" + (f" ({status.get('shard_pct', 0)}%)" if long or done < total else "")
    elif phase == "graph_capture" and status.get("capture"):
        done, total = status["capture"]
        label += f" {done}/{total}"
    elif phase == "ready" and status.get("role") == "head":
        label = "API up" if long else "up(api)"
    return label


# --- the lane --------------------------------------------------------------------------------

WAITING = "waiting"
READY = "ready"
FAILED = "failed"


@dataclass
class Verdict:
    status: str
    line: str = ""
    matches: list[sigs.SignatureMatch] = field(default_factory=list)
    culprits: list[int] = field(default_factory=list)
    summary: str = ""
    eta_s: float | None = None
    elapsed_s: float | None = None
    already_serving: bool = False
    # How long after the first rank exited the wait noticed it (node clock), when an exit ended it.
    noticed_after_s: float | None = None
    polls_after_exit: int | None = None

    @property
    def done(self) -> bool:
        return self.status != WAITING

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "line": self.line,
            "summary": self.summary,
            "culprits": list(self.culprits),
            "signatures": [m.to_dict() for m in self.matches],
            "eta_s": self.eta_s,
            "elapsed_s": self.elapsed_s,
            "noticed_after_s": self.noticed_after_s,
            "polls_after_exit": self.polls_after_exit,
        }


@dataclass
class BootConfig:
    budget_s: float = 3600.0
    stall_s: float = 900.0
    poll_s: float = 15.0
    stability_s: float = 30.0
    expected_load_s: float | None = None
    expected_warmup_s: float | None = None
    barrier_timeout_s: float | None = None
    chat_probe: bool = True
    max_flaps: int = 3

    @classmethod
    def from_plan(cls, plan: Mapping[str, Any], **overrides: Any) -> "BootConfig":
        boot = dict(plan.get("boot") or {})
        cfg = cls()
        for key in ("budget_s", "stall_s", "poll_s", "stability_s", "expected_load_s", "expected_warmup_s"):
            if boot.get(key) is not None:
                setattr(cfg, key, float(boot[key]))
        if plan.get("engine") == "sglang":
            cfg.barrier_timeout_s = 480.0
            for rank in plan.get("ranks") or []:
                value = (rank.get("env") or {}).get("SGLANG_UNBALANCED_LOAD_TIMEOUT_S")
                if value not in (None, ""):
                    try:
                        cfg.barrier_timeout_s = float(value)
                    except (TypeError, ValueError):
                        pass
                    break
        for key, value in overrides.items():
            if value is not None:
                setattr(cfg, key, value)
        return cfg


def readiness(engine: str | None, statuses: Mapping[int, Mapping[str, Any]], chat_required: bool) -> tuple[bool, str]:
    """(all probes pass, what is missing) from the head's API probes and the workers' health."""
    heads = [s for s in statuses.values() if s.get("role") == "head"] or [statuses[min(statuses)]]
    head = heads[0]
    api = (head.get("probes") or {}).get("api") or {}
    if not api:
        return False, "API not probed yet"
    if not api.get("accepts"):
        return False, "API port refuses connections"
    if api.get("health_status") != 200:
        return False, f"/health answered {api.get('health_status')}"
    if not api.get("model_listed"):
        return False, "/v1/models does not list the served model"
    if chat_required and not api.get("chat_ok"):
        return False, "no streamed first token yet"
    if engine == "sglang":
        waiting = sorted(
            s["rank"] for s in statuses.values()
            if s.get("role") != "head" and ((s.get("probes") or {}).get("health") or {}).get("status") != 200
        )
        if waiting:
            return False, f"worker health not 200 on {fmt_ranks(waiting)}"
    return True, ""


class LaneTracker:
    """Decides, poll after poll, whether the lane is still booting, ready, or failed."""

    def __init__(self, lane: str, engine: str | None, config: BootConfig, hosts: Mapping[int, str]) -> None:
        self.lane = lane
        self.engine = engine
        self.cfg = config
        self.hosts = dict(hosts)
        self.fingerprint: tuple | None = None
        self.last_change: float | None = None
        self.rank_change: dict[int, float] = {}
        self.rank_print: dict[int, tuple] = {}
        self.stable_since: float | None = None
        self.was_ready_once = False
        self.first_ok_poll: int | None = None
        self.flaps = 0
        self.polls = 0
        self.poll_times: list[float] = []
        self.history: list[str] = []

    # Lane-level inference: what a single rank's log cannot say.
    def infer(self, statuses: Mapping[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        out = {rank: dict(status) for rank, status in statuses.items()}
        running = [s for s in out.values() if s.get("state") == RUNNING]
        for status in running:
            # A head whose API answers /health and lists the model is up, whatever its log says.
            api = (status.get("probes") or {}).get("api") or {}
            if status.get("role") == "head" and api.get("health_status") == 200 and api.get("model_listed"):
                status["phase"] = "ready"
        all_loaded = bool(running) and len(running) == len(out) and all(
            ORDER.get(s.get("phase", "started"), 0) >= ORDER["barrier"] for s in running)
        head_up = any(s.get("role") == "head" and s.get("phase") == "ready" for s in running)
        for status in running:
            if all_loaded and status.get("phase") == "barrier":
                status["phase"] = "kv_profile"
            if head_up and self.engine == "vllm" and status.get("role") != "head" \
                    and ORDER.get(status.get("phase", "started"), 0) >= ORDER["barrier"]:
                status["phase"] = "ready"
            health = (status.get("probes") or {}).get("health") or {}
            if health.get("status") == 200 and status.get("role") != "head":
                status["phase"] = "ready"
        return out

    @staticmethod
    def _rank_fingerprint(status: Mapping[str, Any]) -> tuple:
        api = (status.get("probes") or {}).get("api") or {}
        health = (status.get("probes") or {}).get("health") or {}
        return (
            status.get("state"),
            status.get("phase"),
            tuple(status.get("shards") or ()),
            tuple(status.get("capture") or ()),
            tuple(sorted((status.get("events_age_s") or {}).keys())),
            bool(api.get("accepts")), api.get("health_status"), bool(api.get("model_listed")),
            bool(api.get("chat_ok")), health.get("status"),
        )

    def elapsed(self, statuses: Mapping[int, Mapping[str, Any]]) -> float | None:
        ages = [s.get("started_age_s") for s in statuses.values() if s.get("started_age_s") is not None]
        return max(ages) if ages else None

    def eta(self, statuses: Mapping[int, Mapping[str, Any]]) -> tuple[float | None, str]:
        """(seconds left, how it was estimated) for the lane to be up."""
        running = [s for s in statuses.values() if s.get("state") == RUNNING]
        if not running:
            return None, ""
        phase = min((s.get("phase", "started") for s in running), key=lambda p: ORDER[p])
        warm = self.cfg.expected_warmup_s
        if phase == "ready":
            return 0.0, ""
        if ORDER[phase] < ORDER["loading"]:
            if self.cfg.expected_load_s is None:
                return None, ""
            # Nothing measured yet: the plan's figures, less the time already spent.
            spent = self.elapsed(statuses) or 0.0
            return self.cfg.expected_load_s + (warm or 0.0) - spent, "planned"
        if phase == "loading":
            barred = [s for s in running if s.get("shards")]
            left: float | None = None
            how = ""
            for status in barred:
                done, total = status["shards"]
                rate = status.get("load_rate")
                if rate and rate > 0 and done < total:
                    # The bar's last update is a few seconds old; count from it.
                    since = status.get("last_line_age_s") or 0.0
                    candidate = max(0.0, (total - done) / rate - since)
                    how = f"at {rate * 60:.1f} shards/min"
                elif status.get("tqdm_remaining_s") is not None and done < total:
                    candidate = status["tqdm_remaining_s"]
                    how = "per the load bar"
                else:
                    continue
                left = candidate if left is None else max(left, candidate)
            loaded = [s["load_elapsed_s"] for s in running
                      if ORDER[s.get("phase", "started")] >= ORDER["barrier"] and s.get("load_elapsed_s")]
            loading = [s for s in running if s.get("phase") == "loading"]
            if loaded and loading:
                typical = statistics.median(loaded)
                lag = max(max(0.0, typical - (s.get("load_elapsed_s") or 0.0)) for s in loading)
                if left is None or (not barred or all(s.get("phase") != "loading" for s in barred)):
                    left, how = lag, "as long as the loaded ranks took"
            if left is None:
                if self.cfg.expected_load_s is None:
                    return None, ""
                elapsed = max((s.get("load_elapsed_s") or 0.0) for s in running)
                left, how = max(0.0, self.cfg.expected_load_s - elapsed), "planned"
            how = f"load {fmt_duration(left)} {how}"
            if warm:
                how += f" + warm-up {fmt_duration(warm)} planned"
            return left + (warm or 0.0), how
        # Loaded: the post-load phases.
        if warm is None:
            return None, ""
        since_loaded = [s.get("events_age_s", {}).get("loaded") for s in running]
        since_loaded = [a for a in since_loaded if a is not None]
        if len(since_loaded) != len(running):
            return warm, "warm-up planned"
        return max(0.0, warm - min(since_loaded)), "warm-up planned"

    @staticmethod
    def joined(statuses: Mapping[int, Mapping[str, Any]]) -> tuple[list[int], list[int]] | None:
        """(joined, missing) ranks of the rendezvous, from the connections to the head's store.

        Every rank keeps a TCP connection to the head's rendezvous port while the group forms;
        a rank whose fabric address has none has not joined. None when not measurable.
        """
        heads = [s for s in statuses.values() if s.get("role") == "head" and s.get("state") == RUNNING]
        if not heads:
            return None
        info = (heads[0].get("probes") or {}).get("rendezvous")
        if not info:
            return None
        peers = set(info.get("peers") or [])
        ips = {r: s.get("fabric_ip") for r, s in statuses.items()}
        if not all(ips.values()) or len(set(ips.values())) != len(ips):
            return None   # addresses unknown or shared (one machine): cannot tell ranks apart
        joined = sorted(r for r, ip in ips.items() if ip in peers or statuses[r].get("role") == "head")
        missing = sorted(set(ips) - set(joined))
        return joined, missing

    def _barrier_note(self, statuses: Mapping[int, Mapping[str, Any]]) -> str:
        if self.cfg.barrier_timeout_s is None:
            return ""
        running = [s for s in statuses.values() if s.get("state") == RUNNING]
        loaded_ages = [s.get("events_age_s", {}).get("loaded") for s in running]
        loaded_ages = [a for a in loaded_ages if a is not None]
        behind = sorted(s["rank"] for s in running if ORDER[s.get("phase", "started")] < ORDER["barrier"])
        if not loaded_ages or not behind:
            return ""
        closes = self.cfg.barrier_timeout_s - max(loaded_ages)
        if closes < 0:
            return f"barrier expired {fmt_duration(-closes)} ago, {fmt_ranks(behind)} not loaded"
        return f"barrier closes in {fmt_duration(closes)}, waiting for {fmt_ranks(behind)}"

    def render(self, statuses: Mapping[int, Mapping[str, Any]], now: float | None = None,
               quiet_s: float | None = None, note: str = "") -> str:
        """One line: time, lane, elapsed/budget, every rank's phase, ETA and warnings."""
        clock = time.strftime("%H:%M:%S", time.localtime(now if now is not None else time.time()))
        groups: dict[str, list[int]] = {}
        for rank in sorted(statuses):
            groups.setdefault(rank_label(statuses[rank]), []).append(rank)
        ordered = sorted(groups.items(), key=lambda item: item[1][0])
        ranks_txt = " | ".join(f"{fmt_ranks(ranks)} {label}" for label, ranks in ordered)
        elapsed = self.elapsed(statuses)
        parts = [f"[{clock}] {self.lane} {fmt_duration(elapsed)}/{fmt_duration(self.cfg.budget_s)}", ranks_txt]
        left, how = self.eta(statuses)
        if left is not None and left < 0:
            parts.append(f"ETA overdue by {fmt_duration(-left)} ({how or 'planned'})")
        elif left is not None and left > 0:
            eta = f"ETA ~{fmt_duration(left)}"
            if how:
                eta += f" ({how})"
            if elapsed is not None and elapsed + left > self.cfg.budget_s:
                eta += f" > budget by {fmt_duration(elapsed + left - self.cfg.budget_s)}"
            parts.append(eta)
        barrier = self._barrier_note(statuses)
        if barrier:
            parts.append(barrier)
        running = [s for s in statuses.values() if s.get("state") == RUNNING]
        if running and min(ORDER[s.get("phase", "started")] for s in running) <= ORDER["rendezvous"]:
            joined = self.joined(statuses)
            if joined is not None:
                done, missing = joined
                parts.append(f"joined {len(done)}/{len(statuses)}"
                             + (f", waiting for {fmt_ranks(missing)}" if missing else ""))
        mem = memory_note(statuses)
        if mem:
            parts.append(mem)
        if quiet_s is not None and quiet_s >= max(2 * self.cfg.poll_s, 60.0):
            parts.append(f"no progress {fmt_duration(quiet_s)}/{fmt_duration(self.cfg.stall_s)}")
        if note:
            parts.append(note)
        return " | ".join(parts)

    # --- decisions ---------------------------------------------------------------------------

    def _signature_matches(self, statuses: Mapping[int, Mapping[str, Any]]) -> list[sigs.SignatureMatch]:
        return sigs.collect({rank: s.get("signatures") or {} for rank, s in statuses.items()})

    def _laggards(self, statuses: Mapping[int, Mapping[str, Any]]) -> tuple[list[int], str]:
        running = {r: s for r, s in statuses.items() if s.get("state") == RUNNING}
        if not running:
            return [], ""
        low = min(ORDER[s.get("phase", "started")] for s in running.values())
        high = max(ORDER[s.get("phase", "started")] for s in running.values())
        behind = sorted(r for r, s in running.items() if ORDER[s.get("phase", "started")] == low)
        if low == high:
            stamps = {r: self.rank_change.get(r, 0.0) for r in running}
            oldest = min(stamps.values())
            stale = sorted(r for r, t in stamps.items() if t == oldest)
            if len(stale) < len(running):
                behind = stale
            return behind, f"every rank is at {LONG[PHASES[low]]}"
        return behind, f"{fmt_ranks(behind)} at {LONG[PHASES[low]]} while others reached {LONG[PHASES[high]]}"

    def _never_joined(self, statuses: Mapping[int, Mapping[str, Any]]) -> sigs.SignatureMatch | None:
        running = {r: s for r, s in statuses.items() if s.get("state") == RUNNING}
        if not running:
            return None
        before = {r for r, s in running.items() if ORDER[s.get("phase", "started")] <= ORDER["rendezvous"]}
        if not before:
            return None
        joined = self.joined(statuses)
        if joined is not None and joined[1]:
            missing = joined[1]
            return sigs.derived("rank_never_joined", missing,
                                f"{fmt_ranks(missing)} has no connection to the head's rendezvous port while "
                                f"{len(joined[0])} of {len(statuses)} ranks joined")
        if len(before) < len(running):
            return sigs.derived("rank_never_joined", sorted(before),
                                f"{fmt_ranks(sorted(before))} never got past the rendezvous while the others did")
        silent = sorted(r for r in before if running[r].get("phase") == "started")
        if silent and len(silent) < len(running):
            return sigs.derived("rank_never_joined", silent,
                                f"{fmt_ranks(silent)} never reached the rendezvous; the other ranks wait there")
        return sigs.derived("rank_never_joined", sorted(before), "no rank got past the rendezvous")

    def _fail(self, sid: str | None, statuses, ranks: Sequence[int], detail: str, line: str,
              extra: Sequence[sigs.SignatureMatch | None] = ()) -> Verdict:
        """A failed verdict: log signatures (roots first), then the loop's own finding.

        ``sid`` names the derived signature for what the loop saw (exit, stall, budget); None
        when a log signature alone is the reason.
        """
        matches = self._signature_matches(statuses)
        seen = {m.id for m in matches}
        derived = [m for m in extra if m is not None and m.id not in seen]
        roots = [m for m in matches if m.signature.kind == sigs.ROOT]
        if sid is not None and not (roots and sid == "container_exited"):
            # (an exit explained by a known line needs no second, vaguer entry)
            derived.append(sigs.derived(sid, ranks, detail))
        rest = [m for m in matches if m.signature.kind != sigs.ROOT]
        ordered = roots + derived + rest
        if roots:
            culprits = sorted(set(roots[0].blamed or roots[0].ranks))
        elif derived and derived[0].ranks:
            culprits = sorted(set(derived[0].ranks))
        else:
            culprits = sorted(set(ranks))
        if sid is None:
            summary = detail
        else:
            summary = f"{sigs.get(sid).title}: {detail}" if detail else sigs.get(sid).title
        if roots and (sid is None or sigs.get(sid).derived):
            summary += f"; first known cause: {roots[0].signature.title} on {fmt_ranks(roots[0].ranks)}"
        return Verdict(FAILED, line, ordered, culprits, summary, elapsed_s=self.elapsed(statuses))

    def _silent_hosts(self, statuses: Mapping[int, Mapping[str, Any]]) -> tuple[list[int], str]:
        unknown = sorted(r for r, s in statuses.items() if s.get("state") == "unknown")
        if not unknown:
            return [], ""
        errors = "; ".join(f"r{r} ({statuses[r].get('host', '?')}): {statuses[r].get('gather_error') or 'no report'}"
                           for r in unknown)
        return unknown, f"no status from {errors}"

    def update(self, now: float, raw: Mapping[int, Mapping[str, Any]]) -> Verdict:
        """One poll. ``now`` is the controller's monotonic clock in seconds."""
        self.polls += 1
        self.poll_times.append(now)
        statuses = self.infer(raw)
        for rank, status in statuses.items():
            fp = self._rank_fingerprint(status)
            if self.rank_print.get(rank) != fp:
                self.rank_print[rank] = fp
                self.rank_change[rank] = now
        fingerprint = tuple(self.rank_print[r] for r in sorted(statuses))
        if fingerprint != self.fingerprint:
            self.fingerprint = fingerprint
            self.last_change = now
        quiet = now - (self.last_change if self.last_change is not None else now)
        elapsed = self.elapsed(statuses)

        ok, missing_probe = readiness(self.engine, statuses, self.cfg.chat_probe)
        note = ""
        if ok:
            if self.first_ok_poll is None:
                self.first_ok_poll = self.polls
            if self.stable_since is None:
                self.stable_since = now
            self.was_ready_once = True
            stable_for = now - self.stable_since
            note = f"healthy {fmt_duration(stable_for)}/{fmt_duration(self.cfg.stability_s)}"
        elif self.stable_since is not None:
            self.flaps += 1
            self.stable_since = None
            note = f"unhealthy again ({missing_probe}), flap {self.flaps}/{self.cfg.max_flaps}"
        elif any(s.get("phase") == "ready" and s.get("role") == "head" for s in statuses.values()):
            note = missing_probe

        line = self.render(statuses, now=time.time(), quiet_s=quiet, note=note)
        self.history.append(line)

        missing = sorted(r for r, s in statuses.items() if s.get("state") in ("missing", "created"))
        if missing:
            return self._fail("container_missing", statuses, missing,
                              f"{fmt_ranks(missing)} has no started container", line)
        dead = sorted(r for r, s in statuses.items() if s.get("state") not in (RUNNING, "unknown"))
        if dead:
            # The rank that exited first is the likeliest cause; the others often follow it.
            order = sorted(dead, key=lambda r: (-(statuses[r].get("finished_age_s") or 0.0), r))
            oom = [r for r in order if statuses[r].get("oom_killed")]
            details = ", ".join(
                f"r{r} {statuses[r].get('state')} with code {statuses[r].get('exit_code')}"
                f" during {LONG.get(statuses[r].get('phase', 'started'), '?')}"
                for r in order
            )
            if not self._signature_matches(statuses):
                lasts = "; ".join(f"r{r}: {statuses[r]['last_exception']}"
                                  for r in order if statuses[r].get("last_exception"))
                if lasts:
                    details += f" (last error: {lasts})"
            verdict = self._fail("oom_killed" if oom else "container_exited", statuses,
                                 oom or order[:1], details, line)
            age = statuses[order[0]].get("finished_age_s")
            verdict.noticed_after_s = age
            if age is not None:
                # Polls that began after the exit (this one included): ages are node-clock
                # differences, so no clock needs to agree with the controller's.
                exited = self.poll_times[-1] - age
                verdict.polls_after_exit = sum(1 for t in self.poll_times if t >= exited)
            return verdict
        fatal = [m for m in self._signature_matches(statuses) if m.signature.fatal]
        if fatal:
            return self._fail(None, statuses, fatal[0].ranks,
                              f"{fatal[0].signature.title} on {fmt_ranks(fatal[0].ranks)}"
                              " (the rank printed a fatal error and is going down)", line)
        if ok and self.stable_since is not None and now - self.stable_since >= self.cfg.stability_s:
            verdict = Verdict(READY, line, [], [], "ready", eta_s=0.0, elapsed_s=elapsed)
            verdict.already_serving = self.first_ok_poll == 1
            return verdict
        if self.flaps >= self.cfg.max_flaps:
            head = [r for r, s in statuses.items() if s.get("role") == "head"] or [min(statuses)]
            return self._fail("api_unhealthy", statuses, head,
                              f"readiness failed {self.flaps} times after passing ({missing_probe})", line)
        if ok:
            # Serving: the budget and the stall clock only apply to a boot.
            left, _ = self.eta(statuses)
            return Verdict(WAITING, line, [], [], "", eta_s=left, elapsed_s=elapsed)
        if elapsed is not None and elapsed >= self.cfg.budget_s:
            behind, why = self._laggards(statuses)
            silent, why_silent = self._silent_hosts(statuses)
            if silent:
                behind, why = silent, why_silent
            return self._fail("budget_exhausted", statuses, behind,
                              f"{fmt_duration(elapsed)} since the first rank started; {why}", line,
                              [self._never_joined(statuses)])
        if quiet >= self.cfg.stall_s:
            behind, why = self._laggards(statuses)
            silent, why_silent = self._silent_hosts(statuses)
            if silent:
                behind, why = silent, why_silent
            never = self._never_joined(statuses)
            if never is not None and len(never.ranks) < len(statuses) and not silent:
                behind, why = never.ranks, never.detail
            return self._fail("stalled", statuses, behind,
                              f"no progress for {fmt_duration(quiet)}; {why}", line, [never])
        left, _ = self.eta(statuses)
        return Verdict(WAITING, line, [], [], "", eta_s=left, elapsed_s=elapsed)


def memory_note(statuses: Mapping[int, Mapping[str, Any]]) -> str:
    """'MemFree min 1.6G r5': the tightest node's free memory (on unified memory, what the GPU gets)."""
    free = {r: s.get("mem_free_kb") for r, s in statuses.items() if s.get("mem_free_kb") is not None}
    if not free:
        return ""
    low = min(free.values())
    ranks = sorted(r for r, kb in free.items() if kb == low)
    return f"MemFree min {low / 1048576:.1f}G {fmt_ranks(ranks)}"


def failure_message(lane: str, verdict: Verdict, hosts: Mapping[int, str], bundle: str = "",
                    poll_s: float | None = None) -> str:
    """The sentence(s) a user reads when the wait fails."""
    lines = [f"Lane {lane} failed to boot: {verdict.summary}."]
    if verdict.culprits:
        lines.append(f"Blamed: {sigs.rank_names(verdict.culprits, hosts)}.")
    if verdict.noticed_after_s is not None:
        polls = verdict.polls_after_exit
        lines.append(f"Noticed {verdict.noticed_after_s:.1f} s after the first rank exited"
                     + (f", at poll {polls} after the exit" if polls else "")
                     + (f" (one poll every {poll_s:g} s)" if poll_s else "") + ".")
    for match in verdict.matches:
        lines.append(sigs.describe(match, hosts))
    if bundle:
        lines.append(f"Logs, docker state, the plan and host memory are in {bundle}; the containers were left in place.")
    return "\n".join(lines)


def _plan_match(status: Mapping[str, Any]) -> str:
    """'current' when the container carries the plan's spec hash, 'differs' when not, '-' unknown."""
    wanted = status.get("planned_spec_hash")
    labels = status.get("labels") or {}
    have = next((v for k, v in labels.items() if k.endswith(("spec-hash", "spec_hash"))), None)
    if not wanted or have is None:
        return "-"
    return "current" if have == wanted else "differs"


def render_table(statuses: Mapping[int, Mapping[str, Any]], lane: str = "") -> list[str]:
    """Per-rank table: rank, host, container, state, phase, uptime, restarts, image."""
    header = ("rank", "host", "container", "state", "phase", "uptime", "restarts", "plan", "image")
    rows = [header]
    for rank in sorted(statuses):
        s = statuses[rank]
        state = s.get("state", "?")
        if state not in (RUNNING, "missing", "unknown", "created"):
            state = f"{state}({s.get('exit_code')})"
        rows.append((
            f"r{rank}", s.get("host", ""), s.get("container", ""), state,
            rank_label(s, long=True) if s.get("state") == RUNNING else LONG.get(s.get("phase", ""), "-"),
            fmt_duration(s.get("uptime_s")) if s.get("uptime_s") is not None else "-",
            str(s.get("restart_count", 0)), _plan_match(s), s.get("image", "") or "-",
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    out = [f"lane {lane}" if lane else ""] if lane else []
    for row in rows:
        out.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return out
