#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Check on one node that the staged weights are complete (sizes, layout), without reading them."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: weights_verify
short_description: Check on a node that the staged weights are complete, without reading them
version_added: 0.1.0
description:
  - Runs on every node of a lane and checks the weights directory as that node sees it (its NFS mount).
  - C(MANIFEST.json) must be present (M(lanekit.serving.weights_stage) writes it last) and be for the lane's
    O(revision) and O(model_id).
  - Every file of the manifest must exist as a regular file (a symlink to one is accepted) with the recorded
    size; no symlink in the directory may dangle.
  - The layout must be the one the engine will read; for O(layout=mistral_consolidated) there is no
    C(config.json) and both C(params.json) and C(tekken.json) are present. Every shard named by a
    C(*.safetensors.index.json) must be in the manifest.
  - Never hashes and never reads weight data. On unified-memory hosts (GB10) reading the checkpoint fills
    page cache the GPU then cannot use; hashing belongs on the staging host.
  - Fails with a sentence naming the missing or wrong files.
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
options:
  path:
    description:
      - The weights directory (the lane's C(weights.path)).
    type: path
    required: true
  revision:
    description:
      - The revision the lane pins. When set, the manifest must record exactly this revision.
    type: str
  model_id:
    description:
      - The model id the lane expects. When set, the manifest must record it.
    type: str
  layout:
    description:
      - The checkpoint layout the engine will read.
      - V(mistral_consolidated) is Mistral's native format (C(params.json), C(tekken.json), no C(config.json)).
      - V(hf) is the Transformers layout (C(config.json) present).
      - V(any) skips the layout check.
    type: str
    choices: [mistral_consolidated, hf, any]
    default: any
  max_listed:
    description:
      - How many file names the failure message lists per kind of problem (all are in the result).
    type: int
    default: 10
attributes:
  check_mode:
    support: full
    details:
      - Read-only; runs the same checks in check mode.
  diff_mode:
    support: none
  idempotent:
    support: full
    details:
      - Never changes anything.
seealso:
  - module: lanekit.serving.weights_stage
"""

EXAMPLES = r"""
---
- name: Check the staged weights on every node
  lanekit.serving.weights_verify:
    path: /mnt/nfs/models/mistralai/Mistral-Large-4-1T-A52B-NVFP4
    revision: 0123456789abcdef0123456789abcdef01234567
    layout: mistral_consolidated
"""

RETURN = r"""
ok:
  description: Whether every check passed.
  returned: always
  type: bool
manifest_revision:
  description: The revision recorded in the manifest.
  returned: when the manifest could be read
  type: str
files_checked:
  description: Files listed by the manifest and checked.
  returned: always
  type: int
bytes_total:
  description: Total size recorded by the manifest.
  returned: always
  type: int
missing:
  description: Manifest files absent on this node.
  returned: always
  type: list
  elements: str
wrong_size:
  description: Manifest files present with another size, each as C(path (size N, expected M)).
  returned: always
  type: list
  elements: str
not_regular:
  description: Manifest files that are not regular files (directories, devices).
  returned: always
  type: list
  elements: str
dangling_symlinks:
  description: Symlinks in the directory that point to nothing.
  returned: always
  type: list
  elements: str
layout_errors:
  description: Layout problems, as sentences.
  returned: always
  type: list
  elements: str
problems:
  description: Every problem found, as sentences.
  returned: always
  type: list
  elements: str
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._weights._check import WeightsChecker, summary


def argument_spec() -> dict[str, Any]:
    return dict(
        path=dict(type="path", required=True),
        revision=dict(type="str"),
        model_id=dict(type="str"),
        layout=dict(type="str", default="any", choices=["mistral_consolidated", "hf", "any"]),
        max_listed=dict(type="int", default=10),
    )


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    p = module.params
    try:
        res = WeightsChecker(p["path"], p["revision"], p["model_id"], p["layout"]).run()
    except LanekitError as exc:
        module.fail_json(msg=str(exc), ok=False)
    except OSError as exc:
        module.fail_json(msg=f"Checking {p['path']} failed: {exc.strerror or exc} ({exc.filename or p['path']}).",
                         ok=False)
    res["changed"] = False
    if not res["ok"]:
        # The staging host verified the export; a node that disagrees sees another (stale, partial or
        # wrongly mounted) view of it, so the fix is on the node's mount before re-staging anything.
        module.fail_json(msg=f"The weights in {res['path']} are not usable on this node: "
                             f"{summary(res, max(1, p['max_listed']))}. If other nodes see them whole, check this "
                             "node's mount of the export (stale NFS view, wrong export); otherwise re-stage with "
                             "ansible-playbook lanekit.serving.stage_weights -e weights_verify=full.", **res)
    module.exit_json(**res)


if __name__ == "__main__":
    main()
