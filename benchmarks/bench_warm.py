#!/usr/bin/env python
"""Page-cache warming (cache_warmth's warmer) against `cat` and against the device's limit, in one run.

    python3 benchmarks/bench_warm.py [--files 8] [--file-mib 512] [--threads 4] [--rounds 3]

Writes --files real files (random-looking data, on disk), then alternates for --rounds, each side
from a cold cache (posix_fadvise DONTNEED on these files only; never a global cache drop):

  baseline  cat FILES > /dev/null           (what a person would type)
  limit     dd iflag=direct bs=64M per file  (the device's sequential read, page cache bypassed)
  ours      _pagecache_warm.warm_files()     (parallel sendfile to /dev/null, skipping what was
                                              resident before it began, under the memory floor)

cat and ours should end with the files fully resident (the run says when reclaim took pages
back at once). Also times a second warm of already-resident
files (the no-op path). Prints the best time of each side, GiB/s and the ratios; the goal is ours
at >= 90% of the limit's bandwidth (issue #28) and at least as fast as cat.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import time

from _common import GIB, MIB, dd_read_direct, evict, gibps, import_collection, write_filler  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--file-mib", type=int, default=512, help="default 8 x 512 MiB = 4 GiB; 64 for a quick run")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--block-mib", type=int, default=16)
    ap.add_argument("--dd-block-mib", type=int, default=64, help="dd's block size for the limit (default 64)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", default="/var/tmp/lanekit-bench-warm")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    import_collection()
    from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache_sys as pcsys
    from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache_warm as pcwarm

    os.makedirs(a.workdir, exist_ok=True)
    size = a.file_mib * MIB
    paths = []
    for i in range(a.files):
        p = os.path.join(a.workdir, f"consolidated-{i + 1:05d}-of-{a.files:05d}.safetensors")
        if not os.path.exists(p) or os.path.getsize(p) != size:
            write_filler(p, size, i)
        paths.append(p)
    total = size * a.files
    ps = pcsys.page_size()

    def resident():
        return sum(pcsys.measure_file(p, psize=ps).resident_bytes(ps) or 0 for p in paths)

    def warm():
        w = pcwarm.warm_files([(p, size) for p in paths], threads=a.threads, block_size=a.block_mib * MIB)
        if w.errors or w.limited_by != "done":
            raise SystemExit(f"warm_files stopped early: {w.limited_by} {w.errors}")
        return w

    def cat():
        with open(os.devnull, "wb") as null:
            subprocess.run(["cat", *paths], stdout=null, check=True)

    sides = {"cat": cat, "dd": lambda: dd_read_direct(paths, a.dd_block_mib), "ours": warm}
    times: dict[str, list[float]] = {name: [] for name in sides}
    short: list[str] = []
    order = list(sides)
    for r in range(a.rounds):
        # rotate the order so a change of machine load does not favour one side
        line = []
        for name in order[r % 3:] + order[:r % 3]:
            evict(paths)
            cold = resident()
            t = time.perf_counter()
            out = sides[name]()
            times[name].append(time.perf_counter() - t)
            hot = resident()
            if name != "dd" and hot < total:
                # reclaim (DAMON pageout on the build machines, another job's memory) may take pages
                # back at once: said, not fatal
                short.append(f"{name} {100 * hot / total:.2f}%")
            skipped = f", skipped {out.bytes_skipped_resident // MIB} MiB" if name == "ours" else ""
            line.append(f"{name} {times[name][-1]:.2f} s (resident {100 * cold / total:.0f}% -> "
                        f"{100 * hot / total:.0f}%{skipped})")
        print(f"round {r + 1}: {', '.join(line)}", flush=True)
    warm()
    t = time.perf_counter()
    w2 = warm()
    noop = time.perf_counter() - t
    evict(paths)
    if not a.keep:
        for p in paths:
            os.unlink(p)

    gib = total / GIB
    c, d, o = min(times["cat"]), min(times["dd"]), min(times["ours"])
    print()
    print(f"files: {a.files} x {a.file_mib} MiB = {gib:.2f} GiB on {a.workdir}; threads={a.threads} "
          f"block={a.block_mib} MiB; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; best of {a.rounds} rounds")
    rows = [("baseline cat files > /dev/null", c), (f"limit dd iflag=direct bs={a.dd_block_mib}M", d),
            ("ours warm_files (cold)", o)]
    for label, secs in rows:
        print(f"{label:<44} best {secs:7.2f} s  {gibps(total, secs):6.2f} GiB/s")
    print(f"{'ours warm_files (already resident)':<44}      {noop:7.3f} s  (read {w2.bytes_read} bytes)")
    print()
    print(f"ours / limit (bandwidth)  = {d / o:.2f}  (goal >= 0.90)")
    print(f"ours / cat   (bandwidth)  = {c / o:.2f}  (goal >= 1.0: at least as fast)")
    print(f"cat  / limit (bandwidth)  = {d / c:.2f}")
    if short:
        print(f"note: files less than fully resident right after a side ended (reclaim): {', '.join(short)}")


if __name__ == "__main__":
    main()
