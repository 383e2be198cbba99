"""The slice of torch.distributed that the stand-in's load_model_utils.py calls, backed by the
stand-in's TCP group (lanekit_standin.group). Configured by the SGLang stand-in before use."""
from __future__ import annotations

import datetime

from .group import BarrierTimeout, GroupAborted

_state = {"group": None, "log": print, "tp_ranks_of": None}


class _TpGroup:
    cpu_group = "tp_cpu_group"


def configure(group, log, tp_ranks_of) -> None:
    """group: lanekit_standin.group.Group (or None for one node); log(msg); tp_ranks_of(node_ranks)."""
    _state.update(group=group, log=log, tp_ranks_of=tp_ranks_of)


def get_tp_group() -> _TpGroup:
    return _TpGroup()


def _seconds(timeout) -> float:
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False) -> None:  # noqa: ARG001
    secs = _seconds(timeout if timeout is not None else datetime.timedelta(minutes=30))
    _state["log"](f"Post-load barrier: monitored_barrier timeout in effect: {secs:g} s "
                  f"(UNBALANCED_MODEL_LOADING_TIMEOUT_S)")
    g = _state["group"]
    if g is None:
        return
    try:
        g.barrier("post-load", secs)
    except BarrierTimeout as exc:
        if exc.missing:
            ranks = _state["tp_ranks_of"](exc.missing) if _state["tp_ranks_of"] else exc.missing
            _state["log"](f"[Rank 0]: Ranks {', '.join(map(str, ranks))} failed to pass monitoredBarrier in "
                          f"{int(secs * 1000)} ms")
        raise RuntimeError(f"monitored_barrier timed out after {secs:g} s") from None
    except GroupAborted as exc:
        raise RuntimeError(exc.reason) from None


def barrier(group=None) -> None:  # noqa: ARG001
    g = _state["group"]
    if g is not None:
        g.barrier("post-load", None)
