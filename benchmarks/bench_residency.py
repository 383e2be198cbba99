#!/usr/bin/env python
"""Page-cache residency measurement (cache_warmth's measurer) versus util-linux `fincore`, in one run.

    python3 benchmarks/bench_residency.py [--files 16] [--file-gib 4] [--warm-gib 1] [--repeat 5]

Creates sparse files (no disk space used; a checkpoint of --files x --file-gib), reads
--warm-gib of them into the page cache so the answer is not trivially zero, then times:

  baseline  fincore --bytes --noheadings --output RES,FILE FILES...   (a process, as a user runs it)
  ours      _pagecache_sys.measure_file() per file, in process (cachestat(2) where the kernel has it)
  ours      the same through a fresh `python3` process (interpreter start included)
  ours      the mmap + mincore fallback, in process

and checks that every method reports the same resident bytes. Goal: ours >= 20x faster than fincore.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

from _common import GIB, MIB, evict, import_collection  # noqa: E402

SUB = r"""
import sys, json, time
sys.path.insert(0, sys.argv[1])
from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache_sys as pc
ps = pc.page_size()
print(sum(pc.measure_file(p, psize=ps).resident_bytes(ps) for p in sys.argv[2:]))
"""


def best(fn, repeat):
    times, out = [], None
    for _unused in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--file-gib", type=float, default=4.0)
    ap.add_argument("--warm-gib", type=float, default=1.0, help="how much to read into the cache first")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workdir", default="/var/tmp/lanekit-bench-residency")
    a = ap.parse_args()
    if not shutil.which("fincore"):
        sys.exit("util-linux fincore is not installed (apt-get install util-linux)")
    base = import_collection()
    from ansible_collections.lanekit.serving.plugins.module_utils._weights import _pagecache_sys as pc

    os.makedirs(a.workdir, exist_ok=True)
    size = int(a.file_gib * GIB)
    paths = []
    for i in range(a.files):
        p = os.path.join(a.workdir, "consolidated-%05d-of-%05d.safetensors" % (i + 1, a.files))
        with open(p, "wb") as fh:
            fh.truncate(size)  # sparse: measuring does not care what the bytes are
        paths.append(p)
    evict(paths)
    # warm a part of it: the first warm-gib spread over the first files
    left = int(a.warm_gib * GIB)
    buf = bytearray(16 * MIB)
    for p in paths:
        if left <= 0:
            break
        with open(p, "rb", buffering=0) as fh:
            n = min(left, size)
            got = 0
            while got < n:
                got += fh.readinto(memoryview(buf)[:min(len(buf), n - got)])
        left -= n
    ps = pc.page_size()

    def fincore():
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES,FILE"] + paths,
                             check=True, capture_output=True, text=True).stdout
        return sum(int(line.split(None, 1)[0]) for line in out.splitlines() if line.strip())

    def ours(method="auto"):
        return sum(pc.measure_file(p, method=method, psize=ps).resident_bytes(ps) for p in paths)

    def ours_process():
        out = subprocess.run([sys.executable, "-c", SUB, str(base)] + paths, check=True, capture_output=True,
                             text=True).stdout
        return int(out.strip())

    method = pc.measure_file(paths[0]).method
    # agreement: all methods back to back, before the timing loops (the kernel may evict between calls)
    agree = {"fincore": fincore(), "ours": ours(), "ours-process": ours_process(), "mincore": ours("mincore")}
    f_best, f_med, f_res = best(fincore, a.repeat)
    o_best, o_med, o_res = best(ours, a.repeat)
    p_best, p_med, p_res = best(ours_process, a.repeat)
    m_best, m_med, m_res = best(lambda: ours("mincore"), a.repeat)
    evict(paths)
    for p in paths:
        os.unlink(p)

    total = a.files * size
    print()
    print("checkpoint: %d files x %.2f GiB = %.1f GiB (sparse), %.2f GiB resident; kernel %s; page %d B; "
          "load %.1f; best of %d" % (a.files, a.file_gib, total / GIB, o_res / GIB, os.uname().release, ps,
                                     os.getloadavg()[0], a.repeat))
    spread = max(agree.values()) - min(agree.values())
    print("resident bytes, back to back: %s; spread %d bytes (%s)" % (
        ", ".join("%s %d" % kv for kv in agree.items()), spread,
        "identical" if spread == 0 else "the kernel reclaimed pages between the calls"))
    print("%-46s best %9.3f ms  median %9.3f ms" % ("baseline fincore (process)", f_best * 1e3, f_med * 1e3))
    print("%-46s best %9.3f ms  median %9.3f ms" % ("ours in process (%s)" % method, o_best * 1e3, o_med * 1e3))
    print("%-46s best %9.3f ms  median %9.3f ms" % ("ours in a fresh python3 process", p_best * 1e3, p_med * 1e3))
    print("%-46s best %9.3f ms  median %9.3f ms" % ("ours mincore fallback in process", m_best * 1e3, m_med * 1e3))
    print()
    print("speed-up fincore / ours (in process)      = %.0fx  (goal >= 20x)" % (f_best / o_best))
    print("speed-up fincore / ours (fresh process)   = %.1fx" % (f_best / p_best))
    print("speed-up fincore / ours mincore fallback  = %.1fx" % (f_best / m_best))


if __name__ == "__main__":
    main()
