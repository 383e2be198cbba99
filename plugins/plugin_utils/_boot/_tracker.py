# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The lane's boot, poll after poll: keep waiting, ready, or failed.

One job: decide. :class:`LaneTracker` takes every rank's :class:`~._rankstatus.RankStatus` at each
poll, infers what only the whole lane shows (a loaded rank is *waiting at the barrier* until every
rank has loaded), fingerprints the progress, and returns a :class:`Verdict`: waiting, ready, or
failed (exited, fatal line, stall, budget, unhealthy API) with the signatures and the ranks to
blame. The time left comes from ``_estimate``, the status line of each poll from ``_statusline``;
the figures (:class:`~._bootconfig.BootConfig`, imported from here by the callers) come from the
plan, which publishes them.

Pure: no I/O, no Ansible imports; the controller's clock is passed in.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _signatures as sigs
from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import ORDER, PHASES
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines as engines
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _estimate as estimate
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _statusline as statusline
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._bootconfig import BootConfig
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._estimate import phase_order
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rankstatus import (
    NOT_STARTED,
    RankStatus,
    exit_order,
    fabric_ips,
    has_own_cause,
)
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._report import (
    LONG,
    fmt_duration,
    fmt_ranks,
)

WAITING = "waiting"
READY = "ready"
FAILED = "failed"
# Extra polls a boot may spend before it blames an exit that shows no cause of its own (see
# LaneTracker._reread_before_blaming): one poll interval at most, once per boot.
EXIT_REREADS = 1


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


def readiness(engine: str | None, statuses: Mapping[int, RankStatus], chat_required: bool) -> tuple[bool, str]:
    """(all probes pass, what is missing) from the head's API probes and the workers' health."""
    heads = [s for s in statuses.values() if s.is_head] or [statuses[min(statuses)]]
    api = heads[0].probes.get("api") or {}
    if not api:
        return False, "API not probed yet"
    if not api.get("accepts"):
        return False, "API port refuses connections"
    if api.get("health_status") != 200:
        return False, f"/health answered {api.get('health_status')}"
    if api.get("key_withheld"):
        # Another process holds the API port: the probe's sentence names it and the fix.
        return False, str(api.get("error") or "the API port is not the head container's; the key was not sent")
    if not api.get("model_listed"):
        return False, "/v1/models does not list the served model"
    if chat_required and not api.get("chat_ok"):
        return False, "no streamed first token yet"
    every_worker = engine in engines.ENGINES and engines.get(engine).workers_serve_health
    # Workers with an HTTP server of their own (SGLang's; data-parallel engines, P/D pool heads) are
    # health-probed; each must answer 200.
    waiting = sorted(
        s.rank for s in statuses.values()
        if not s.is_head and (every_worker or "health" in s.probes)
        and (s.probes.get("health") or {}).get("status") != 200
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
        self.exit_rereads = 0

    # Lane-level inference: what a single rank's log cannot say.
    def infer(self, statuses: Mapping[int, RankStatus]) -> dict[int, RankStatus]:
        out = {rank: dataclasses.replace(status) for rank, status in statuses.items()}
        running = [s for s in out.values() if s.running]
        for status in running:
            # A head whose API answers /health and lists the model is up, whatever its log says.
            api = status.probes.get("api") or {}
            if status.is_head and api.get("health_status") == 200 and api.get("model_listed"):
                status.phase = "ready"
        all_loaded = bool(running) and len(running) == len(out) and all(
            phase_order(s) >= ORDER["barrier"] for s in running)
        head_up = any(s.is_head and s.phase == "ready" for s in running)
        # Where workers serve no HTTP of their own, the head's API is their readiness too.
        workers_follow_head = self.engine in engines.ENGINES and not engines.get(self.engine).workers_serve_health
        for status in running:
            if all_loaded and status.phase == "barrier":
                status.phase = "kv_profile"
            if head_up and workers_follow_head and not status.is_head and phase_order(status) >= ORDER["barrier"]:
                status.phase = "ready"
            health = status.probes.get("health") or {}
            if health.get("status") == 200 and not status.is_head:
                status.phase = "ready"
        return out

    @staticmethod
    def _rank_fingerprint(status: RankStatus) -> tuple:
        api = status.probes.get("api") or {}
        health = status.probes.get("health") or {}
        return (
            status.state,
            status.phase,
            tuple(status.shards or ()),
            tuple(status.capture or ()),
            tuple(sorted(status.events_age_s.keys())),
            bool(api.get("accepts")), api.get("health_status"), bool(api.get("model_listed")),
            bool(api.get("chat_ok")), health.get("status"),
        )

    # --- decisions ---------------------------------------------------------------------------

    def _signature_matches(self, statuses: Mapping[int, RankStatus]) -> list[sigs.SignatureMatch]:
        return sigs.collect({rank: s.signatures for rank, s in statuses.items()}, fabric_ips(statuses))

    def _laggards(self, statuses: Mapping[int, RankStatus]) -> tuple[list[int], str]:
        running = {r: s for r, s in statuses.items() if s.running}
        if not running:
            return [], ""
        low = min(phase_order(s) for s in running.values())
        high = max(phase_order(s) for s in running.values())
        behind = sorted(r for r, s in running.items() if phase_order(s) == low)
        if low == high:
            stamps = {r: self.rank_change.get(r, 0.0) for r in running}
            oldest = min(stamps.values())
            stale = sorted(r for r, t in stamps.items() if t == oldest)
            if len(stale) < len(running):
                behind = stale
            return behind, f"every rank is at {LONG[PHASES[low]]}"
        return behind, f"{fmt_ranks(behind)} at {LONG[PHASES[low]]} while others reached {LONG[PHASES[high]]}"

    def _never_joined(self, statuses: Mapping[int, RankStatus]) -> sigs.SignatureMatch | None:
        running = {r: s for r, s in statuses.items() if s.running}
        if not running:
            return None
        before = {r for r, s in running.items() if phase_order(s) <= ORDER["rendezvous"]}
        if not before:
            return None
        joined = estimate.joined(statuses)
        if joined is not None and joined[1]:
            missing = joined[1]
            return sigs.derived("rank_never_joined", missing,
                                f"{fmt_ranks(missing)} has no connection to the head's rendezvous port while "
                                f"{len(joined[0])} of {len(statuses)} ranks joined")
        if len(before) < len(running):
            return sigs.derived("rank_never_joined", sorted(before),
                                f"{fmt_ranks(sorted(before))} never got past the rendezvous while the others did")
        silent = sorted(r for r in before if running[r].phase == "started")
        if silent and len(silent) < len(running):
            return sigs.derived("rank_never_joined", silent,
                                f"{fmt_ranks(silent)} never reached the rendezvous; the other ranks wait there")
        return sigs.derived("rank_never_joined", sorted(before), "no rank got past the rendezvous")

    def _fail(self, sid: str | None, statuses: Mapping[int, RankStatus], ranks: Sequence[int], detail: str,
              line: str, extra: Sequence[sigs.SignatureMatch | None] = ()) -> Verdict:
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
        blaming = [m for m in rest if m.blamed]
        if roots:
            culprits = sorted(set(roots[0].blamed or roots[0].ranks))
        elif blaming and not any(statuses[r].running is False and has_own_cause(statuses[r])
                                 for r in ranks if r in statuses):
            # No root line, but an echo names the rank it lost (a peer's address, missing ranks):
            # that rank, unless the rank the loop names shows a cause of its own (killed, OOM).
            culprits = sorted(set(blaming[0].blamed))
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
        return Verdict(FAILED, line, ordered, culprits, summary, elapsed_s=estimate.elapsed(statuses))

    def _silent_hosts(self, statuses: Mapping[int, RankStatus]) -> tuple[list[int], str]:
        unknown = sorted(r for r, s in statuses.items() if s.state == "unknown")
        if not unknown:
            return [], ""
        errors = "; ".join(f"r{r} ({statuses[r].host or '?'}): {statuses[r].gather_error or 'no report'}"
                           for r in unknown)
        return unknown, f"no status from {errors}"

    def _reread_before_blaming(self, statuses: Mapping[int, RankStatus], dead: Sequence[int]) -> bool:
        """Whether to read the lane once more before judging an exit.

        A rank that loses a peer exits too, often within a second, and the nodes are read in
        parallel: under load a poll can catch those echoes exited while the rank that caused
        them has not yet been read going down (its fatal line comes on the next poll). When no
        exited rank shows a cause of its own (a root failure line, OOM, a signal:
        :func:`~._rankstatus.has_own_cause`) and another rank still runs, one more poll (and only
        one per boot) reads the rank that may be going down, so the verdict blames the cause
        rather than its first echo.
        """
        if self.exit_rereads >= EXIT_REREADS:
            return False
        if any(has_own_cause(statuses[r]) for r in dead):
            return False
        # Only an exit since the previous poll: an older one left the other ranks a whole poll
        # to show their cause already.
        ages = [statuses[r].finished_age_s for r in dead]
        since_last = self.poll_times[-1] - self.poll_times[-2] if len(self.poll_times) > 1 else self.cfg.poll_s
        if any(age is None or age >= since_last for age in ages):
            return False
        return any(s.running for s in statuses.values())

    def _exited(self, statuses: Mapping[int, RankStatus], dead: list[int], line: str) -> Verdict:
        # The rank that exited first is the likeliest cause; the others often follow it (a rank with
        # a cause of its own goes before the echoes that exited within seconds of it).
        order = exit_order(statuses, dead, clocks=False)
        oom = [r for r in order if statuses[r].oom_killed]
        details = ", ".join(
            f"r{r} {statuses[r].state} with code {statuses[r].exit_code}"
            f" during {LONG.get(statuses[r].phase, '?')}"
            for r in order
        )
        if not self._signature_matches(statuses):
            lasts = "; ".join(f"r{r}: {statuses[r].last_exception}" for r in order if statuses[r].last_exception)
            if lasts:
                details += f" (last error: {lasts})"
        verdict = self._fail("oom_killed" if oom else "container_exited", statuses, oom or order[:1], details, line)
        age = statuses[order[0]].finished_age_s
        verdict.noticed_after_s = age
        if age is not None:
            # Polls that began after the exit (this one included): ages are node-clock
            # differences, so no clock needs to agree with the controller's.
            exited = self.poll_times[-1] - age
            verdict.polls_after_exit = sum(1 for t in self.poll_times if t >= exited)
        return verdict

    def _behind(self, statuses: Mapping[int, RankStatus]) -> tuple[list[int], str, bool]:
        """(ranks to blame for a slow boot, why, whether they are silent hosts)."""
        behind, why = self._laggards(statuses)
        silent, why_silent = self._silent_hosts(statuses)
        if silent:
            return silent, why_silent, True
        return behind, why, False

    def _settled_for(self, statuses: Mapping[int, RankStatus]) -> float:
        """Seconds the lane counts as healthy already when its first healthy poll is this one.

        A lane found serving on the very first look, every rank running for longer than the
        stability window, was stable before this run: a re-run (a health check) does not wait the
        window again. Anything less (a later poll, a rank that started recently) waits it in full.
        """
        uptimes = [s.uptime_s for s in statuses.values()]
        if self.polls != 1 or not uptimes or any(u is None or u < self.cfg.stability_s for u in uptimes):
            return 0.0
        return min(u for u in uptimes if u is not None)  # none is None here; the filter is for the type

    def update(self, now: float, raw: Mapping[int, RankStatus]) -> Verdict:
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
        elapsed = estimate.elapsed(statuses)

        ok, missing_probe = readiness(self.engine, statuses, self.cfg.chat_probe)
        note = ""
        if ok:
            if self.first_ok_poll is None:
                self.first_ok_poll = self.polls
            if self.stable_since is None:
                self.stable_since = now - self._settled_for(statuses)
            self.was_ready_once = True
            note = f"healthy {fmt_duration(now - self.stable_since)}/{fmt_duration(self.cfg.stability_s)}"
        elif self.stable_since is not None:
            self.flaps += 1
            self.stable_since = None
            note = f"unhealthy again ({missing_probe}), flap {self.flaps}/{self.cfg.max_flaps}"
        elif any(s.phase == "ready" and s.is_head for s in statuses.values()):
            note = missing_probe

        line = statusline.render(self.lane, self.cfg, statuses, now=time.time(), quiet_s=quiet, note=note)
        self.history.append(line)

        missing = sorted(r for r, s in statuses.items() if s.state in NOT_STARTED)
        if missing:
            return self._fail("container_missing", statuses, missing,
                              f"{fmt_ranks(missing)} has no started container", line)
        dead = sorted(r for r, s in statuses.items() if not s.running and s.state != "unknown")
        if dead and self._reread_before_blaming(statuses, dead):
            self.exit_rereads += 1
            return Verdict(WAITING, line, [], [], "", elapsed_s=elapsed)
        if dead:
            return self._exited(statuses, dead, line)
        fatal = [m for m in self._signature_matches(statuses) if m.signature.fatal]
        if fatal:
            blamed = f"; the line blames {fmt_ranks(fatal[0].blamed)}" if fatal[0].blamed else ""
            return self._fail(None, statuses, fatal[0].blamed or fatal[0].ranks,
                              f"{fatal[0].signature.title} on {fmt_ranks(fatal[0].ranks)}"
                              f" (the rank printed a fatal error and is going down{blamed})", line)
        if ok and self.stable_since is not None and now - self.stable_since >= self.cfg.stability_s:
            verdict = Verdict(READY, line, [], [], "ready", eta_s=0.0, elapsed_s=elapsed)
            verdict.already_serving = self.first_ok_poll == 1
            return verdict
        if self.flaps >= self.cfg.max_flaps:
            head = [r for r, s in statuses.items() if s.is_head] or [min(statuses)]
            return self._fail("api_unhealthy", statuses, head,
                              f"readiness failed {self.flaps} times after passing ({missing_probe})", line)
        if ok:
            # Serving: the budget and the stall clock only apply to a boot.
            left, _unused = estimate.eta(self.cfg, statuses)
            return Verdict(WAITING, line, [], [], "", eta_s=left, elapsed_s=elapsed)
        if elapsed is not None and elapsed >= self.cfg.budget_s:
            behind, why, _silent = self._behind(statuses)
            return self._fail("budget_exhausted", statuses, behind,
                              f"{fmt_duration(elapsed)} since the first rank started; {why}", line,
                              [self._never_joined(statuses)])
        if quiet >= self.cfg.stall_s:
            behind, why, silent = self._behind(statuses)
            never = self._never_joined(statuses)
            if never is not None and len(never.ranks) < len(statuses) and not silent:
                behind, why = never.ranks, never.detail
            return self._fail("stalled", statuses, behind,
                              f"no progress for {fmt_duration(quiet)}; {why}", line, [never])
        left, _unused = estimate.eta(self.cfg, statuses)
        return Verdict(WAITING, line, [], [], "", eta_s=left, elapsed_s=elapsed)
