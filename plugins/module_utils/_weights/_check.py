# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Stat-only check of a staged weights directory against its manifest (sizes, layout, indexes).

One job: tell whether a node sees the staged weights whole, without reading a byte of them. The
weights_verify module reports it per node; lane_probe uses it to prove the weights phase of a lane
that already serves.
"""
from __future__ import annotations

import json
import os
import stat as statmod
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import read_regular
from ansible_collections.lanekit.serving.plugins.module_utils._weights._manifest import (
    MANIFEST_NAME,
    STATE_DIR,
    load_manifest,
)

# A safetensors index names every tensor of the checkpoint (a few MiB for the largest models).
INDEX_MAX_BYTES = 256 << 20

LAYOUT_RULES: dict[str, dict[str, list[str]]] = {
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
                "finish; run the weights role (ansible-playbook lanekit.serving.stage_weights) first.")
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
                # never through a link and bounded: the export's writers choose what is there (a link to
                # /dev/zero would have root on every node read until out of memory)
                raw = read_regular(full, INDEX_MAX_BYTES, "The safetensors index")
                doc = json.loads((raw or b"").decode("utf-8"))
                shards = set((doc.get("weight_map") or {}).values())
            except LanekitError as exc:
                self.res["layout_errors"].append(str(exc))
                continue
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
