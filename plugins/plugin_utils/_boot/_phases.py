# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Which deploy phases a lane with something to do may still skip (issue 28).

One job: from the re-run probes of every node (``lane_probe``'s ``pending_phases``), say which
phases have nothing to do anywhere in the lane, and whether a given phase may be skipped on that
proof in this run. Only the image and weights phases are ever skipped this way: the fabric keeps
its own cached verdict (docs/fabric.md), the cache warms the pages before the ranks start, and the
ranks and readiness phases always run for a lane that does not serve its plan.

A phase may be skipped only when the run asks it for nothing more than the probe proved: the
weights phase staged with ``weights_verify=full`` re-hashes every file, ``weights_prune`` removes
files, and another path, revision, model id, layout or source (``-e weights_*``) is another proof
than the plan's; the image phase with ``image_rebuild=always`` rebuilds on purpose.

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._boot._lane_probe import PROBED_PHASES

# The phases a settled probe skips; every other phase runs whenever the lane does not serve its plan.
SKIPPABLE = ("image", "weights")

SKIP_WHY = {
    "image": "every node holds the pinned image (the preflight probe proved it)",
    "weights": "every node sees the weights whole, revision {revision} in {path} (the preflight probe proved it)",
}


def settled_phases(results: Sequence[Mapping[str, Any] | None]) -> list[str]:
    """The probed phases with no reason on any node, in the deploy's order.

    ``results`` holds every probed node's ``lane_probe`` result. A node whose probe did not answer
    (no ``pending_phases``), or did not prove a phase (no key for it), leaves that phase unsettled;
    no node at all settles nothing.
    """
    if not results:
        return []
    phases = [(r or {}).get("pending_phases") for r in results]
    return [phase for phase in PROBED_PHASES
            if all(isinstance(p, Mapping) and phase in p and not p[phase] for p in phases)]


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "y")
    return bool(value)


def _given(value: Any) -> bool:
    return value not in (None, "")


def weights_runs_more(plan_weights: Mapping[str, Any] | None, settings: Mapping[str, Any]) -> list[str]:
    """Why the weights phase of this run would do more than the probe proved ([] when it would not).

    ``settings`` are the weights role's variables as the phase sees them (``weights_verify``,
    ``weights_prune``, ``weights_path``, ``weights_revision``, ``weights_model_id``,
    ``weights_layout``, ``weights_source``); unset or empty ones are the plan's. An unpinned revision
    (a local mirror) is skipped on the same proof a serving lane's re-run always skipped it on: the
    manifest in the plan's path and every file's size.
    """
    plan = plan_weights or {}
    out = []
    if not plan.get("path"):
        out.append("the plan names no weights path, so the probe checked none")
    if str(settings.get("weights_verify") or "quick") != "quick":
        out.append(f"weights_verify={settings.get('weights_verify')} re-hashes every staged file")
    if _truthy(settings.get("weights_prune")):
        out.append("weights_prune removes files the probe does not look at")
    for key, plan_key in (("weights_path", "path"), ("weights_revision", "revision"), ("weights_model_id", "model_id")):
        if _given(settings.get(key)) and str(settings[key]) != str(plan.get(plan_key) or ""):
            out.append(f"{key}={settings[key]} is not the {plan_key} of the plan the probe checked")
    layout = settings.get("weights_layout")
    if _given(layout) and str(layout) != str(plan.get("layout") or "any"):
        out.append(f"weights_layout={layout} is not the layout of the plan the probe checked")
    # The role's default source for a plan without one is the Hub.
    source = settings.get("weights_source")
    if isinstance(source, Mapping) and source and dict(source) != dict(plan.get("source") or {"kind": "hf"}):
        out.append(f"weights_source={dict(source)} is not the source of the plan")
    return out


def image_runs_more(settings: Mapping[str, Any]) -> list[str]:
    """Why the image phase of this run would do more than the probe proved ([] when it would not)."""
    if str(settings.get("image_rebuild") or "changed") == "always":
        return ["image_rebuild=always rebuilds the image on purpose"]
    return []


def phase_skip(phase: str, settled: Sequence[str] | None, plan: Mapping[str, Any] | None,
               settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Whether ``phase`` is skipped on the probe's proof, and the one line that says why.

    ``why`` is '' when the probe did not find the phase settled (or it is not a phase that may be
    skipped): the phase runs without a word, as it always did.
    """
    settled = list(settled or [])
    if phase not in SKIPPABLE or phase not in settled:
        return {"skip": False, "why": ""}
    settings = settings or {}
    weights = (plan or {}).get("weights") or {}
    more = image_runs_more(settings) if phase == "image" else weights_runs_more(weights, settings)
    if more:
        return {"skip": False, "why": f"Run the {phase} phase although the preflight probe found it settled: "
                                      f"{'; '.join(more)}."}
    why = SKIP_WHY[phase].format(revision=str(weights.get("revision") or "")[:12], path=weights.get("path"))
    return {"skip": True, "why": f"Skip the {phase} phase: {why}."}
