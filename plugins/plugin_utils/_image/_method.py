# Copyright: lanekit developers
# Apache-2.0
"""Which method distributes the image this run (``image_method: auto``), from what the nodes hold.

On a link-bound cluster the cost of a distribution is the bytes the busiest link carries, counted
in transfers of the whole image (one ``docker save`` over one link). The star (the stream from the
builder, with delta) puts every node's missing bytes through the builder's uplink: the sum over the
nodes of what each lacks. The relay (a chain of the nodes) carries the whole image once over every
link, in parallel, with no delta: measured at 1.25-1.29 transfers on links capped at 100 Mbit/s
(docs/benchmarks.md), the chain's start and its last load included. So the relay pays when the
nodes together lack more than that: a fresh image or a new base on several nodes; a changed patch
layer over a base every node holds is a few MB per node and goes by the star. When no node lacks
anything, nothing is sent. Pure: the role's filter ``lanekit.serving.image_method`` calls it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

METHODS = ("stream", "relay", "registry")
# Transfers of the whole image the relay costs on capped links (measured 1.25 and 1.29: the chain's
# start, the last node's load after the last byte, the exec probe). Below it, the star is cheaper.
RELAY_TRANSFERS = 1.3
GIB = float(1 << 30)


@dataclass(frozen=True)
class MethodChoice:
    """The method the role runs and the one line it prints."""

    method: str
    message: str
    # Nodes that need bytes, the image's bytes, and what the star would send (in whole images).
    needing: int
    image_bytes: int
    star_transfers: float


def _node_missing(report: dict, sizes: list[int], total: int) -> int | None:
    """Bytes the node lacks; None when it needs no transfer (current, or a local copy re-tagged)."""
    if report.get("current") or report.get("local_copy"):
        return None
    held = report.get("held_layers") or 0
    if not isinstance(held, int) or held < 0:
        raise LanekitError(f"image_method auto: a node's held_layers is {held!r}, not a count; "
                           f"image_info's report must come from this collection's image_info module.")
    return total - sum(sizes[:held])


def choose_method(reports: dict, sizes: list[int], forks: int, requested: str = "auto") -> MethodChoice:
    """The method for this run: ``requested`` unless it is ``auto``; then nothing to send, the
    stream, or the relay, from each node's image_info report (``current``, ``local_copy``,
    ``held_layers``) and the image's layer sizes on the builder (bottom first)."""
    if requested in METHODS:
        return MethodChoice(requested, f"image method {requested} (set by image_method)", 0, 0, 0.0)
    if requested != "auto":
        raise LanekitError(f"image_method is {requested!r}; use auto, stream, relay or registry (the image role).")
    total = sum(sizes)
    missing = {node: _node_missing(report or {}, sizes, total) for node, report in sorted(reports.items())}
    needing = {node: lack for node, lack in missing.items() if lack is not None}
    nodes = len(reports)
    if not needing:
        retag = sum(1 for report in reports.values() if not (report or {}).get("current"))
        return MethodChoice("stream", f"image method auto: stream, nothing to send: all {nodes} nodes hold the image"
                                      + (f" ({retag} re-tag a local copy)" if retag else ""), 0, total, 0.0)
    if total <= 0:
        return MethodChoice("stream", f"image method auto: stream, because the builder could not tell the image's "
                                      f"layer sizes ({len(needing)} of {nodes} nodes need it; docker image history "
                                      f"did not match its layers): the stream sends each node only the layers it lacks",
                            len(needing), 0, 0.0)
    star = sum(needing.values()) / total
    share = star / len(needing)
    # A patch layer is a fraction of a percent: one decimal there, so the line does not say 0%.
    lack = f"{share:.0%}" if share >= 0.1 else f"{share:.1%}"
    figures = (f"{len(needing)} of {nodes} nodes need the image ({total / GIB:.2f} GiB) and lack {lack} of it "
               f"on average: the stream would send {star:.2f} images from the builder, the relay about "
               f"{RELAY_TRANSFERS} over every link")
    if star <= RELAY_TRANSFERS:
        return MethodChoice("stream", f"image method auto: stream, {figures}", len(needing), total, star)
    if forks < nodes:
        return MethodChoice("stream", f"image method auto: stream, not the relay: {figures}, but the relay runs all "
                                      f"{nodes} nodes at once and Ansible runs {forks} (forks; set -f {nodes})",
                            len(needing), total, star)
    return MethodChoice("relay", f"image method auto: relay, {figures}", len(needing), total, star)


def choice_dict(choice: MethodChoice) -> dict:
    return asdict(choice)
