#!/usr/bin/env python
"""Page-cache warming (cache_warmth's warmer) versus `cat files > /dev/null`, in one run.

    python3 benchmarks/bench_warm.py [--files 8] [--file-mib 512] [--threads 4] [--rounds 2]

Writes --files real files (random-looking data, on disk), then alternates for --rounds:
release the files from the page cache (posix_fadvise DONTNEED on these files only), time
`cat FILES > /dev/null`; release again, time _pagecache.warm_files() (parallel 16 MiB preads,
skipping resident ranges). Both must end with the files fully resident. Also times a second warm
of already-resident files (the no-op path). Goal: ours at least as fast as cat.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import time

from _common import GIB, MIB, evict, import_collection, write_filler  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--file-mib", type=int, default=512, help="default 8 x 512 MiB = 4 GiB; 64 for a quick run")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--block-mib", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", default="/var/tmp/lanekit-bench-warm")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    import_collection()
    from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache as pc

    os.makedirs(a.workdir, exist_ok=True)
    size = a.file_mib * MIB
    paths = []
    for i in range(a.files):
        p = os.path.join(a.workdir, "consolidated-%05d-of-%05d.safetensors" % (i + 1, a.files))
        if not os.path.exists(p) or os.path.getsize(p) != size:
            write_filler(p, size, i)
        paths.append(p)
    total = size * a.files
    ps = pc.page_size()

    def resident():
        return sum(pc.measure_file(p, psize=ps).resident_bytes(ps) for p in paths)

    cat_t, ours_t = [], []

    def run_cat():
        evict(paths)
        cold = resident()
        t = time.perf_counter()
        with open(os.devnull, "wb") as null:
            subprocess.run(["cat"] + paths, stdout=null, check=True)
        cat_t.append(time.perf_counter() - t)
        return cold, resident()

    def run_ours():
        evict(paths)
        cold = resident()
        t = time.perf_counter()
        w = pc.warm_files([(p, size) for p in paths], threads=a.threads, block_size=a.block_mib * MIB)
        ours_t.append(time.perf_counter() - t)
        return cold, resident(), w

    for r in range(a.rounds):
        # alternate the order so a change of machine load does not favour one side
        if r % 2 == 0:
            c0, c1 = run_cat()
            o0, o1, w = run_ours()
        else:
            o0, o1, w = run_ours()
            c0, c1 = run_cat()
        print("round %d: cat %.2f s (resident %.0f%% -> %.0f%%), ours %.2f s (%.0f%% -> %.0f%%, read %.2f GiB, "
              "skipped %.2f GiB already resident by readahead, limited by %s)" % (
                  r + 1, cat_t[-1], 100 * c0 / total, 100 * c1 / total, ours_t[-1],
                  100 * o0 / total, 100 * o1 / total, w.bytes_read / GIB,
                  w.bytes_skipped_resident / GIB, w.limited_by), flush=True)
    t = time.perf_counter()
    w2 = pc.warm_files([(p, size) for p in paths], threads=a.threads, block_size=a.block_mib * MIB)
    noop = time.perf_counter() - t
    evict(paths)
    if not a.keep:
        for p in paths:
            os.unlink(p)

    gib = total / GIB
    c, o = min(cat_t), min(ours_t)
    print()
    print("files: %d x %d MiB = %.2f GiB on %s; threads=%d block=%d MiB; %d cores, load %.1f; best of %d rounds" % (
        a.files, a.file_mib, gib, a.workdir, a.threads, a.block_mib, os.cpu_count(), os.getloadavg()[0], a.rounds))
    print("%-40s best %7.2f s  %6.2f GiB/s" % ("baseline cat files > /dev/null", c, gib / c))
    print("%-40s best %7.2f s  %6.2f GiB/s" % ("ours warm_files (cold)", o, gib / o))
    print("%-40s      %7.3f s  (read %d bytes)" % ("ours warm_files (already resident)", noop, w2.bytes_read))
    print()
    print("speed ratio cat / ours = %.2f  (goal >= 1.0: ours at least as fast)" % (c / o))


if __name__ == "__main__":
    main()
