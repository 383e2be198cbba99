# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The record of one known failure signature: how to recognise a line, what it means, what to do.

One job: the shape shared by the signature tables (``_signatures_*.py``) and the scanner
(``_signatures.py``). Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

ROOT = "root"
CONSEQUENCE = "consequence"


@dataclass(frozen=True)
class Signature:
    """One known failure: how to recognise it, what it means, what to do."""

    id: str
    title: str
    cause: str
    fix: str
    pattern: re.Pattern | None = None
    # Optional second pattern that must appear in the same rank's log within
    # ``context_lines`` lines before the matching line (or on it).
    context: re.Pattern | None = None
    context_lines: int = 40
    kind: str = ROOT
    # fatal: once printed the boot is lost, even if the container still runs.
    fatal: bool = True
    # Engines whose logs can print the line (names of the engine table, ``_engines.ENGINES``);
    # empty: any engine.
    engines: tuple[str, ...] = ()
    # Optional pattern whose group "ranks" lists the node ranks the line itself blames
    # (e.g. "Missing node ranks: 5, 7"): those ranks, not the one printing, are at fault.
    blame: re.Pattern | None = None
    # Rank roles whose logs can print the line (``plan["ranks"][*].role``, e.g. "router");
    # empty: any role. A scanner that does not know its role (free text) skips role-scoped ones.
    roles: tuple[str, ...] = ()
    # Ids of more generic signatures that the same line also matches: when this one is found
    # on a line, those are not reported for that line (the specific cause and fix replace them).
    supersedes: tuple[str, ...] = ()
    # Optional pattern whose group "ip" is the address of the peer the line names (gloo's
    # "Connection closed by peer [IP]:PORT"): the rank with that fabric address is blamed, when
    # the caller knows the plan's addresses (``collect(..., ips=...)``).
    blame_ip: re.Pattern | None = None
    # Optional pattern that, once seen in a rank's log, stops this signature from being recorded
    # for the rest of that log (vLLM logs an EngineDeadError during an ordinary SIGTERM shutdown).
    not_after: re.Pattern | None = None
    # Optional pattern whose named groups fill ``detail_text`` (e.g. the refused flag); the
    # sentence becomes the match's detail, quoted before the cause.
    detail: re.Pattern | None = None
    detail_text: str = ""

    @property
    def derived(self) -> bool:
        return self.pattern is None


def _re(text: str, flags: int = re.IGNORECASE) -> re.Pattern:
    return re.compile(text, flags)
