# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Known failure signatures of multi-node engine boots.

Each signature maps what a rank prints (or what docker reports in the container state) to an
id, the cause in one sentence and the fix in one sentence. The table starts with the boot
ledger of the Mistral Large 4 bring-up (every boot that died there has its line here) and adds
the common multi-node failures: a rank that never joined the rendezvous, NCCL timeouts and
errors, engine timeouts, memory.

Signatures are of two kinds:

* ``root``: the line names what went wrong first (a refused KV budget, a missing attribute in a
  kernel path). These are listed first in a report.
* ``consequence``: the line is usually what the *other* ranks print after one rank died or
  stalled (an NCCL watchdog timeout, a broken socket). Still reported, after the roots.

A few signatures are *derived* (no pattern): the wait loop raises them from the ranks' phases
(a rank that never joined, a stall, an exhausted budget, an exit without a known line) and takes
their cause and fix text from this same table, so all the advice lives in one place.

One job: the scanner. It reads the tables (``_signatures_ledger``, ``_signatures_fabric``,
``_signatures_router``, ``_signatures_derived``; the record is ``_signature.Signature``), matches
a rank's lines incrementally, groups per-rank findings into matches and describes them.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ansible_collections.lanekit.serving.plugins.module_utils._boot._signature import ROOT, Signature
from ansible_collections.lanekit.serving.plugins.module_utils._boot._signatures_derived import DERIVED
from ansible_collections.lanekit.serving.plugins.module_utils._boot._signatures_fabric import FABRIC
from ansible_collections.lanekit.serving.plugins.module_utils._boot._signatures_ledger import LEDGER
from ansible_collections.lanekit.serving.plugins.module_utils._boot._signatures_router import ROUTER
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines

# Evidence lines are quoted in reports; keep them readable.
_EVIDENCE_MAX = 300

# One table, in report order: a report lists roots first, then in this order. The tables are
# data files of their own (``_signatures_<table>.py``); this file is the scanner that reads them.
SIGNATURES: tuple[Signature, ...] = LEDGER + FABRIC + ROUTER + DERIVED

BY_ID: dict[str, Signature] = {sig.id: sig for sig in SIGNATURES}
_ORDER: dict[str, int] = {sig.id: i for i, sig in enumerate(SIGNATURES)}
_PATTERNED: tuple[Signature, ...] = tuple(sig for sig in SIGNATURES if not sig.derived)

# A python exception line, used to quote the last error of an unknown exit.
_EXCEPTION_LINE = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Interrupt)|AssertionError)\b: \S")


def unknown_engine_scopes(signatures: Iterable[Signature] = SIGNATURES) -> list[str]:
    """'<id>: <engine>' for each engine a signature is scoped to that the engine table does not know."""
    return [f"{sig.id}: {name}" for sig in signatures for name in sig.engines if name not in _engines.ENGINES]


def get(signature_id: str) -> Signature:
    """The signature with this id (KeyError for an unknown id: a programming error)."""
    return BY_ID[signature_id]


def _evidence(line: str) -> str:
    line = line.strip()
    if len(line) > _EVIDENCE_MAX:
        return line[: _EVIDENCE_MAX - 1] + "…"
    return line


class LineScanner:
    """Incremental matcher for one rank's log: feed lines as they arrive, keep what matched.

    Each signature is recorded once per rank, with its first evidence line. The scanner keeps a
    small window of previous lines for signatures that need context (the same failure spread
    over a traceback).
    """

    def __init__(self, engine: str | None = None, role: str | None = None) -> None:
        self.engine = engine
        self.role = role
        self.found: dict[str, str] = {}
        self.last_exception: str = ""
        self._window: list[str] = []
        # Signatures no longer recorded in this log (their ``not_after`` line was seen).
        self._stopped: set[str] = set()
        self._window_max = max((s.context_lines for s in _PATTERNED if s.context), default=0) + 1
        self._active = tuple(
            s for s in _PATTERNED
            if (not s.engines or engine is None or engine in s.engines)
            and (not s.roles or role in s.roles)
        )

    def feed(self, lines: Iterable[str]) -> list[str]:
        """Scan new lines; return the ids of signatures found for the first time."""
        new: list[str] = []
        for line in lines:
            self._window.append(line)
            if len(self._window) > self._window_max:
                del self._window[0]
            if _EXCEPTION_LINE.search(line):
                self.last_exception = _evidence(line)
            on_line: list[Signature] = []
            for sig in self._active:
                if sig.not_after is not None and sig.id not in self._stopped and sig.not_after.search(line):
                    self._stopped.add(sig.id)
                if sig.pattern is None or sig.id in self._stopped or not sig.pattern.search(line):
                    continue
                if sig.context is not None:
                    window = self._window[-(sig.context_lines + 1):]
                    if not any(sig.context.search(prev) for prev in window):
                        continue
                on_line.append(sig)
            superseded = {other for sig in on_line for other in sig.supersedes}
            for sig in on_line:
                if sig.id in self.found or sig.id in superseded:
                    continue
                self.found[sig.id] = _evidence(line)
                new.append(sig.id)
        return new


def scan_text(text: str, engine: str | None = None, role: str | None = None) -> dict[str, str]:
    """Signature id -> first evidence line for one blob of text (one rank's log, an error)."""
    scanner = LineScanner(engine, role)
    scanner.feed(text.splitlines())
    return dict(scanner.found)


@dataclass
class SignatureMatch:
    """One signature seen on one or more ranks."""

    signature: Signature
    ranks: list[int] = field(default_factory=list)
    evidence: str = ""
    detail: str = ""
    blamed: list[int] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.signature.id

    def to_dict(self) -> dict:
        return {
            "id": self.signature.id,
            "title": self.signature.title,
            "kind": self.signature.kind,
            "ranks": list(self.ranks),
            "blamed": list(self.blamed),
            "evidence": self.evidence,
            "detail": self.detail,
            "cause": self.signature.cause,
            "fix": self.signature.fix,
        }


def collect(found_by_rank: Mapping[int, Mapping[str, str]],
            ips: Mapping[str, int] | None = None) -> list[SignatureMatch]:
    """Group per-rank findings ({rank: {sig id: evidence}}) into matches, roots first.

    ``ips`` maps the plan's fabric addresses to node ranks: a line that names a peer's address
    (``Signature.blame_ip``) then blames that rank.
    """
    matches: dict[str, SignatureMatch] = {}
    for rank in sorted(found_by_rank):
        for sig_id, evidence in found_by_rank[rank].items():
            match = matches.get(sig_id)
            if match is None:
                match = matches[sig_id] = SignatureMatch(get(sig_id), [], evidence, detail_of(get(sig_id), evidence))
            match.ranks.append(rank)
            for blamed in blamed_ranks(match.signature, evidence, ips):
                if blamed not in match.blamed:
                    match.blamed.append(blamed)
    for match in matches.values():
        match.blamed.sort()
    return sort_matches(matches.values())


def blamed_ranks(sig: Signature, evidence: str, ips: Mapping[str, int] | None = None) -> list[int]:
    """Node ranks a line blames: its 'Missing node ranks: ...', or the rank whose fabric address
    (``ips``: address -> node rank) it names as a peer, if the signature reads any."""
    if not evidence:
        return []
    if sig.blame is not None:
        found = sig.blame.search(evidence)
        if found:
            return [int(x) for x in re.findall(r"\d+", found.group("ranks"))]
    if sig.blame_ip is not None and ips:
        found = sig.blame_ip.search(evidence)
        if found and found.group("ip") in ips:
            return [int(ips[found.group("ip")])]
    return []


def detail_of(sig: Signature, evidence: str) -> str:
    """The signature's detail sentence filled from its evidence line ('' without one)."""
    if sig.detail is None or not evidence:
        return ""
    found = sig.detail.search(evidence)
    if not found:
        return ""
    return sig.detail_text.format(**{k: (v or "").strip() for k, v in found.groupdict().items()})


def sort_matches(matches: Iterable[SignatureMatch]) -> list[SignatureMatch]:
    """Roots before consequences, then table order, then lowest rank."""
    return sorted(
        matches,
        key=lambda m: (m.signature.kind != ROOT, _ORDER[m.signature.id], m.ranks[:1] or [1 << 30]),
    )


def derived(signature_id: str, ranks: Sequence[int], detail: str = "") -> SignatureMatch:
    """A match raised by the wait loop itself (stall, budget, never joined, exit)."""
    return SignatureMatch(get(signature_id), sorted(ranks), "", detail)


def rank_names(ranks: Sequence[int], hosts: Mapping[int, str] | None = None) -> str:
    """'rank 3 (spark-04)' / 'ranks 2 (spark-03), 5 (spark-06)'."""
    hosts = hosts or {}
    parts = [f"{r} ({hosts[r]})" if r in hosts else str(r) for r in ranks]
    if not parts:
        return "no rank"
    return ("rank " if len(parts) == 1 else "ranks ") + ", ".join(parts)


def describe(match: SignatureMatch, hosts: Mapping[int, str] | None = None) -> str:
    """One paragraph: which ranks, what they printed, why, and the fix."""
    sig = match.signature
    head = f"[{sig.id}] {sig.title}"
    if match.ranks:
        head += f": {rank_names(match.ranks, hosts)}"
    parts = [head + "."]
    if match.blamed:
        parts.append(f"The line blames {rank_names(match.blamed, hosts)}.")
    if match.detail:
        parts.append(match.detail.rstrip(".") + ".")
    if match.evidence:
        parts.append(f'Log: "{match.evidence}".')
    parts.append("Cause: " + sig.cause)
    parts.append("Fix: " + sig.fix)
    return " ".join(parts)


def explain_text(text: str, engine: str | None = None) -> list[SignatureMatch]:
    """Matches for a free text (e.g. a docker error message), roots first."""
    found = scan_text(text, engine)
    matches = collect({0: found}) if found else []
    for match in matches:
        match.ranks = []
    return matches
