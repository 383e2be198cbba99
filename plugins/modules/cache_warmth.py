#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Measure, warm (within a memory budget) or evict one node's page cache of a lane's weights."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: cache_warmth
short_description: Measure, warm within a memory budget, or evict the page cache of a lane's weights
version_added: 0.1.0
description:
  - Works on the files listed by the C(MANIFEST.json) of a staged weights directory, on the node it runs on.
  - O(state=measured) reports how much of each file and of the whole checkpoint is in this node's page
    cache, with C(cachestat(2)) where the kernel has it (one call per file, no data read) and mmap plus
    C(mincore(2)) otherwise. When permissions would make C(mincore) report every page resident (a caller
    that neither owns nor may write the file) the residency is reported as unknown, never as warm. Run it as
    root (C(become)) to measure.
  - O(state=warm) reads the files with parallel large sequential reads, this rank's files first, skipping
    ranges already resident. On a unified-memory host it stops before C(MemFree) would drop below what
    the engine will claim (O(memory_fraction) of the device memory) plus O(headroom_gib); on a host with a
    discrete GPU, whose page cache only competes with other reclaimable cache, before C(MemAvailable) would
    drop below O(headroom_gib). It also stops at O(budget_gib) or after O(max_seconds), and says which
    limit stopped it.
  - On unified-memory hosts (GB10 and similar) the GPU sees C(MemFree), not C(MemAvailable), so page cache
    is memory the engine cannot claim. The module reports C(MemFree), C(MemAvailable) and the gap, and warns
    when the engine would see less free memory than it claims.
  - O(state=evicted) releases this lane's files from the page cache with C(posix_fadvise(DONTNEED)), and
    only them. The module never touches the kernel's global cache controls and never evicts other files.
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
options:
  path:
    description:
      - The staged weights directory (the lane's C(weights.path)).
    type: path
    required: true
  state:
    description:
      - V(measured) only measures and never changes anything.
      - V(warm) reads the files into the page cache within the budget.
      - V(evicted) releases this lane's files from the page cache.
    type: str
    choices: [measured, warm, evicted]
    default: measured
  files:
    description:
      - Relative paths of the manifest files to work on. Defaults to every file of the manifest.
    type: list
    elements: str
  priority_files:
    description:
      - Files to warm before all others (relative paths).
    type: list
    elements: str
  rank:
    description:
      - This node's rank. With O(world_size), the rank's share of the naturally sorted files
        (C(sorted[rank::world_size]), the split the engines' own prefetch uses) is warmed first.
    type: int
  world_size:
    description:
      - Number of ranks of the lane.
    type: int
  method:
    description:
      - Residency measurement. V(auto) uses cachestat and falls back to mincore.
    type: str
    choices: [auto, cachestat, mincore]
    default: auto
  threads:
    description:
      - Parallel readers when warming.
    type: int
    default: 4
  block_size_mib:
    description:
      - Size of each read when warming, in MiB.
    type: int
    default: 16
  memory_fraction:
    description:
      - Fraction of the device memory the engine will claim at start (vLLM C(--gpu-memory-utilization),
        SGLang C(--mem-fraction-static)).
    type: float
    default: 0.9
  device_memory_gib:
    description:
      - Device memory in GiB the fraction applies to on a unified-memory host. Defaults to C(MemTotal) there.
      - Ignored on hosts with a discrete GPU, whose memory is not taken from the page cache; there only
        O(headroom_gib) is kept free.
    type: float
  headroom_gib:
    description:
      - Memory in GiB kept free on top of the engine's claim.
    type: float
    default: 4.0
  budget_gib:
    description:
      - Upper bound in GiB of newly cached data for one warm run.
    type: float
  max_seconds:
    description:
      - Time limit of a warm run.
    type: int
    default: 3600
  min_resident_pct:
    description:
      - With O(state=warm), the lane counts as warm when at least this percentage of its bytes is
        resident; nothing is read and nothing changes then. The kernel evicts a few pages between runs
        on any busy host, and re-reading them is not worth a change (or a second run that is never quiet).
      - V(100) warms every non-resident page.
    type: float
    default: 98.0
  memory_model:
    description:
      - V(auto) detects a unified-memory GPU (GB10, GH200, GB200, Jetson) from the NVIDIA driver.
      - V(unified) and V(discrete) override the detection.
    type: str
    choices: [auto, unified, discrete]
    default: auto
  per_file:
    description:
      - Return the per-file residency table.
    type: bool
    default: true
  allow_in_use:
    description:
      - Evict even while a process on this node maps or holds the files open (an engine may be loading).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details:
      - Measures, and reports what a warm would read (RV(would_read_bytes)) or an eviction would release
        (RV(would_evict_bytes)), without reading or evicting.
  diff_mode:
    support: none
  idempotent:
    support: partial
    details:
      - V(measured) never changes anything. V(warm) reports a change only when it read data that was not
        resident, so a second warm of a resident checkpoint reports none. The page cache is the kernel's, so
        a later run can find less resident than an earlier one left.
notes:
  - Run with C(become) so that the residency is measurable; otherwise it is reported as unknown.
seealso:
  - module: lanekit.serving.weights_verify
"""

EXAMPLES = r"""
---
- name: Measure how warm the lane's weights are on every node
  lanekit.serving.cache_warmth:
    path: /mnt/nfs/models/mistralai/Mistral-Large-4-1T-A52B-NVFP4
  become: true

- name: Warm this rank's files first, keeping room for the engine (GB10, GMU 0.89)
  lanekit.serving.cache_warmth:
    path: /mnt/nfs/models/mistralai/Mistral-Large-4-1T-A52B-NVFP4
    state: warm
    rank: 3
    world_size: 8
    memory_fraction: 0.89
    headroom_gib: 4
  become: true

- name: Release this lane's weights from the page cache (explicit only)
  lanekit.serving.cache_warmth:
    path: /mnt/nfs/models/mistralai/Mistral-Large-4-1T-A52B-NVFP4
    state: evicted
  become: true
"""

RETURN = r"""
residency_before:
  description: Totals before the action; C(bytes_resident) and C(pct) are null when any file's residency is unknown.
  returned: always
  type: dict
  sample: {files: 12, bytes_total: 4294967296, bytes_resident: 1073741824, pct: 25.0, method: cachestat, unknown_files: []}
residency_after:
  description: Totals after the action (the same as before for V(measured) and in check mode).
  returned: always
  type: dict
files:
  description: Per file path, size, pages, resident pages and percent before and after, and the method.
  returned: when O(per_file=true)
  type: list
  elements: dict
bytes_read:
  description: Bytes read by the warm.
  returned: always
  type: int
bytes_skipped_resident:
  description: Bytes the warm did not read because they were already resident.
  returned: always
  type: int
seconds:
  description: Duration of the warm or eviction.
  returned: always
  type: float
gib_per_s:
  description: Read throughput of the warm.
  returned: always
  type: float
limited_by:
  description: What ended the warm; V(done) (everything read), V(budget) (memory floor or O(budget_gib)),
    V(time) (O(max_seconds)), V(error), or V(none) when nothing was warmed.
  returned: always
  type: str
budget:
  description:
    - The memory figures of the warm budget, in bytes.
    - C(memfree_floor) is the level the C(floor_on) line of C(/proc/meminfo) is kept above (C(MemFree) on
      unified memory, C(MemAvailable) with a discrete GPU).
  returned: always
  type: dict
  sample: {memory_fraction: 0.89, device_memory: 130663014400, engine_claim: 116290082816, headroom: 4294967296,
           memfree_floor: 120585050112, floor_on: MemFree, budget: 0}
meminfo_before:
  description: MemTotal, MemFree, MemAvailable, Cached (bytes and GiB) and MemAvailable minus MemFree before.
  returned: always
  type: dict
meminfo_after:
  description: The same after the action.
  returned: always
  type: dict
unified_memory:
  description: Whether the node was treated as a unified-memory host.
  returned: always
  type: bool
gpu_model:
  description: GPU model read from the NVIDIA driver, when there is one.
  returned: always
  type: str
engine_sees_free_bytes:
  description: Free memory the engine will see at start on a unified-memory host (MemFree after the action).
  returned: always
  type: int
engine_short_bytes:
  description: How much less than its claim the engine would see free (0 when enough is free).
  returned: always
  type: int
would_read_bytes:
  description: Bytes a warm would read (check mode).
  returned: check mode and O(state=warm)
  type: int
would_evict_bytes:
  description: Resident bytes an eviction would release (check mode).
  returned: check mode and O(state=evicted)
  type: int
missing_files:
  description: >-
    Manifest files that cannot be opened on this node; they are left out (M(lanekit.serving.weights_verify) is the
    gate for them).
  returned: always
  type: list
  elements: str
in_use_by:
  description: PIDs on this node that map or hold open the files.
  returned: O(state=evicted)
  type: list
  elements: int
"""

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache as pc
from ansible_collections.lanekit.serving.plugins.module_utils._weights._manifest import MANIFEST_NAME, load_manifest

GIB = pc.GIB
MIB = pc.MIB


class CacheWarmth:
    """Measure, warm or evict the page-cache residency of one staged weights directory."""

    def __init__(self, p: dict[str, Any], check_mode: bool, warn: Callable[[str], None]) -> None:
        self.p = p
        self.check_mode = check_mode
        self.warn = warn
        self.path = p["path"].rstrip("/") or "/"
        self.psize = pc.page_size()

    def files(self) -> dict[str, int]:
        """{relative path: size} of the manifest's files (only ``files`` when given)."""
        man = load_manifest(os.path.join(self.path, MANIFEST_NAME))
        if man is None:
            raise LanekitError(
                f"{self.path} has no {MANIFEST_NAME}; stage the weights first (the file list comes from the "
                "manifest).")
        sizes = {f["path"]: int(f["size"]) for f in man["files"]}
        wanted = self.p["files"]
        if wanted:
            unknown = [f for f in wanted if f not in sizes]
            if unknown:
                raise LanekitError(f"These files are not in the manifest of {self.path}: "
                                   f"{', '.join(unknown[:20])}.")
            sizes = {k: v for k, v in sizes.items() if k in set(wanted)}
        return sizes

    def measure(self, rels: Iterable[str]) -> dict[str, pc.FileResidency]:
        out = {}
        for rel in rels:
            out[rel] = pc.measure_file(os.path.join(self.path, *rel.split("/")), method=self.p["method"],
                                       psize=self.psize)
        return out

    def run(self) -> dict[str, Any]:
        p = self.p
        if p["threads"] < 1 or p["block_size_mib"] < 1:
            raise LanekitError("threads and block_size_mib must be at least 1.")
        sizes = self.files()
        order = pc.order_for_rank(sizes, p["rank"], p["world_size"], p["priority_files"])
        mi_before = pc.read_meminfo()
        uma, gpu = pc.detect_uma()
        if p["memory_model"] == "unified":
            uma = True
        elif p["memory_model"] == "discrete":
            uma = False
        if not uma:
            device = 0  # a discrete GPU's memory is not taken from the page cache
        elif p["device_memory_gib"] is not None:
            device = int(p["device_memory_gib"] * GIB)
        else:
            device = mi_before.get("MemTotal", 0)
        if not 0.0 <= p["memory_fraction"] <= 1.0:
            raise LanekitError(f"memory_fraction must be between 0 and 1, not {p['memory_fraction']}.")
        claim = pc.engine_claim_bytes(p["memory_fraction"], device)
        headroom = int(max(0.0, p["headroom_gib"]) * GIB)
        floor = pc.memfree_floor(p["memory_fraction"], device, headroom)
        # The engine on unified memory sizes itself from MemFree, so there the page cache must leave
        # MemFree above its claim. With a discrete GPU, page cache is reclaimable memory that competes
        # only with other cache: a busy host sits near MemFree=0 all the time, and a MemFree floor would
        # make warming stop (and restart on every run) at whatever the rest of the host happened to cache.
        free_key = "MemFree" if uma else "MemAvailable"

        before = self.measure(order)
        sum_before = pc.summarize([before[r] for r in order], self.psize)
        unknown = sum_before["unknown_files"]
        if unknown:
            reasons = sorted({reason for r in order if (reason := before[r].reason)})
            self.warn(f"Residency of {len(unknown)} file(s) is unknown ({'; '.join(reasons)}); it is reported "
                      "as unknown, not as warm.")
        missing = [r for r in order if (before[r].reason or "").startswith("cannot open")]
        if missing:
            # weights_verify is the gate for missing files; here they are reported and left out
            self.warn(f"{len(missing)} weight file(s) cannot be opened on this node and are left out: "
                      f"{', '.join(missing[:10])}.")
            order = [r for r in order if r not in missing]
            sizes = {r: sizes[r] for r in order}
            sum_before = pc.summarize([before[r] for r in order], self.psize)
            unknown = sum_before["unknown_files"]

        non_resident = sum(max(0, sizes[r] - (before[r].resident_bytes(self.psize) or 0)) for r in order)
        cap = int(p["budget_gib"] * GIB) if p["budget_gib"] is not None else None
        budget = pc.warm_budget(mi_before.get(free_key, 0), floor, non_resident, cap)
        res: dict[str, Any] = {
            "changed": False, "path": self.path, "state": p["state"], "unified_memory": uma, "gpu_model": gpu,
            "residency_before": sum_before, "missing_files": missing, "bytes_read": 0, "bytes_skipped_resident": 0,
            "seconds": 0.0, "gib_per_s": 0.0, "limited_by": "none", "order": order[:50],
            "budget": {"memory_fraction": p["memory_fraction"], "device_memory": device, "engine_claim": claim,
                       "headroom": headroom, "memfree_floor": floor, "floor_on": free_key, "needed": non_resident,
                       "budget": budget, "cap": cap},
            "meminfo_before": pc.meminfo_report(mi_before),
        }
        after = before
        t0 = time.monotonic()
        if p["state"] == "warm":
            if self.check_mode:
                warm_enough = not unknown and (sum_before.get("pct") or 0) >= p["min_resident_pct"]
                res["would_read_bytes"] = 0 if warm_enough else budget
                res["changed"] = res["would_read_bytes"] > 0
                res["limited_by"] = "done" if warm_enough or budget >= non_resident else "budget"
            elif not unknown and (non_resident == 0 or (sum_before.get("pct") or 0) >= p["min_resident_pct"]):
                res["limited_by"] = "done"
            else:
                w = pc.warm_files([(os.path.join(self.path, *r.split("/")), sizes[r]) for r in order],
                                  threads=p["threads"], block_size=p["block_size_mib"] * MIB, floor_bytes=floor,
                                  free_key=free_key, budget_bytes=cap, max_seconds=p["max_seconds"],
                                  skip_resident=p["method"] != "mincore")
                if w.errors:
                    raise LanekitError(f"Warming failed while reading: {'; '.join(w.errors[:5])}.")
                res.update({"bytes_read": w.bytes_read, "bytes_skipped_resident": w.bytes_skipped_resident,
                            "seconds": round(w.seconds, 3), "limited_by": w.limited_by,
                            "gib_per_s": round(w.bytes_read / GIB / w.seconds, 3) if w.seconds > 0 else 0.0})
                after = self.measure(order)
                if w.limited_by == "budget":
                    self.warn(f"Warming stopped at the memory budget: {free_key} must stay above "
                              f"{floor / GIB:.1f} GiB (engine claim {claim / GIB:.1f} GiB + headroom "
                              f"{headroom / GIB:.1f} GiB); {self._not_resident(after, sizes) / GIB:.1f} GiB of the "
                              "lane's weights are still not resident.")
                elif w.limited_by == "time":
                    self.warn(f"Warming stopped after max_seconds={p['max_seconds']}.")
        elif p["state"] == "evicted":
            users = pc.processes_mapping(self.path)
            res["in_use_by"] = users
            if users and not p["allow_in_use"]:
                raise LanekitError(
                    f"Processes {', '.join(str(u) for u in users[:10])} on this node map or hold open files under "
                    f"{self.path} (an engine may be loading); refusing to evict. Stop them or set "
                    "allow_in_use=true.")
            resident = sum_before["bytes_resident_known"]
            if self.check_mode:
                res["would_evict_bytes"] = resident
                res["changed"] = resident > 0 or bool(unknown)
            else:
                pc.evict_files([os.path.join(self.path, *r.split("/")) for r in order])
                after = self.measure(order)
        res["seconds"] = res["seconds"] or round(time.monotonic() - t0, 3)
        sum_after = pc.summarize([after[r] for r in order], self.psize)
        res["residency_after"] = sum_after
        if not self.check_mode:
            if p["state"] == "warm":
                res["changed"] = res["bytes_read"] > 0
            elif p["state"] == "evicted":
                if sum_before["unknown_files"] or sum_after["unknown_files"]:
                    res["changed"] = True
                else:
                    res["changed"] = sum_after["bytes_resident"] < sum_before["bytes_resident"]
        mi_after = pc.read_meminfo()
        res["meminfo_after"] = pc.meminfo_report(mi_after)
        free_after = mi_after.get("MemFree", 0)
        res["engine_sees_free_bytes"] = free_after
        res["engine_short_bytes"] = max(0, claim - free_after) if uma else 0
        if uma and free_after < claim:
            self.warn(
                f"Unified memory: the engine will see {free_after / GIB:.1f} GiB free (MemFree) but claims "
                f"{claim / GIB:.1f} GiB ({p['memory_fraction']:.2f} x {device / GIB:.1f} GiB); page cache holds "
                f"{mi_after.get('Cached', 0) / GIB:.1f} GiB (MemAvailable {mi_after.get('MemAvailable', 0) / GIB:.1f} "
                "GiB). Engines that size from MemFree will refuse to start or get less KV cache.")
        if p["per_file"]:
            res["files"] = []
            for r in order:
                d = before[r].as_dict(self.psize, r)
                a = after[r]
                d["resident_pct_after"] = pc.pct(a.resident_bytes(self.psize), a.size)
                d["resident_bytes_after"] = a.resident_bytes(self.psize)
                res["files"].append(d)
        return res

    def _not_resident(self, after: dict[str, pc.FileResidency], sizes: dict[str, int]) -> int:
        return sum(max(0, sizes[r] - (after[r].resident_bytes(self.psize) or 0)) for r in sizes)


def argument_spec() -> dict[str, Any]:
    return dict(
        path=dict(type="path", required=True),
        state=dict(type="str", default="measured", choices=["measured", "warm", "evicted"]),
        files=dict(type="list", elements="str"),
        priority_files=dict(type="list", elements="str"),
        rank=dict(type="int"),
        world_size=dict(type="int"),
        method=dict(type="str", default="auto", choices=["auto", "cachestat", "mincore"]),
        threads=dict(type="int", default=4),
        block_size_mib=dict(type="int", default=16),
        memory_fraction=dict(type="float", default=0.9),
        device_memory_gib=dict(type="float"),
        headroom_gib=dict(type="float", default=4.0),
        budget_gib=dict(type="float"),
        max_seconds=dict(type="int", default=3600),
        min_resident_pct=dict(type="float", default=98.0),
        memory_model=dict(type="str", default="auto", choices=["auto", "unified", "discrete"]),
        per_file=dict(type="bool", default=True),
        allow_in_use=dict(type="bool", default=False),
    )


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    try:
        res = CacheWarmth(module.params, module.check_mode, module.warn).run()
    except LanekitError as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        path = module.params["path"]
        module.fail_json(msg=f"Page-cache work on {path} failed: {exc.strerror or exc} ({exc.filename or path}).")
    module.exit_json(**res)


if __name__ == "__main__":
    main()
