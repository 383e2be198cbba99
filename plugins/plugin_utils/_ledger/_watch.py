# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The watch's decisions: is the lane wedged, may it be restarted now, and what goes into the ledger.

One job: decide, from the streamed probes, the floors the lane's own figures set, the failure
signatures on its ranks and the restarts the ledger already holds. A lane whose API answers but
whose tokens stop (a wedge) is restarted in the engine's order within a budget (by default 3
restarts in 6 hours, each one after a back-off that doubles); a cause a restart cannot fix (the
KV budget, a missing kernel: a known signature whose fix is a change of the lane) is reported and
not restarted; a spent budget is reported once and the lane is left for a person.

The floors tell a healthy lane from a slow one, never a slow one from a wedged one: any client
can load a lane (the API key does not guard its throughput) until first tokens and rates miss
them, and a restart would not make a saturated lane faster. A lane is wedged only when it makes no
progress: no probe got a token that kept coming within its deadline, and the engine's generated-
token counter (when the probes read it) did not advance. A lane that misses the floors while
making progress is ``slow``: reported once, never restarted.

Pure: no I/O, no Ansible imports; the clock is passed in.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _signatures as sigs
from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import RankLog
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._record import LedgerRecord
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger._types import is_number

# Signatures whose fix is a change of the lane, the image or the node: a restart boots into the same wall.
RESTART_CANNOT_FIX = frozenset({
    "kv_budget_refused", "kv_budget_refused_cpu", "sglang_kv_pool_too_small", "memory_unbalanced",
    "tokenizer_needs_mistral_mode", "unknown_engine_flag", "image_missing", "image_wrong_arch",
    "image_not_unpacked", "entrypoint_not_found", "ulimit_refused", "shm_too_small",
    "trtllm_fmha_unsupported_arch", "flashinfer_sparse_mla_refused", "fusedmoe_g1_scale_c",
    "python_headers_missing", "inductor_cpp_compile_failed", "router_bad_argument",
})
# The watch's outcomes: healthy, slow (serves, under the floors) and healed end well (exit 0); the others fail
# the run (exit 2).
OUTCOMES = ("healthy", "slow", "probe-failed", "restarted", "healed", "restart-failed", "not-restartable",
            "backing-off", "gave-up")
WELL = ("healthy", "slow", "healed")
# Reports a timer repeats: each is recorded once, until the lane's next different record.
REPEATED = ("slow", "gave-up", "backing-off", "not-restartable")
# A stream that stopped ends after a whole deadline without a token (the probe's read timeout is its
# deadline); one still flowing when the deadline came ends one token gap after its last token. The
# margin is for the last token's time when it is derived from the rounded rate.
STALL_FRACTION = 0.9


@dataclass(frozen=True)
class Budget:
    """At most ``max_restarts`` in any ``window_s``; after a restart the next waits ``backoff_s`` x 2^(n-1)."""

    max_restarts: int = 3
    window_s: float = 6 * 3600.0
    backoff_s: float = 300.0


@dataclass
class BudgetState:
    allowed: bool
    used: int
    left: int
    # When the next restart is allowed (epoch), None when one is allowed now.
    next_at: float | None = None
    exhausted: bool = False
    reason: str = ""


# What a restart that happened leaves in the ledger: its result, recorded once the ranks were stopped and
# started again (healed, or still not serving). Ledgers written before this also hold a "restarted" line
# recorded when the restart was decided, followed by its result: one restart, counted once.
RESTART_RESULTS = ("healed", "restart-failed")


def restart_times(records: Sequence[LedgerRecord]) -> list[float]:
    """The epochs of the watch's restarts in the ledger (a deploy is not counted: a person did it)."""
    times: list[float] = []
    decided = False
    for r in records:
        if r.event != "watch":
            continue
        if r.outcome == "restarted":
            times.append(r.epoch)
            decided = True
        elif r.outcome in RESTART_RESULTS:
            if not decided:
                times.append(r.epoch)
            decided = False
    return times


def budget_state(restarts: Sequence[float], now: float, budget: Budget) -> BudgetState:
    """Whether a restart is allowed at ``now`` after the ``restarts`` (epochs) already made."""
    recent = sorted(t for t in restarts if 0 <= now - t < budget.window_s)
    used = len(recent)
    left = max(0, budget.max_restarts - used)
    hours = budget.window_s / 3600.0
    if budget.max_restarts <= 0:
        return BudgetState(False, used, 0, None, True, "the watch may not restart this lane (a budget of 0 restarts)")
    if used >= budget.max_restarts:
        frees = recent[used - budget.max_restarts] + budget.window_s
        return BudgetState(False, used, 0, frees, True,
                           f"{used} restarts in the last {hours:g} h, the budget is {budget.max_restarts}")
    if recent:
        wait = budget.backoff_s * 2 ** (used - 1)
        next_at = recent[-1] + wait
        if now < next_at:
            return BudgetState(False, used, left, next_at, False,
                               f"back-off: restart {used + 1} waits {wait:g} s after restart {used} "
                               f"({next_at - now:.0f} s to go)")
    return BudgetState(True, used, left, None, False, f"restart {used + 1} of {budget.max_restarts} in {hours:g} h")


@dataclass
class Floors:
    """What a healthy probe must do: a first token within ``ttft_max_s``, at least ``tps_min`` tokens/s."""

    ttft_max_s: float
    tps_min: float | None
    source: str


def floors(records: Sequence[LedgerRecord], ttft_factor: float = 10.0, ttft_min_s: float = 5.0,
           tps_fraction: float = 0.1, ttft_max_s: float | None = None, tps_min: float | None = None) -> Floors:
    """The floors from the lane's own figures: its last ready probe's first token and its last bench's decode rate.

    The time to first token may be ``ttft_factor`` times the ready probe's (never under
    ``ttft_min_s``); the rate must reach ``tps_fraction`` of the bench's single-stream decode rate.
    Given values win.
    """
    sources = []
    if ttft_max_s is None:
        # Numbers only: a record written before the ledger checked types may hold anything.
        ready = [r for r in records if r.event in ("deploy", "watch") and is_number((r.probe or {}).get("ttft_s"))
                 and r.outcome in ("ready", "healed")]
        if ready:
            ttft = float(ready[-1].probe["ttft_s"])  # type: ignore[index]
            ttft_max_s = max(ttft_min_s, round(ttft * ttft_factor, 2))
            sources.append(f"first token {ttft:g} s at record {ready[-1].boot} x {ttft_factor:g}")
        else:
            ttft_max_s = max(ttft_min_s, 30.0)
            sources.append("no ready probe in the ledger: first token within 30 s")
    else:
        sources.append("first token floor given")
    if tps_min is None:
        benches = [r for r in records if r.event == "bench" and is_number((r.bench or {}).get("tg_tps"))
                   and (r.bench or {}).get("tg_tps") and (r.bench or {}).get("valid", True)]
        if benches:
            rate = float(benches[-1].bench["tg_tps"])  # type: ignore[index]
            tps_min = round(rate * tps_fraction, 3)
            sources.append(f"decode {rate:g} tok/s at bench record {benches[-1].boot} x {tps_fraction:g}")
    else:
        sources.append("tokens/s floor given")
    return Floors(float(ttft_max_s), tps_min, "; ".join(sources))


def judge(probe: Mapping[str, Any], floor: Floors) -> tuple[bool, str]:
    """(healthy, why not) of one streamed probe (``ok``, ``ttft_s``, ``tps``, ``error``) against the floors.

    Not healthy is not wedged: :func:`verdict` tells a slow lane from one that makes no progress.
    """
    if not probe.get("ok"):
        return False, str(probe.get("error") or "the streamed completion did not finish")
    ttft = probe.get("ttft_s")
    if not is_number(ttft) or ttft > floor.ttft_max_s:
        return False, f"first token after {ttft} s, the floor is {floor.ttft_max_s:g} s ({floor.source})"
    tps = probe.get("tps")
    if floor.tps_min is not None and is_number(tps) and tps < floor.tps_min:
        return False, f"{float(tps):.2f} tokens/s, the floor is {floor.tps_min:g} ({floor.source})"
    return True, ""


def _silence_s(probe: Mapping[str, Any]) -> float | None:
    """Seconds from the probe's last token to its end (None: its figures do not say); the last token's time is
    the probe's ``last_token_s`` when it returns one, else derived from its first token and rate."""
    total, ttft, tokens, tps = (probe.get(k) for k in ("total_s", "ttft_s", "tokens", "tps"))
    last = probe.get("last_token_s")
    if not is_number(last):
        if not is_number(ttft):
            return None
        # The probe times its first token and its rate after it: the last token came (tokens - 1) / rate later.
        last = ttft + ((tokens - 1) / tps if is_number(tokens) and tokens > 1 and is_number(tps) and tps > 0 else 0.0)
    return total - last if is_number(total) else None


def stream_progress(probe: Mapping[str, Any]) -> str:
    """What one probe's stream shows of progress, in words; '' when it shows none.

    Tokens that came, however late the first and however slow the rate, are progress: a loaded
    lane streams slowly. No token within the deadline is none, and so is a stream whose tokens
    stopped: after its last token a whole deadline passed without one (a wedge mid-stream).
    """
    tokens = probe.get("tokens")
    if not is_number(tokens) or tokens <= 0:
        return ""
    ttft = probe.get("ttft_s")
    first = f", the first after {ttft:g} s" if is_number(ttft) else ""
    if probe.get("ok"):
        return f"{tokens:g} tokens streamed{first}"
    silence, deadline = _silence_s(probe), probe.get("deadline_s")
    if silence is not None and is_number(deadline) and silence >= STALL_FRACTION * deadline:
        return ""
    return f"{tokens:g} tokens streamed{first}, still coming at the deadline"


def _count(value: Any) -> float:
    return float(value) if is_number(value) and value > 0 else 0.0


def engine_progress(probes: Sequence[Mapping[str, Any]]) -> str:
    """The engine's progress over the probes from its counter (``engine_tokens_before`` / ``_after`` of each
    probe), in words; '' when the counter was not read or did not advance beyond the probes' own tokens.

    A probe's own tokens are the most it may have cost the engine: its ``max_tokens`` when it says, else
    the tokens it counted. The probe counts stream chunks, and a chunk can carry several tokens
    (speculative decoding), so a stream that stopped must not pass for another client's progress.
    """
    readings = [p.get(k) for p in probes for k in ("engine_tokens_before", "engine_tokens_after")]
    numbers = [float(v) for v in readings if is_number(v)]
    # A counter that went down was reset by an engine restart: only the rises count.
    advance = sum(max(0.0, b - a) for a, b in zip(numbers, numbers[1:], strict=False))
    own = sum(max(_count(p.get("tokens")), _count(p.get("max_tokens"))) for p in probes)
    if len(numbers) < 2 or advance <= own:
        return ""
    return f"the engine generated {advance - own:g} tokens for other requests during the probes"


@dataclass
class Verdict:
    """The run's probes together: ``healthy`` (one passed the floors), ``slow`` (none did, but the lane made
    progress: ``progress`` says which), or ``wedged`` (no progress at all). ``reason``: why not healthy."""

    state: str
    reason: str = ""
    progress: str = ""


def verdict(probes: Sequence[Mapping[str, Any]], floor: Floors) -> Verdict:
    """Healthy when a probe passes the floors; else slow when any probe streamed tokens that kept coming or the
    engine's counter advanced; else wedged: only a lane that makes no progress is ever restarted."""
    reason = ""
    for probe in probes:
        healthy, why = judge(probe, floor)
        if healthy:
            return Verdict("healthy")
        reason = why
    progress = "; ".join(p for p in (*(stream_progress(p) for p in probes), engine_progress(probes)) if p)
    return Verdict("slow" if progress else "wedged", reason, progress)


@dataclass
class Decision:
    outcome: str
    restart: bool = False
    reason: str = ""
    signatures: list[str] = field(default_factory=list)
    budget: BudgetState | None = None


def unfixable(signatures: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The signatures on the lane's ranks that a restart cannot fix."""
    return [s for s in signatures if s.get("id") in RESTART_CANNOT_FIX]


PLAN_HASH_LABELS = ("io.lanekit.plan-hash", "lanekit.plan-hash")


def not_deployed_here(plan: Mapping[str, Any], nodes: Mapping[str, Any], probe: Mapping[str, Any]) -> str:
    """Why the watch must leave this lane to a person instead of restarting it ('' when it may restart it).

    The watch heals only what a deploy put there: every rank of this plan on a node it reaches, the
    containers labelled with this plan's hash, an API that is the engine's. ``nodes`` maps each lane host
    to its ``rank_status`` result (``unreachable`` when the host did not answer); ``probe`` is the last
    probe (``unreachable`` when the head did not answer it). A lane never deployed, deployed with
    another plan, on a node that does not answer, or an address where something else answers 404 is
    not restarted: the restart would fail, or replace what is there, and its record would say it healed.
    """
    if probe.get("unreachable"):
        return (f"the lane's head {(plan.get('api') or {}).get('host', '?')} did not answer the probe "
                f"({str(probe.get('reason') or probe.get('error') or 'unreachable')[:200]}); the watch restarts a lane "
                "only on nodes it reaches")
    unreachable = sorted(host for host, res in nodes.items() if isinstance(res, Mapping) and res.get("unreachable"))
    if unreachable:
        return (f"{', '.join(unreachable)} did not answer (unreachable); the watch restarts a lane only when it "
                "reaches every node of it")
    said = f"{probe.get('error') or ''} {probe.get('reason') or ''}"
    if "HTTP 404" in said:
        return (f"the API at {probe.get('url') or (plan.get('api') or {}).get('url', '?')} answers HTTP 404: it is "
                "not this lane's engine (a lane not deployed there, or another program, or -e watch_api_address "
                "pointing elsewhere)")
    missing, other, read = [], [], 0
    for host, res in sorted(nodes.items()):
        if not isinstance(res, Mapping) or res.get("skipped"):
            continue
        for entry in res.get("containers") or []:
            if not isinstance(entry, Mapping):
                continue
            read += 1
            if not entry.get("exists"):
                missing.append(f"{entry.get('name')} on {host}")
                continue
            labels = ((entry.get("inspect") or {}).get("Config") or {}).get("Labels") or {}
            runs = next((labels[k] for k in PLAN_HASH_LABELS if labels.get(k)), None)
            if runs and runs != plan.get("plan_hash"):
                other.append(f"{entry.get('name')} on {host} runs plan {str(runs)[:12]}")
    if missing:
        return (f"the lane is not deployed: {', '.join(missing[:4])}{' and more' if len(missing) > 4 else ''} "
                f"{'does' if len(missing) == 1 else 'do'} not exist; the watch restarts only what a deploy started "
                "(ansible-playbook lanekit.serving.deploy_lane deploys it)")
    if other:
        return (f"the ranks run another plan than {str(plan.get('plan_hash'))[:12]} ({', '.join(other[:3])}); the "
                "watch restarts only the plan it was given: deploy this plan, or watch with the lane's own settings")
    if not read:
        return "no rank of the lane could be read on its nodes; the watch restarts only ranks it has seen"
    return ""


def decide(healthy: bool, signatures: Sequence[Mapping[str, Any]], state: BudgetState,
           progress: str = "", not_here: str = "") -> Decision:
    """After the probes: healthy; slow (``progress``: the lane makes progress under the floors, never restarted);
    restart; or report (a lane the watch did not deploy: ``not_here``; a cause a restart cannot fix, a back-off,
    a spent budget)."""
    if healthy:
        return Decision("healthy")
    ids = [str(s.get("id")) for s in signatures]
    if not_here:
        return Decision("not-restartable", reason=not_here, signatures=ids)
    if progress:
        return Decision("slow", reason=f"it makes progress ({progress}): a restart would not make a loaded lane "
                                       "faster", signatures=ids)
    blocked = unfixable(signatures)
    if blocked:
        first = blocked[0]
        return Decision("not-restartable", reason=f"{first.get('id')}: {first.get('title')}; a restart boots into "
                                                  f"the same failure; fix: {first.get('fix')}", signatures=ids)
    if not state.allowed:
        return Decision("gave-up" if state.exhausted else "backing-off", reason=state.reason, signatures=ids,
                        budget=state)
    return Decision("restarted", restart=True, reason=state.reason, signatures=ids, budget=state)


def worth_recording(records: Sequence[LedgerRecord], outcome: str) -> bool:
    """Whether this outcome goes into the ledger: a timer repeats a verdict, the ledger keeps it once.

    A healthy probe is not recorded; a slow lane, a give-up or a back-off is recorded when the
    watch's previous record said something else (a restart, a heal, a deploy since resets it).
    """
    if outcome == "healthy":
        return False
    if outcome not in REPEATED:
        return True
    last = records[-1] if records else None
    return last is None or last.event != "watch" or last.outcome != outcome


def signatures_of(nodes: Sequence[Any], engine: str | None) -> list[dict[str, Any]]:
    """The known failure signatures in the rank logs the nodes returned (``rank_status`` results), roots first."""
    found: dict[int, dict[str, str]] = {}
    for node in nodes:
        for entry in (node or {}).get("containers") or [] if isinstance(node, Mapping) else []:
            if not isinstance(entry, Mapping) or entry.get("rank") is None or not entry.get("exists"):
                continue
            log = RankLog(engine, str(entry.get("role") or "worker"))
            log.feed_docker(entry.get("lines") or [])
            found[int(entry["rank"])] = dict(log.signatures)
    return [m.to_dict() for m in sigs.collect(found)]
