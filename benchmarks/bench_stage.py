#!/usr/bin/env python
"""Staging with verification (weights_stage) versus `cp -r` + `sha256sum`, in one run.

    python3 benchmarks/bench_stage.py [--size-gib 4] [--shards 8] [--workers 2] [--workdir DIR]

Creates a synthetic Mistral-consolidated checkpoint (tests/sim/make_checkpoint.py when present),
then, each from a cold source (the source files are released from the page cache with
posix_fadvise DONTNEED before every side; no global cache drop):

  baseline  cp -r SRC DST                 (the plain copy; not durable when it returns)
            sync                           (what it takes to make that copy durable)
            sha256sum DST/*                (verification after the copy, single-threaded)
  ours      LocalSource -> Stager.run()    (copy + sha256 while writing + fsync + rename + journal
                                            + MANIFEST.json/SHA256SUMS; durable when it returns)

Runs --rounds alternating rounds and keeps the best time of each side. Prints the times and the
ratios; the goal is ours <= 1.15 x the plain copy alone.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from _common import GIB, MIB, ROOT, evict, import_collection, write_filler  # noqa: E402


def files_under(d):
    out = []
    for root, _dirs, names in os.walk(d):
        for n in sorted(names):
            out.append(os.path.join(root, n))
    return sorted(out)


def timed(fn):
    t = time.perf_counter()
    r = fn()
    return time.perf_counter() - t, r


def run(argv, **kw):
    return subprocess.run(argv, check=True, **kw)


def rmtree(p):
    shutil.rmtree(p, ignore_errors=True)


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def ratio(a, b):
    return a / b if b > 0 else float("inf")


def make_checkpoint(out, size_gib, shards):
    gen = ROOT / "tests" / "sim" / "make_checkpoint.py"
    # the generator rounds tensor shapes down a little: ask for 2 % more so the checkpoint is at least size_gib
    size_mib = int(size_gib * 1024 * 1.02)
    if gen.is_file():
        subprocess.run([sys.executable, str(gen), "--out", out, "--size-mib", str(size_mib), "--shards",
                        str(shards)], check=True, stdout=subprocess.DEVNULL)
    else:
        os.makedirs(out, exist_ok=True)
        per = size_mib * MIB // shards
        for i in range(1, shards + 1):
            p = os.path.join(out, "consolidated-%05d-of-%05d.safetensors" % (i, shards))
            if not os.path.exists(p) or os.path.getsize(p) != per:
                write_filler(p, per, seed=i)
        with open(os.path.join(out, "params.json"), "w") as fh:
            json.dump({"dim": 1}, fh)
        with open(os.path.join(out, "tekken.json"), "w") as fh:
            json.dump({"vocab": []}, fh)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--size-gib", type=float, default=4.0, help="checkpoint size (default 4; 0.5 for a quick run)")
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2, help="weights_stage workers (default 2 = this machine's cores)")
    ap.add_argument("--block-mib", type=int, default=16)
    ap.add_argument("--workdir", default="/var/tmp/lanekit-bench-stage")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds; the best time of each side is kept")
    ap.add_argument("--keep", action="store_true", help="keep the generated checkpoint for the next run")
    a = ap.parse_args()
    import_collection()
    from ansible_collections.lanekit.serving.plugins.module_utils._weights._stage_sources import LocalSource
    from ansible_collections.lanekit.serving.plugins.module_utils._weights._staging import Stager

    os.makedirs(a.workdir, exist_ok=True)
    src = os.path.join(a.workdir, "src")
    need = a.size_gib * GIB * 2.2
    if free_bytes(a.workdir) < need:
        sys.exit("not enough free space in %s: need %.1f GiB" % (a.workdir, need / GIB))
    print("generating %.2f GiB synthetic checkpoint in %s ..." % (a.size_gib, src), flush=True)
    make_checkpoint(src, a.size_gib, a.shards)
    src_files = files_under(src)
    total = sum(os.path.getsize(p) for p in src_files)
    print("checkpoint: %d files, %.2f GiB" % (len(src_files), total / GIB))

    dst_cp = os.path.join(a.workdir, "dst-cp")
    dst_ours = os.path.join(a.workdir, "dst-ours")
    rmtree(dst_cp)
    rmtree(dst_ours)
    subprocess.run(["sync"], check=True)

    def baseline():
        evict(src_files)
        t_cp, _proc = timed(lambda: subprocess.run(["cp", "-r", src, dst_cp], check=True))
        t_sync, _proc = timed(lambda: subprocess.run(["sync"], check=True))
        cp_files = files_under(dst_cp)
        t_sum, _proc = timed(lambda: subprocess.run(["sha256sum"] + cp_files, check=True, stdout=subprocess.DEVNULL))
        evict(cp_files)
        rmtree(dst_cp)
        subprocess.run(["sync"], check=True)
        return t_cp, t_sync, t_sum

    def ours():
        evict(src_files)
        stager = Stager(LocalSource(src), dst_ours, model_id="bench/synthetic", revision="b" * 40,
                        workers=a.workers, block_size=a.block_mib * MIB)
        t, res = timed(stager.run)
        if res["files_fetched"] != len(src_files) or res["bytes_fetched"] != total:
            sys.exit("staging did not copy everything: %r" % res)
        t_rerun, res2 = timed(Stager(LocalSource(src), dst_ours, model_id="bench/synthetic", revision="b" * 40,
                                     workers=a.workers).run)
        if res2["changed"]:
            sys.exit("the re-run reported a change")
        rmtree(dst_ours)
        subprocess.run(["sync"], check=True)
        return t, t_rerun, res

    rounds = []
    for r in range(a.rounds):
        # alternate the order so a change of machine load does not favour one side
        if r % 2 == 0:
            b = baseline()
            o = ours()
        else:
            o = ours()
            b = baseline()
        rounds.append((b, o))
        print("round %d: cp -r %.2f s, sync %.2f s, sha256sum %.2f s | ours %.2f s (ratio to cp -r %.2f)" % (
            r + 1, b[0], b[1], b[2], o[0], ratio(o[0], b[0])), flush=True)
    if not a.keep:
        rmtree(src)
    t_cp = min(x[0][0] for x in rounds)
    t_sync = min(x[0][1] for x in rounds)
    t_sum = min(x[0][2] for x in rounds)
    t_ours = min(x[1][0] for x in rounds)
    t_rerun = min(x[1][1] for x in rounds)
    res = min(rounds, key=lambda x: x[1][0])[1][2]

    gib = total / GIB
    print()
    print("size: %.2f GiB in %d files; workers=%d block=%d MiB; machine: %d cores, load %.1f; best of %d rounds" % (
        gib, len(src_files), a.workers, a.block_mib, os.cpu_count(), os.getloadavg()[0], a.rounds))
    print("%-44s %8.2f s  %6.2f GiB/s" % ("baseline cp -r", t_cp, gib / t_cp))
    print("%-44s %8.2f s" % ("baseline sync after cp", t_sync))
    print("%-44s %8.2f s" % ("baseline sha256sum of the copy", t_sum))
    print("%-44s %8.2f s" % ("baseline cp -r + sha256sum", t_cp + t_sum))
    print("%-44s %8.2f s" % ("baseline cp -r + sync + sha256sum", t_cp + t_sync + t_sum))
    print("%-44s %8.2f s  %6.2f GiB/s" % ("ours weights_stage (verified, fsynced)", t_ours, gib / t_ours))
    print("%-44s %8.3f s" % ("ours re-run (stats only, changed=false)", t_rerun))
    print()
    print("ratio ours / cp -r alone              = %.2f  (goal <= 1.15)" % ratio(t_ours, t_cp))
    print("ratio ours / (cp -r + sync)           = %.2f" % ratio(t_ours, t_cp + t_sync))
    print("ratio ours / (cp -r + sha256sum)      = %.2f" % ratio(t_ours, t_cp + t_sum))
    print("phases: %s" % json.dumps(res["phases"]))


if __name__ == "__main__":
    main()
