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

import json
import os
import stat as statmod
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._manifest import (
    MANIFEST_NAME,
    STATE_DIR,
    load_manifest,
)

LAYOUT_RULES = {
    "mistral_consolidated": {"absent": ["config.json"], "present": ["params.json", "tekken.json"]},
    "hf": {"absent": [], "present": ["config.json"]},
    "any": {"absent": [], "present": []},
}


class WeightsChecker:
    """Stat-only checks of a staged weights directory."""

    def __init__(self, path: str, revision: str | None = None, model_id: str | None = None,
                 layout: str = "any") -> None:
        self.path = path.rstrip("/") or "/"
        self.revision = revision
        self.model_id = model_id
        self.layout = layout
        self.res: dict[str, Any] = {
            "ok": False, "path": self.path, "files_checked": 0, "bytes_total": 0, "missing": [],
            "wrong_size": [], "not_regular": [], "dangling_symlinks": [], "layout_errors": [], "problems": [],
        }

    def run(self) -> dict[str, Any]:
        r = self.res
        if not os.path.isdir(self.path):
            raise LanekitError(
                f"The weights directory {self.path} does not exist on this node; is the NFS export mounted "
                "here and were the weights staged?")
        manifest = load_manifest(os.path.join(self.path, MANIFEST_NAME))
        if manifest is None:
            raise LanekitError(
                f"{self.path} has no {MANIFEST_NAME}: the weights were never staged there or staging did not "
                "finish; run the weights role (stage-weights.yml) first.")
        r["manifest_revision"] = manifest.get("revision")
        r["manifest_model_id"] = manifest.get("model_id")
        if self.revision and manifest.get("revision") != self.revision:
            r["problems"].append(f"the manifest is for revision {manifest.get('revision')}, the lane pins "
                                 f"{self.revision}")
        if self.model_id and manifest.get("model_id") and manifest.get("model_id") != self.model_id:
            r["problems"].append(f"the manifest is for model {manifest.get('model_id')}, the lane expects "
                                 f"{self.model_id}")
        names: set[str] = set()
        for f in manifest["files"]:
            rel = f["path"]
            names.add(rel)
            r["files_checked"] += 1
            r["bytes_total"] += int(f["size"])
            full = os.path.join(self.path, *rel.split("/"))
            try:
                st = os.stat(full)
            except FileNotFoundError:
                if os.path.islink(full):
                    r["dangling_symlinks"].append(rel)
                else:
                    r["missing"].append(rel)
                continue
            except OSError as exc:
                r["missing"].append(f"{rel} ({exc.strerror})")
                continue
            if not statmod.S_ISREG(st.st_mode):
                r["not_regular"].append(rel)
            elif st.st_size != int(f["size"]):
                r["wrong_size"].append(f"{rel} (size {st.st_size}, expected {int(f['size'])})")
        for link in self._dangling():
            if link not in r["dangling_symlinks"]:
                r["dangling_symlinks"].append(link)
        self._layout(names)
        self._indexes(names)
        for key, label in (("missing", "missing"), ("wrong_size", "wrong size"),
                           ("not_regular", "not regular files"), ("dangling_symlinks", "dangling symlinks")):
            if r[key]:
                r["problems"].append(f"{label}: {', '.join(r[key])}")
        r["problems"].extend(r["layout_errors"])
        r["ok"] = not r["problems"]
        return r

    def _dangling(self) -> list[str]:
        out = []
        for root, dirs, files in os.walk(self.path):
            if root == self.path:
                dirs[:] = [d for d in dirs if d != STATE_DIR]
            for name in files + dirs:
                full = os.path.join(root, name)
                if os.path.islink(full) and not os.path.exists(full):
                    out.append(os.path.relpath(full, self.path).replace(os.sep, "/"))
        return sorted(out)

    def _layout(self, names: set[str]) -> None:
        rules = LAYOUT_RULES[self.layout]
        errs = self.res["layout_errors"]
        for name in rules["absent"]:
            if name in names or os.path.lexists(os.path.join(self.path, name)):
                errs.append(f"{name} is present but the {self.layout} layout has none (the engine would take "
                            "the wrong loading path); remove it from the checkpoint")
        for name in rules["present"]:
            if name not in names:
                errs.append(f"{name} is missing; the {self.layout} layout needs it")
        if self.layout != "any" and not any(n.endswith(".safetensors") for n in names):
            errs.append("the checkpoint has no *.safetensors file")

    def _indexes(self, names: set[str]) -> None:
        for idx in sorted(n for n in names if n.endswith(".safetensors.index.json")):
            full = os.path.join(self.path, *idx.split("/"))
            try:
                with open(full, "rb") as fh:
                    doc = json.loads(fh.read().decode("utf-8"))
                shards = set((doc.get("weight_map") or {}).values())
            except (OSError, ValueError, AttributeError) as exc:
                self.res["layout_errors"].append(f"{idx} cannot be read as a safetensors index ({exc})")
                continue
            base = idx.rsplit("/", 1)[0] + "/" if "/" in idx else ""
            absent = sorted(s for s in shards if base + s not in names)
            if absent:
                self.res["layout_errors"].append(
                    f"{idx} names shards that are not in the manifest: {', '.join(absent[:20])}")


def summary(res: dict[str, Any], limit: int) -> str:
    """The problems of ``res`` in one line, each list cut to ``limit`` names."""
    parts = []
    for key, label in (("missing", "missing"), ("wrong_size", "wrong size"), ("not_regular", "not regular"),
                       ("dangling_symlinks", "dangling symlinks")):
        items = res[key]
        if items:
            more = f" and {len(items) - limit} more" if len(items) > limit else ""
            parts.append(f"{label}: {', '.join(items[:limit])}{more}")
    listed = ("missing", "wrong size", "not regular files", "dangling symlinks")
    other = [p for p in res["problems"] if not any(p.startswith(k + ":") for k in listed)]
    return "; ".join(parts + other)


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
                             "stage-weights.yml -e weights_verify=full.", **res)
    module.exit_json(**res)


if __name__ == "__main__":
    main()
