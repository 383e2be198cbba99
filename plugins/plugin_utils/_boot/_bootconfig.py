# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The figures a boot is judged by: budget, stall, poll, stability window, expected load and warm-up, barrier.

One job: read them from the plan, which publishes them (``plan["boot"]``, ``plan["barrier_timeout_s"]``).
The tracker decides with them, the estimate and the status line read them.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines as engines


@dataclass
class BootConfig:
    budget_s: float = 3600.0
    stall_s: float = 900.0
    poll_s: float = 15.0
    stability_s: float = 30.0
    expected_load_s: float | None = None
    expected_warmup_s: float | None = None
    barrier_timeout_s: float | None = None
    chat_probe: bool = True
    max_flaps: int = 3

    @classmethod
    def from_plan(cls, plan: Mapping[str, Any], **overrides: Any) -> BootConfig:
        """The plan's boot figures and its post-load barrier (``plan["barrier_timeout_s"]``).

        The plan publishes the barrier as the ranks get it (None: the engine has none). A plan
        written before it did carries no such key: the engine record's stock barrier stands in.
        """
        boot = dict(plan.get("boot") or {})
        cfg = cls()
        for key in ("budget_s", "stall_s", "poll_s", "stability_s", "expected_load_s", "expected_warmup_s"):
            if boot.get(key) is not None:
                setattr(cfg, key, float(boot[key]))
        if "barrier_timeout_s" in plan:
            barrier = plan["barrier_timeout_s"]
            cfg.barrier_timeout_s = None if barrier is None else float(barrier)
        elif plan.get("engine") in engines.ENGINES:
            stock = engines.get(plan["engine"]).timeout("barrier")
            cfg.barrier_timeout_s = stock.stock_s if stock else None
        for key, value in overrides.items():
            if value is not None:
                setattr(cfg, key, value)
        return cfg
