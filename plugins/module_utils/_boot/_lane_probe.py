# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Does this node already serve its part of a lane's plan? The verdict of one re-run probe.

One job: from what one node reports (the image's ``docker inspect``, the rank containers'
``docker inspect``, the stat-only weights check, the API and health probes, the digest of the
lane's secrets file), say whether every phase of a deploy would find nothing to do on this node,
and if not, why, one sentence per reason. A re-run of a lane that already serves spends one
probe per node on this instead of every phase's own tasks (docs/architecture.md, "Re-runs").

Each phase is still proven, not assumed:
- image: the plan's reference carries the pin (content hash label, and the layer-list and
  configuration digests when the lock has them), and every rank container runs that image;
- weights: the manifest for the plan's revision is there and every file has its size (the
  weights role's own per-node check);
- ranks: each of the node's rank containers exists, runs, is not restarting and carries the
  plan's spec hash, for longer than the plan's stability window;
- API: the rank that answers the lane's API passes /health, lists the served model and streams a
  first token; other HTTP ranks pass /health;
- secrets: the node's env file hashes to the plan's secrets hash (or is absent when the lane has none).

The reasons are also grouped by the deploy phase that would act on them (``by_phase``), so that a
lane with something to do on one phase (a changed rank flag, a stopped rank) still skips the phases
the probe proved settled (issue 28; the deploy decides which may be skipped).

Pure: no I/O, no Ansible imports.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import parse_docker_time
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import image_pin, pin_mismatch

SPEC_LABEL = "io.lanekit.spec-hash"


def image_pending(ref: str, inspect: Mapping[str, Any] | None, content_hash: str, rootfs: str | None = None,
                  config: str | None = None) -> list[str]:
    """Why the image phase would act on this node ([] when the pinned image is here)."""
    if inspect is None:
        return [f"image {ref} is not on this node"]
    mismatch = pin_mismatch(image_pin(dict(inspect)), content_hash, rootfs or None, config or None)
    return [f"image {ref} on this node is not the pinned one ({mismatch})"] if mismatch else []


def rank_pending(rank: Mapping[str, Any], inspect: Mapping[str, Any] | None, image_id: str | None,
                 now: float, stability_s: float) -> list[str]:
    """Why the ranks phase (or the readiness wait) would act on one rank container."""
    name = rank["container_name"]
    label = f"rank {rank.get('node_rank', '?')} ({name})"
    if inspect is None:
        return [f"{label} does not exist"]
    state = inspect.get("State") or {}
    labels = (inspect.get("Config") or {}).get("Labels") or {}
    out = []
    if labels.get(SPEC_LABEL) != rank.get("spec_hash"):
        out.append(f"{label} runs spec {str(labels.get(SPEC_LABEL) or 'none')[:12]}, the plan wants "
                   f"{str(rank.get('spec_hash'))[:12]}")
    if image_id and inspect.get("Image") != image_id:
        out.append(f"{label} runs another image than the plan's")
    if not state.get("Running") or state.get("Restarting") or state.get("Paused"):
        status = ("restarting" if state.get("Restarting") else "paused" if state.get("Paused")
                  else state.get("Status") or "not running")
        out.append(f"{label} is {status}")
        return out
    started = parse_docker_time(state.get("StartedAt"))
    if started is None or now - started < stability_s:
        up = "an unknown time" if started is None else f"{max(0.0, now - started):.0f} s"
        out.append(f"{label} has run {up}, less than the stability window of {stability_s:.0f} s")
    return out


def weights_pending(checked: Mapping[str, Any] | None, error: str | None) -> list[str]:
    """Why the weights phase would act ([] when the manifest and every file's size agree)."""
    if error:
        return [f"weights: {error}"]
    if checked is None:
        return []
    problems = list(checked.get("problems") or [])
    return [f"weights in {checked.get('path')}: {'; '.join(problems)}"] if problems else []


def api_pending(probe: Mapping[str, Any] | None, chat: bool) -> list[str]:
    """Why the readiness wait would not pass at its first look (the API rung the probe missed)."""
    if probe is None:
        return []
    if probe.get("error") or not probe.get("model_listed") or (chat and not probe.get("chat_ok")):
        return [f"the API at {probe.get('url')} does not serve yet ({probe.get('error') or 'no first token'})"]
    return []


def health_pending(probes: Sequence[Mapping[str, Any]]) -> list[str]:
    return [f"{p['name']} /health answers {p.get('status') or p.get('error') or 'nothing'}"
            for p in probes if p.get("status") != 200]


def secrets_pending(expected_hash: str | None, file_digest: str | None, file_present: bool,
                    env_file: str) -> list[str]:
    """Why the ranks role would write or remove the lane's secrets file on this node."""
    if expected_hash is None:
        return [f"{env_file} is left from a lane with secrets; the plan has none"] if file_present else []
    if not file_present:
        return [f"the lane's secrets file {env_file} is missing"]
    if file_digest != expected_hash:
        return [f"the lane's secrets file {env_file} holds other values than the plan's"]
    return []


# The deploy phases the probe proves, in the deploy's order. Fabric and cache are not probed (the
# fabric keeps its own cached verdict, the cache warms before the ranks start).
PROBED_PHASES = ("image", "weights", "ranks", "ready")


def by_phase(image: Sequence[str], weights: Sequence[str], ranks: Sequence[str], secrets: Sequence[str],
             api: Sequence[str], health: Sequence[str], *, image_proven: bool = True,
             weights_proven: bool = True) -> dict[str, list[str]]:
    """The reasons by the phase that acts on them; a phase the probe did not fully prove has no key.

    The ranks role writes the secrets file and (re)creates a rank on another spec or image; the
    readiness wait is what an API or /health that does not answer yet needs. The image is proven
    only with the lock's layer and config digests (without them the image phase still records the
    lock), the weights only when the plan names a weights path.
    """
    out: dict[str, list[str]] = {}
    if image_proven:
        out["image"] = list(image)
    if weights_proven:
        out["weights"] = list(weights)
    out["ranks"] = list(ranks) + list(secrets)
    out["ready"] = list(api) + list(health)
    return out


def verdict(pending: Sequence[str], phases: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"serving": not pending, "pending": list(pending)}
    if phases is not None:
        out["pending_phases"] = {phase: list(reasons) for phase, reasons in phases.items()}
    return out
