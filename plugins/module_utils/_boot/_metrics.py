# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The engine's generated-token counter, read from its Prometheus ``/metrics`` text.

One job: the number the watch's counter rule compares (``plugin_utils/_ledger/_watch.engine_progress``).
The head's watch probe (``_probes.stream_probe``) parses the text where it reads it, and the
controller's watch uses this same function: module_utils, because a module cannot import
plugin_utils, and one copy, so that the probe and the rule agree on what the counter is.

Only the standard library is used.
"""
from __future__ import annotations

import math
import re

# The engines' counters of generated tokens on the API's /metrics (open without the key: _plan/_keyguard.py).
# SGLang serves its /metrics only with --enable-metrics; without it the probe reads no counter.
GENERATED_TOKENS = ("vllm:generation_tokens_total", "sglang:generation_tokens_total")
# One sample line: a name, optional labels, the value (a timestamp may follow and is ignored).
_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{[^}]*\})?\s+(?P<value>\S+)")


def engine_generated_tokens(metrics: str) -> float | None:
    """The engine's generated-token counter from its /metrics text (summed over its label sets); None without one.

    For the probe: read before the request and after the stream ends, as ``engine_tokens_before`` and
    ``engine_tokens_after``, it shows the lane generating for others while the probe waits in its queue.
    A value that is not a finite number is no reading: NaN or infinity would make any rise, or none.
    """
    total, seen = 0.0, False
    for line in metrics.splitlines():
        sample = _SAMPLE.match(line.strip())
        if not sample or sample["name"] not in GENERATED_TOKENS:
            continue
        try:
            value = float(sample["value"])
        except ValueError:
            continue
        if math.isfinite(value):
            total, seen = total + value, True
    return total if seen else None
