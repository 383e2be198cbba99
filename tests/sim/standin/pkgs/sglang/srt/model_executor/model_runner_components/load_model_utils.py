"""lanekit STAND-IN for sglang/srt/model_executor/model_runner_components/load_model_utils.py.

A test instrument. It keeps the parts of the real module that matter to lanekit: the module
constant below (same line as SGLang 0.5.23) and `dist_barrier_after_load`, which reads it at call
time for the post-load monitored barrier. A build-time patch that rewrites the constant (for
example to read SGLANG_UNBALANCED_LOAD_TIMEOUT_S) therefore changes the barrier's timeout, and the
stand-in logs the timeout in effect. torch.distributed is replaced by the stand-in's TCP group.
"""
from __future__ import annotations

import datetime
import logging
import os  # noqa: F401  # pylint: disable=unused-import  # the real module imports it; patches may use it

from lanekit_standin import distshim as dist
from lanekit_standin.distshim import get_tp_group

logger = logging.getLogger(__name__)

_is_npu = False


UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480  # leave more time for post data processing


def dist_barrier_after_load(
    *,
    elastic_ep_backend: str | None,
    tp_rank: int,
    is_ep_scale_joiner: bool = False,
) -> None:
    if elastic_ep_backend == "mooncake":
        # Mooncake does not support `monitored_barrier`
        if not is_ep_scale_joiner:
            dist.barrier(group=get_tp_group().cpu_group)
    else:
        # Handle the case where some ranks do not finish loading.
        try:
            dist.monitored_barrier(
                group=get_tp_group().cpu_group,
                timeout=datetime.timedelta(seconds=UNBALANCED_MODEL_LOADING_TIMEOUT_S),
                wait_all_ranks=True,
            )
        except RuntimeError:
            raise ValueError(
                f"TP rank {tp_rank} could finish the model loading, but there are other ranks that didn't finish "
                "loading. It is likely due to unexpected failures (e.g., OOM) or a slow node."
            ) from None
