#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Tell, in one call per node, whether the node already serves its part of a lane's plan."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: lane_probe
short_description: Prove in one call that a node already serves its part of a lane's plan
version_added: 0.2.0
description:
  - Runs on each node of a lane before the deploy's phases. It reports whether every phase would find
    nothing to do on this node, so that a re-run of a lane that already serves (a health check, a re-run
    after an edit that changed nothing) costs one probe per node instead of every phase's tasks.
  - Each phase is proven, not assumed. Image, the image O(ref) carries the pin (O(content_hash), O(rootfs),
    O(config)) and every rank container runs it. Weights, the manifest in the C(path) of O(weights) is for the plan's
    revision and every file it lists has its size (the check M(lanekit.serving.weights_verify) makes, stats
    only). Ranks, each container of O(ranks) exists, runs, is not restarting, carries the plan's spec hash
    (label C(io.lanekit.spec-hash)) and has run for at least O(stability_s) seconds. API, with O(api_probe)
    the API passes C(/health), lists the served model and (C(chat) of O(api_probe)) streams a first token; ranks
    with a C(health_port) that do not answer the API pass C(/health). Secrets, the lane's env file hashes to
    the C(hash) of O(secrets), or is absent when the lane has none.
  - Anything else (a phase would act, or the probe cannot tell) is a reason in RV(pending). The same reasons
    grouped by the deploy phase that would act on them are in RV(pending_phases), so the playbook can still
    skip a phase the probe proved settled on every node (the image and weights phases, docs/contracts.md).
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
  - lanekit.serving.docker_cli
options:
  lane:
    description: The lane's name (it salts the secrets hash).
    type: str
    required: true
  ref:
    description: The image reference of the plan, C(lanekit/<name>:<content hash 12>).
    type: str
    required: true
  content_hash:
    description: The content hash the image must carry.
    type: str
    required: true
  rootfs:
    description: The layer-list digest the image must have (from the image lock), when known.
    type: str
  config:
    description: The digest of the image's run-relevant configuration (from the image lock), when known.
    type: str
  ranks:
    description:
      - This node's ranks from the plan (C(lanekit_plan.ranks) of this host); each needs C(container_name)
        and C(spec_hash); C(node_rank), C(role) and C(health_port) are read when present.
    type: list
    elements: dict
    default: []
  stability_s:
    description: Seconds every rank must have run to count as settled (the plan's C(boot.stability_s)).
    type: float
    default: 0
  weights:
    description:
      - The plan's weights (C(path), C(revision), C(model_id), C(layout)); unset to skip the weights proof.
    type: dict
  api_probe:
    description:
      - The probe of the lane's API to climb (C(url), C(model), C(chat), C(chat_timeout)). It is climbed only
        when one of O(ranks) answers the API (role C(head) or C(router)), so every node can be given it.
    type: dict
  api_key:
    description:
      - The lane's API key for the API probe (C(lanekit_api_key)); never returned, never sent to C(/health).
      - It is sent only when every socket listening on the API's port belongs to the rank container that answers
        the API; a port held by another process is a reason in RV(pending) that names the process.
    type: str
  secrets:
    description:
      - The plan's secrets record (C(env_file), C(hash)); unset when the lane has none, in which case
        O(secrets_env_file) must not exist.
    type: dict
  secrets_env_file:
    description: Where this lane's env file lives on the node (checked to be absent when O(secrets) is unset).
    type: path
attributes:
  check_mode:
    support: full
    details: Read-only, runs the same in check mode.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Never changes the host.
seealso:
  - module: lanekit.serving.image_info
  - module: lanekit.serving.weights_verify
  - module: lanekit.serving.rank_status
"""

EXAMPLES = r"""
---
- name: Probe this node's part of the lane
  lanekit.serving.lane_probe:
    lane: "{{ lanekit_plan.lane }}"
    ref: "{{ lanekit_plan.image.ref }}"
    content_hash: "{{ lanekit_plan.image.content_hash }}"
    ranks: "{{ lanekit_plan.hosts[inventory_hostname] | map('extract', lanekit_plan.ranks) | list }}"
    stability_s: "{{ lanekit_plan.boot.stability_s }}"
    weights: "{{ lanekit_plan.weights }}"
  register: probe
"""

RETURN = r"""
serving:
  description: True when every phase would find nothing to do on this node.
  returned: always
  type: bool
pending:
  description: Why not, one sentence per reason (empty when RV(serving)).
  returned: always
  type: list
  elements: str
  sample: ["rank 3 (lanekit-demo-r3) runs spec 1c2d3e4f5a6b, the plan wants 9f8e7d6c5b4a"]
ranks:
  description: Each rank container's state as seen (name, running, uptime in seconds).
  returned: always
  type: list
  elements: dict
pending_phases:
  description:
    - The reasons of RV(pending) by the deploy phase that would act on them, one key per phase the probe
      proved, an empty list when that phase has nothing to do on this node.
    - C(image) the image pin; present only when O(rootfs) and O(config) are given (the lock's digests; without
      them the image phase still records the lock). C(weights) the manifest and sizes; present only
      when O(weights) names a C(path). C(ranks) the rank containers (spec hash, image, running, settled) and
      the secrets file. C(ready) the API and C(/health) probes.
    - Fabric and cache are never listed; the probe does not prove them.
  returned: always
  type: dict
  sample: {"image": [], "weights": [], "ranks": ["rank 3 (lanekit-demo-r3) is exited"], "ready": []}
api:
  description: The API probe's ladder (see M(lanekit.serving.rank_status)), without the key.
  returned: when O(api_probe) is given and one of O(ranks) answers the API
  type: dict
"""

import time

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _lane_probe as verdicts
from ansible_collections.lanekit.serving.plugins.module_utils._boot._portowner import RankContainer, key_refusal
from ansible_collections.lanekit.serving.plugins.module_utils._boot._probes import DEFAULT_URL, http_get, probe_api
from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import parse_docker_time
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_module import (
    DockerManager,
    pin_options,
    run_docker_module,
)
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines as engines
from ansible_collections.lanekit.serving.plugins.module_utils._secrets import env_digest, parse_env_file
from ansible_collections.lanekit.serving.plugins.module_utils._weights._check import WeightsChecker


class LaneProbe(DockerManager):
    """Gather what the node says about each phase and let _lane_probe judge it; changes nothing."""

    def run(self) -> dict:
        p = self.params
        now = time.time()
        image = self.docker.inspect_image(p["ref"])
        image_reasons = verdicts.image_pending(p["ref"], image, p["content_hash"], p["rootfs"], p["config"])
        image_id = (image or {}).get("Id")
        ranks = p["ranks"] or []
        found = self.docker.inspect_containers([r["container_name"] for r in ranks])
        seen = []
        rank_reasons: list[str] = []
        for rank in ranks:
            obj = found.get(rank["container_name"])
            rank_reasons += verdicts.rank_pending(rank, obj, image_id, now, float(p["stability_s"]))
            state = (obj or {}).get("State") or {}
            started = parse_docker_time(state.get("StartedAt"))
            seen.append({"name": rank["container_name"], "running": bool(state.get("Running")),
                         "up_s": None if started is None else round(now - started, 1)})
        weights_reasons = self._weights()
        secrets_reasons = self._secrets()
        result = {"changed": False, "ranks": seen}
        api_reasons: list[str] = []
        # The API is climbed on the node of the rank that answers it (the head, or the P/D router).
        api_rank = next((rank for rank in ranks if rank.get("role") in engines.API_ROLES), None)
        if p["api_probe"] and api_rank is not None:
            spec = dict(p["api_probe"], api_key=p["api_key"])
            url = str(spec.get("url") or DEFAULT_URL)
            # The key goes only to a port the API's rank container holds (issue 38).
            owner = RankContainer.of(api_rank["container_name"], found.get(api_rank["container_name"]))
            api = probe_api(spec, key_check=lambda: key_refusal(url, owner))
            result["api"] = api
            api_reasons = verdicts.api_pending(api, bool(spec.get("chat")))
        health = []
        for rank in ranks:
            if rank.get("health_port") and rank.get("role") not in engines.API_ROLES:
                # Unauthenticated: the key is never sent to a health port.
                status, _body, error = http_get(f"http://127.0.0.1:{int(rank['health_port'])}/health", timeout=5)
                health.append({"name": rank["container_name"], "status": status, "error": error})
        health_reasons = verdicts.health_pending(health)
        pending = image_reasons + rank_reasons + weights_reasons + secrets_reasons + api_reasons + health_reasons
        phases = verdicts.by_phase(image_reasons, weights_reasons, rank_reasons, secrets_reasons, api_reasons,
                                   health_reasons, image_proven=bool(p["rootfs"] and p["config"]),
                                   weights_proven=bool((p["weights"] or {}).get("path")))
        result.update(verdicts.verdict(pending, phases))
        return result

    def _weights(self) -> list[str]:
        weights = self.params["weights"]
        if not weights or not weights.get("path"):
            return []
        try:
            checked = WeightsChecker(weights["path"], weights.get("revision"), weights.get("model_id"),
                                     weights.get("layout") or "any").run()
        except LanekitError as err:
            return verdicts.weights_pending(None, str(err))
        except OSError as err:
            return verdicts.weights_pending(None, f"{weights['path']} cannot be read ({err.strerror or err})")
        return verdicts.weights_pending(checked, None)

    def _secrets(self) -> list[str]:
        p = self.params
        record = p["secrets"] or {}
        env_file = record.get("env_file") or p["secrets_env_file"]
        if not env_file:
            return []
        try:
            with open(env_file, encoding="utf-8") as handle:
                digest = env_digest(p["lane"], parse_env_file(handle.read()))
            present = True
        except FileNotFoundError:
            digest, present = None, False
        except OSError as err:
            return [f"the lane's secrets file {env_file} cannot be read ({err.strerror or err})"]
        return verdicts.secrets_pending(record.get("hash"), digest, present, env_file)


def main() -> None:
    options = pin_options()
    options.update(
        lane=dict(type="str", required=True),
        ranks=dict(type="list", elements="dict", default=[]),
        stability_s=dict(type="float", default=0),
        weights=dict(type="dict"),
        api_probe=dict(type="dict"),
        api_key=dict(type="str", no_log=True),
        secrets=dict(type="dict", no_log=False),
        secrets_env_file=dict(type="path"),
    )
    run_docker_module(LaneProbe, options)


if __name__ == "__main__":
    main()
