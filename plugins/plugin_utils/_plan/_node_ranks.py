# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""This node's ranks, read from the plan.

One job: the ranks of one host, in the plan's rank order, from the plan's ``hosts`` index
("my ranks", docs/contracts.md). Every role that acts on a node's ranks (preflight's re-run
probe, cache, ranks, teardown, bench) asks here instead of filtering the plan's ranks in Jinja.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError


def node_ranks(plan: Any, host: str) -> list[dict[str, Any]]:
    """The rank records of ``host``: those the plan's ``hosts`` index names, in that order.

    A plan without ranks (a teardown by lane name alone) gives none. A plan without the ``hosts``
    index (one written before the index existed) is read by each rank's ``host`` instead, so the
    answer never depends on which of the two a plan carries.
    """
    if plan is None or plan == "":
        return []
    if not isinstance(plan, Mapping):
        raise LanekitError(f"node_ranks needs the lane's plan (a mapping such as lanekit_plan), got "
                           f"{type(plan).__name__}; pass lanekit_plan or a plan file's content.")
    ranks = plan.get("ranks") or []
    index = plan.get("hosts")
    if index is None:
        return [dict(r) for r in ranks if isinstance(r, Mapping) and r.get("host") == host]
    if not isinstance(index, Mapping):
        raise LanekitError(f"The plan's hosts index must map each host to its node ranks, got "
                           f"{type(index).__name__}; plan the lane again.")
    mine = []
    for number in index.get(host) or []:
        if not isinstance(number, int) or isinstance(number, bool) or not 0 <= number < len(ranks):
            raise LanekitError(f"The plan's hosts index names rank {number!r} for {host}, but the plan has "
                               f"{len(ranks)} ranks; plan the lane again.")
        mine.append(dict(ranks[number]))
    return mine
