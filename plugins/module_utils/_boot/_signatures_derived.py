# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Failure signatures, one table of the scanner's (``_signatures.SIGNATURES``): the signatures the wait
loop raises from the ranks' phases (no pattern): a rank that never joined, a stall, an exhausted
budget, an exit without a known line; only their cause and fix text live here.

Pure data. The scanner reads the tables in the order ``_signatures`` joins them, and that order
is the order of a report (roots first, then table order), so a signature moves between tables
only on purpose.
"""
from __future__ import annotations

from ansible_collections.lanekit.serving.plugins.module_utils._boot._signature import CONSEQUENCE, Signature

DERIVED: tuple[Signature, ...] = (
    Signature(
        id="rank_never_joined",
        title="a rank never joined the rendezvous",
        cause="The named ranks never reached the distributed rendezvous while the others waited there.",
        fix=(
            "On the named node: check the container runs and its log, that the head's fabric "
            "IP and rendezvous port are reachable from it, and that its fabric interface "
            "variables (fabric_ip, fabric_ifname) are right in the inventory."
        ),
    ),
    Signature(
        id="stalled",
        title="lane stalled",
        cause="No rank made progress (phase, shards, graph capture, API) for longer than the lane's stall time.",
        fix=(
            "Read the named ranks' log tails in the bundle; a hung node, a cold page cache "
            "(loads crawl) or a wedged collective are the usual causes; raise `boot.stall_s` "
            "only if the silence is expected."
        ),
        kind=CONSEQUENCE,
    ),
    Signature(
        id="budget_exhausted",
        title="boot budget exhausted",
        cause="The lane did not become ready within its boot budget.",
        fix=(
            "If the ranks were still progressing, raise `boot.budget_s` (it also raises the "
            "engine timeouts); otherwise fix the slowest phase first (warm the page cache)."
        ),
        kind=CONSEQUENCE,
    ),
    Signature(
        id="container_exited",
        title="a rank container exited",
        cause="A rank's container exited without a known failure line.",
        fix="Read the rank's log tail in the bundle; the last exception line is quoted above.",
    ),
    Signature(
        id="container_missing",
        title="a rank container does not exist",
        cause="The planned container of a rank is not on its node (never started, or removed).",
        fix="Run the ranks role (`ansible-playbook lanekit.serving.deploy_lane`) so every rank of the plan is started.",
    ),
    Signature(
        id="api_unhealthy",
        title="the API did not stay healthy",
        cause="The head's API answered and then failed a readiness probe within the stability window.",
        fix="Read the head's log tail in the bundle; a crash during the first requests usually names its kernel path.",
    ),
    Signature(
        id="oom_killed",
        title="the kernel OOM killer stopped a rank",
        cause="The rank's container was killed by the kernel for using too much host memory.",
        fix=(
            "Lower the memory fraction, check the host memory figures in the bundle (unified "
            "memory counts page cache), and keep other processes off the node."
        ),
    ),
)
