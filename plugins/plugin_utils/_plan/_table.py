# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The plan as a table for people: one line per rank, then the image, weights, API and layers.

One job: the human-readable view of a plan (the JSON is for machines).
"""
from __future__ import annotations

import json

from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._layers import HOST_LAYER
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _secrets as _plan_secrets
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._model import Plan


def table(plan: Plan) -> str:
    """A readable per-rank table for people (the JSON is for machines)."""
    rows = [("rank", "host", "role", "fabric ip", "container", "health")]
    for r in plan["ranks"]:
        rows.append((str(r["node_rank"]), r["host"], r["role"], r["fabric_ip"] or "-", r["container_name"],
                     str(r["health_port"] or "-")))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    head = plan["ranks"][0]
    lines.append("")
    # The tag is shown beside the digest because only the digest is pulled: a tag edited in image.yml without its
    # digest changes nothing in the image, and the table makes that visible (docs/images.md).
    tag = plan["image"].get("tag")
    lines.append(f"image   {plan['image']['ref']}  (base {plan['image']['base_ref']}"
                 + (f", tag {tag})" if tag else ")"))
    lines.append(f"weights {plan['weights']['path']}  (read-only, revision {plan['weights']['revision'] or 'unpinned'})")
    lines.append(f"api     http://{plan['api']['address']}:{plan['api']['port']}/v1  model {plan['api']['served_model_name']}")
    lines.append("rank 0  " + " ".join(_quote(a) for a in head["entrypoint"] + head["command"]))
    for override in plan.get("overrides") or []:
        every = len(override["hosts"]) == len({r["host"] for r in plan["ranks"]})
        own = override["layer"].startswith(HOST_LAYER)  # the source names its host
        where = "" if every or own else f" (ranks on {', '.join(override['hosts'])})"
        keys = ", ".join(f"{k}={json.dumps(v) if isinstance(v, (dict, list)) else v}" for k, v in override["keys"].items())
        lines.append(f"layer   {override['layer']}{where}: {keys}")
    for note in plan.get("notes") or []:
        lines.append(f"note    {note}")
    return "\n".join(lines)


def _quote(arg: str) -> str:
    if arg in (_plan_secrets.KEY_ARGV_PROGRAM, _plan_secrets.key_guard_program()):
        # lanekit's fixed launcher programs (the key's handoff, the key guard): named, not printed.
        return "<lanekit's key launcher, docs/security.md>"
    safe = all(c.isalnum() or c in "-_./:=,@+" for c in arg)
    return arg if safe and arg else "'" + arg.replace("'", "'\"'\"'") + "'"
