# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""One line of the lane's ledger (``reports/<lane>/ledger.jsonl``): what happened to the lane, when, on which plan.

One job: build the record. A deploy, a failed boot, a teardown, a bench run and every step of the
watch (a failed probe, a restart, a healed lane, a budget given up) each become one
:class:`LedgerRecord`: the time, the plan hash and the keys that changed since the plan of the
previous record (the plan diff's words, not only two hashes), the image per node, the weights,
each phase's duration, each rank's boot milestones, the outcome, the cause (signature, evidence
line, fix) and the bench summary. The bring-up report kept this ledger by hand.

Every field has one type, checked twice: what a node returned is type-checked before it is
recorded (a value of the wrong type is left out and named in the record's note), and a line read
back whose fields are not of their types is refused (:class:`BadRecord`), so that the reader skips
it with a warning instead of every later render and watch failing on it. The values of key-like
names (``module_utils/_redact.key_like``) are never shown in ``changes``: the line says that the
value changed, not what it was or became.

Pure: no I/O, no Ansible imports; the clock is passed in.
"""
from __future__ import annotations

import calendar
import dataclasses
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._redact import REDACTED, key_like, secret_value
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._types import (
    BENCH_TYPES,
    PROBE_TYPES,
    BadRecord,
    is_int,
    is_number,
    record_problems,
    shown,
    typed_part,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _plandiff as plandiff

LEDGER_VERSION = 1
EVENTS = ("deploy", "teardown", "bench", "watch")
# The deploy's phases in their order (playbooks/tasks/phase.yml marks when each begins).
PHASES = ("image", "weights", "cache", "ranks", "ready")
# Outcomes that end a boot well; anything else is a row a person reads first.
GOOD = ("ready", "serving", "done", "stopped", "removed", "valid", "healthy", "slow", "healed", "restarted")


def iso(epoch: float) -> str:
    """'2026-12-02T04:31:38Z' (UTC, whole seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def epoch_of(text: Any) -> float | None:
    """Epoch seconds of an ISO UTC time ('2026-12-02T04:31:38Z', fractions allowed); None if unreadable."""
    if not isinstance(text, str) or not text:
        return None
    base, _dot, rest = text.rstrip("Z").partition(".")
    try:
        whole = calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None
    frac = float("0." + rest) if rest.isdigit() else 0.0
    return whole + frac


@dataclass
class Cause:
    """Why a boot failed: the known signature, the log line that showed it, the fix."""

    signature: str = ""
    title: str = ""
    evidence: str = ""
    fix: str = ""
    ranks: list[int] = field(default_factory=list)


@dataclass
class RankBoot:
    """One rank's boot as the last poll saw it. Times are seconds after the rank's container started."""

    rank: int
    host: str = ""
    state: str = ""
    exit_code: int | None = None
    # The boot phase the log reached (rendezvous, loading, ..., ready) -> when it began.
    milestones: dict[str, float] = field(default_factory=dict)
    # When the rank's boot ended: its container stopped, or the wait's last poll.
    end_s: float | None = None
    # How long before the wait's last poll the container started.
    started_before_end_s: float | None = None
    failed: bool = False
    # When the container started, in seconds after the deploy's first phase began (None: not known).
    start_s: float | None = None


@dataclass
class LedgerRecord:
    """One line of the ledger; ``boot`` is the line's number, given when it is appended."""

    event: str
    outcome: str
    lane: str
    time: str
    epoch: float
    boot: int = 0
    version: int = LEDGER_VERSION
    engine: str = ""
    plan_hash: str = ""
    changed_keys: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    images: dict[str, str] = field(default_factory=dict)
    weights: dict[str, Any] = field(default_factory=dict)
    fabric: dict[str, Any] | None = None
    phases: dict[str, float] = field(default_factory=dict)
    ranks: list[RankBoot] = field(default_factory=list)
    boot_s: float | None = None
    cause: Cause | None = None
    bench: dict[str, Any] | None = None
    probe: dict[str, Any] | None = None
    note: str = ""
    bundle: str = ""

    @property
    def good(self) -> bool:
        return self.outcome in GOOD

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> LedgerRecord:
        """The record back from a ledger line (keys it does not know are ignored, missing or null ones default).

        Raises :class:`BadRecord` when a field is not of its type (an epoch "yesterday", a ``ttft_s``
        that is text, a list where a mapping belongs): the reader skips that line, never fails on it.
        """
        problems = record_problems(data)
        if problems:
            more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
            raise BadRecord("; ".join(problems[:3]) + more)
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known and v is not None}
        for key in ("event", "outcome", "lane", "time"):
            values[key] = values.get(key) or ""
        values["epoch"] = float(values.get("epoch") or epoch_of(values["time"]) or 0.0)
        cause = values.get("cause")
        values["cause"] = Cause(**{k: v for k, v in cause.items() if k in _fields(Cause) and v is not None}) \
            if isinstance(cause, Mapping) else None
        values["ranks"] = [RankBoot(**{k: v for k, v in r.items() if k in _fields(RankBoot) and v is not None})
                           for r in values.get("ranks") or []]
        # A ledger written before key-like values were redacted is shown redacted all the same.
        values["changes"] = [redact_change(line) for line in values.get("changes") or []]
        return cls(**values)


def _fields(kind: type) -> set[str]:
    return {f.name for f in dataclasses.fields(kind)}


# --- what changed since the previous record's plan ------------------------------------------------


# '<ranks ...> argv --flag: <old> -> <new>' and '<rank n> env NAME: <old> -> <new>', as the plan diff words them.
_VALUE_LINE = re.compile(r"^(?P<head>(?:ranks? [^:]*? )?(?:argv|env) (?P<name>[^\s:]+)): (?P<change>.*)$", re.S)
# What the plan diff writes for an absent value and for a flag without one: they reveal nothing.
_NO_VALUE = ("unset", "(no value)")


def redact_change(line: str) -> str:
    """A plan diff line with the values of a key-like flag or variable (``_redact.key_like``), or a token-shaped
    value, hidden: it still says that the value came, went or changed, never what it was or became."""
    match = _VALUE_LINE.match(line)
    if not match or not (key_like(match["name"]) or secret_value(match["change"])):
        return line
    change = match["change"]
    old = next((v for v in _NO_VALUE if change.startswith(v + " -> ")), REDACTED)
    new = next((v for v in _NO_VALUE if change.endswith(" -> " + v)), REDACTED)
    both = " (changed)" if old == new == REDACTED else ""
    return f"{match['head']}: {old} -> {new}{both}"


def changes_since(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(changed keys, the plan diff's lines) from the previous record's plan to this one.

    Keys name what moved, once each: ``image``, ``argv --max-num-seqs``, ``env NCCL_DEBUG``,
    ``rank 3 added``. The lines are the plan diff's (``ranks 0-7 argv --max-num-seqs: 128 -> 64``).
    No previous plan: no keys, one line saying so.
    """
    if not new.get("plan_hash"):
        return [], []  # a record without a plan (a teardown by lane name) says nothing about changes
    if not old:
        return [], ["no previous plan in the ledger"]
    if old.get("plan_hash") == new.get("plan_hash"):
        return [], []
    keys: list[str] = []

    def add(key: str) -> None:
        if key not in keys:
            keys.append(key)

    for label, path in plandiff.LANE_FACTS:
        if plandiff._get(dict(old), path) != plandiff._get(dict(new), path):  # pylint: disable=protected-access
            add(label)
    old_ranks = {r.get("node_rank"): r for r in old.get("ranks") or [] if isinstance(r, dict)}
    new_ranks = {r.get("node_rank"): r for r in new.get("ranks") or [] if isinstance(r, dict)}
    for rank in sorted(set(old_ranks) | set(new_ranks), key=lambda r: (r is None, r)):
        if rank not in new_ranks:
            add(f"rank {rank} removed")
        elif rank not in old_ranks:
            add(f"rank {rank} added")
        else:
            for line in plandiff.rank_changes(old_ranks[rank], new_ranks[rank]):
                add(line.split(": ", 1)[0])
    lines = [redact_change(line) for line in plandiff.plan_changes(dict(old), dict(new), "the previous record")[1:]]
    if not keys:
        keys.append("docker options")
    return keys, lines


# --- the parts of a record ---------------------------------------------------------------------------


def plan_parts(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan's facts every record carries: engine, plan hash, the image per node, the weights."""
    weights = plan.get("weights") or {}
    image = plan.get("image") or {}
    images: dict[str, str] = {}
    for spec in plan.get("ranks") or []:
        if isinstance(spec, Mapping) and spec.get("host"):
            images.setdefault(str(spec["host"]), str(spec.get("image") or image.get("ref") or ""))
    manifest = f"{weights.get('model_id') or '?'}@{weights.get('revision') or 'unpinned'}"
    return {
        "lane": str(plan.get("lane") or ""),
        "engine": str(plan.get("engine") or ""),
        "plan_hash": str(plan.get("plan_hash") or ""),
        "images": images,
        "weights": {"manifest": manifest, "path": weights.get("path"),
                    "image_content_hash": image.get("content_hash"), "image_pinned": image.get("pinned")},
    }


def phase_durations(marks: Mapping[str, Any], end: float) -> dict[str, float]:
    """Each deploy phase's seconds from when it began (``marks``: phase -> ISO time) to the next one's begin.

    The last phase that ran ends at ``end``; phases that did not run (skipped, a failure before
    them) are absent.
    """
    begun = sorted((t, p) for p, t in ((p, epoch_of(marks.get(p))) for p in PHASES) if t is not None)
    out = {}
    for i, (start, phase) in enumerate(begun):
        stop = begun[i + 1][0] if i + 1 < len(begun) else end
        out[phase] = round(max(0.0, stop - start), 1)
    return {p: out[p] for p in PHASES if p in out}


def rank_boots(ranks: Sequence[Mapping[str, Any]], culprits: Sequence[int] = (),
               wait_end_s: float | None = None) -> list[RankBoot]:
    """Each rank's milestones from the wait's last statuses (``RankStatus.to_dict()``: ages on the node's clock).

    ``wait_end_s``: when that last poll was read, in seconds after the deploy's first phase began;
    each rank's start is placed on that clock.
    """
    out = []
    # What the nodes returned: a field of the wrong type is left out, a rank without a whole number is no rank.
    for status in ranks if isinstance(ranks, (list, tuple)) else []:
        if not isinstance(status, Mapping) or not is_int(status.get("rank")):
            continue
        started = status.get("started_age_s") if is_number(status.get("started_age_s")) else None
        ages = status.get("phases_age_s")
        milestones: dict[str, float] = {}
        if started is not None and isinstance(ages, Mapping):
            for phase, age in ages.items():
                if is_number(age):
                    milestones[str(phase)] = round(max(0.0, started - age), 1)
        finished = status.get("finished_age_s")
        end = None
        if started is not None:
            end = round(max(0.0, started - (finished if is_number(finished) else 0.0)), 1)
        code = status.get("exit_code")
        state = str(status.get("state") or "")
        out.append(RankBoot(
            rank=status["rank"], host=str(status.get("host") or ""), state=state,
            exit_code=code if is_int(code) and state != "running" else None,
            milestones=dict(sorted(milestones.items(), key=lambda kv: kv[1])), end_s=end,
            started_before_end_s=round(float(started), 1) if started is not None else None,
            failed=status["rank"] in culprits,
            start_s=round(wait_end_s - started, 1) if is_number(wait_end_s) and started is not None else None))
    return sorted(out, key=lambda r: r.rank)


def _ints(value: Any) -> list[int]:
    """The whole numbers of a list a node returned (rank numbers); anything else is no rank."""
    return [v for v in value if is_int(v)] if isinstance(value, (list, tuple)) else []


def cause_of(result: Mapping[str, Any] | None, failed_task: str = "") -> Cause | None:
    """The cause of a failed task: its first known signature (lane_wait's), else its message's first line."""
    if not result:
        return Cause(title=f"{failed_task} failed" if failed_task else "failed") if failed_task else None
    signatures = [s for s in result.get("signatures") or [] if isinstance(s, Mapping)]
    if signatures:
        first = signatures[0]
        blamed = _ints(result.get("culprits") or first.get("blamed") or first.get("ranks"))
        return Cause(signature=str(first.get("id") or ""), title=str(first.get("title") or ""),
                     evidence=str(first.get("evidence") or first.get("detail") or "")[:500],
                     fix=str(first.get("fix") or ""), ranks=blamed)
    msg = str(result.get("msg") or "").strip()
    first_line = msg.splitlines()[0] if msg else ""
    where = f"{failed_task}: " if failed_task else ""
    return Cause(title=(where + first_line)[:300] or "failed")


def new_record(event: str, outcome: str, plan: Mapping[str, Any], previous_plan: Mapping[str, Any] | None,
               now: float, **parts: Any) -> LedgerRecord:
    """A record of ``event`` with the plan's facts and what changed since ``previous_plan``."""
    if event not in EVENTS:
        raise ValueError(f"ledger event {event!r} is not one of {', '.join(EVENTS)}")
    keys, lines = changes_since(previous_plan, plan)
    # What a node returned (the ready probe, a bench report, the watch's probe) is type-checked here, the
    # one door into the ledger: a value of the wrong type is left out and named, so that the line reads back.
    left_out: list[str] = []
    for name, types in (("probe", PROBE_TYPES), ("bench", BENCH_TYPES)):
        if name in parts:
            parts[name], dropped = typed_part(parts[name], types, name)
            left_out += dropped
    if "fabric" in parts:
        parts["fabric"], dropped = typed_part(parts["fabric"], {}, "fabric")
        left_out += dropped
    for name in ("boot_s",):
        if parts.get(name) is not None and not is_number(parts[name]):
            left_out.append(f"{name} is {shown(parts[name])}, not a number")
            parts[name] = None
    record = LedgerRecord(event=event, outcome=outcome, time=iso(now), epoch=round(now, 3), changed_keys=keys,
                          changes=lines, **plan_parts(plan), **parts)
    if left_out:
        what = "left out what a node returned of the wrong type: " + "; ".join(left_out)
        record.note = f"{record.note}; {what}" if record.note else what
    return record


def pick_wait_result(results: Sequence[Any]) -> Mapping[str, Any]:
    """The coordinator's lane_wait result among every node's (the one with the ranks' statuses)."""
    found = [r for r in results if isinstance(r, Mapping) and r.get("status") in ("ready", "failed")]
    return found[0] if found else {}


def fabric_summary(report: Mapping[str, Any] | None, plan_hash: str) -> dict[str, Any] | None:
    """What the ledger keeps of ``reports/<lane>/fabric.json`` (the fabric gate's last result): the verdict,
    the headline figure, the transport, the image and NCCL version, when it was measured, and whether it
    was measured for this plan or reused from an earlier one."""
    if not isinstance(report, Mapping) or not isinstance(report.get("verdict"), Mapping):
        return None
    verdict = report["verdict"]
    return {"status": verdict.get("status"), "gate": verdict.get("gate"), "headline": verdict.get("headline"),
            "transport": verdict.get("transport_used") or verdict.get("transport"), "image": report.get("image"),
            "nccl_version": report.get("nccl_version"), "measured_at": report.get("measured_at"),
            "this_plan": bool(plan_hash) and report.get("plan_hash") == plan_hash}


def deploy_record(plan: Mapping[str, Any], previous_plan: Mapping[str, Any] | None, now: float, *,
                  marks: Mapping[str, Any] | None = None, wait: Mapping[str, Any] | None = None,
                  failed_task: str = "", failed: Mapping[str, Any] | None = None,
                  serving: bool = False, fabric: Mapping[str, Any] | None = None) -> LedgerRecord:
    """The record of one deploy: ready, already serving, or failed (in which phase, why)."""
    wait = wait or {}
    failure = failed if failed else (wait if wait.get("status") == "failed" else None)
    if failure is not None or failed_task:
        outcome = "failed"
    elif serving and not wait:
        outcome = "serving"
    else:
        # No ready wait: the run's tags left the ready phase out (--tags image,weights).
        outcome = str(wait.get("status")) if wait else "done"
    cause = cause_of(failure, failed_task) if outcome == "failed" else None
    culprits = _ints(wait.get("culprits")) or (cause.ranks if cause else [])
    boot_s = wait.get("boot_s")
    note = ""
    if outcome == "failed" and failed_task:
        note = f"failed at: {failed_task}"
    elif serving:
        note = "the lane already served this plan; no phase ran"
    begun = [t for t in (epoch_of(v) for v in (marks or {}).values()) if t is not None]
    ended = wait.get("ended_at")
    wait_end_s = ended - min(begun) if begun and is_number(ended) else None
    return new_record(
        "deploy", outcome, plan, previous_plan, now, phases=phase_durations(marks or {}, now),
        ranks=rank_boots(wait.get("ranks") or [], culprits, wait_end_s), cause=cause,
        boot_s=round(float(boot_s), 1) if is_number(boot_s) else boot_s,
        bundle=str((failure or {}).get("bundle") or ""), note=note, probe=ready_probe(wait),
        fabric=fabric_summary(fabric, str(plan.get("plan_hash") or "")))


def ready_probe(wait: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ready probe's streamed first token (the watch's floor is set from it), when the wait made one."""
    api = wait.get("api") or {}
    if not isinstance(api, Mapping) or api.get("ttft_s") is None:
        return None
    return {"ttft_s": api.get("ttft_s"), "url": api.get("url")}


def bench_summary(report: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The bench report's few figures a ledger row keeps: valid, decode and prefill tokens/s at c1, the run."""
    if not report:
        return None
    throughput = report.get("throughput")
    rows = [r for r in throughput if isinstance(r, Mapping)] if isinstance(throughput, list) else []

    def number(row: Mapping[str, Any], key: str) -> float:
        # The raw outputs came from a node: a count that is not a number sorts as 0, and new_record leaves it out.
        value = row.get(key)
        return value if is_number(value) else 0

    single = sorted((r for r in rows if number(r, "concurrency") == 1), key=lambda r: number(r, "depth"))
    first = single[0] if single else (rows[0] if rows else {})
    problems = report.get("problems")
    return {"valid": bool(report.get("valid", True)), "tg_tps": first.get("tg_tps"), "pp_tps": first.get("pp_tps"),
            "depth": first.get("depth"), "concurrency": first.get("concurrency"), "ttft_ms": first.get("ttft_ms"),
            "problems": [str(p) for p in problems[:5]] if isinstance(problems, list) else []}
