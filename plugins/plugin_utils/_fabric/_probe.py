# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The fabric probe: one rank of the lane's fabric test, run inside the lane's own image.

One job: time all-reduce, all-gather and neighbour transfers over torch.distributed and print
the timings as one JSON line. The controller (``_launch.py``) passes this file's text to
``python3 -c`` in a short-lived container per node, with one JSON argument:
{rank, world, master_addr, master_port, backend, sizes, iters, warmup, timeout_s, pairs,
pair_size, floor_op, floor_gbps}. Standalone on purpose: the image has torch and the standard
library, not this collection, so the busbw factors and the neighbour pairs are written here again
(tests/unit pins that they agree with ``_busbw.py`` and ``_pairs.py``).

Never a silent pass: without torch (the sim's stand-in images), without a GPU for NCCL, or
without a distributed build, it prints a ``cannot_run`` result with the reason; a rendezvous or
collective that fails or outlives ``timeout_s`` prints ``failed`` with the reason. It always exits 0
after printing, so the container's exit code never hides the result.
"""
from __future__ import annotations

import datetime
import functools
import glob
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

MARK = "LANEKIT_FABRIC_RESULT "
VERSION = 1
NCCL_LOG = "/tmp/lanekit-fabric-nccl.%h.%p.log"
# The NCCL_DEBUG=INFO lines that say which transport NCCL chose (``_transport.py`` reads them).
NCCL_KEEP = ("NCCL version", "NET/", " via ", "Using network")


def bus_factor(op: str, n: int) -> float:
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op == "all_gather":
        return (n - 1) / n
    return 1.0


def neighbour_pairs(n: int) -> list[tuple[int, int]]:
    if n < 2:
        return []
    ring = [(0, 1)] if n == 2 else [(i, (i + 1) % n) for i in range(n)]
    return [link for a, b in ring for link in ((a, b), (b, a))]


def emit(result: dict[str, Any]) -> None:
    sys.stdout.write(MARK + json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()


def nccl_lines() -> list[str]:
    lines = []
    for path in sorted(glob.glob(NCCL_LOG.replace("%h", "*").replace("%p", "*"))):
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines += [line.rstrip("\n") for line in handle if any(key in line for key in NCCL_KEEP)]
        except OSError:
            continue
    return lines[:400]


def fabric_env() -> dict[str, str]:
    keys = ("NCCL_", "GLOO_", "UCX_", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(keys)}


class Probe:
    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args
        self.world = int(args["world"])
        self.rank = int(args["rank"])
        self.nccl = args["backend"] == "nccl"
        self.stage = "start"
        self.base = {"version": VERSION, "rank": self.rank, "world": self.world, "backend": args["backend"],
                     "hostname": socket.gethostname(), "torch": None, "nccl_version": None}
        # The environment the lane gave the container, before the probe adds its own NCCL_DEBUG settings.
        self.lane_env = fabric_env()
        self.torch: Any = None
        self.dist: Any = None
        self.device: Any = None

    def result(self, status: str, reason: str = "", **extra: Any) -> dict[str, Any]:
        out = dict(self.base, status=status, reason=reason, stage=self.stage, env=self.lane_env, **extra)
        if self.nccl:
            out["nccl_lines"] = nccl_lines()
        return out

    def sync(self) -> None:
        if self.nccl:
            self.torch.cuda.synchronize()

    def zeros(self, count: int) -> Any:
        return self.torch.zeros(count, dtype=self.torch.float32, device=self.device)

    def timed(self, run: Callable[[], Any]) -> float:
        self.sync()
        start = time.perf_counter()
        run()
        self.sync()
        return time.perf_counter() - start

    def collective(self, op: str, size: int) -> list[float]:
        n = self.world
        share = size // n if op == "all_gather" else size
        count = max(1, share // 4)
        if op == "all_reduce":
            buffer = self.zeros(count)

            def run() -> None:
                self.dist.all_reduce(buffer)
        else:
            send, gathered = self.zeros(count), self.zeros(count * n)
            gather_into = getattr(self.dist, "all_gather_into_tensor", None)

            def run() -> None:
                if gather_into is not None:
                    gather_into(gathered, send)
                else:
                    self.dist.all_gather(list(gathered.chunk(n)), send)
        warmup = int(self.args.get("warmup", 2))
        times = [self.timed(run) for dummy in range(warmup + int(self.args.get("iters", 5)))]
        return times[warmup:]

    def wants_pairs(self, timings: list[dict[str, Any]]) -> bool:
        mode = self.args.get("pairs", "auto")
        if self.world < 2 or mode == "never":
            return False
        if mode == "always" or not self.args.get("floor_gbps"):
            return True
        op = self.args.get("floor_op", "all_gather")
        mine = [t for t in timings if t["op"] == op]
        if not mine:
            return True
        last = max(mine, key=lambda t: t["size"])
        # The same mean over the ranks the controller takes, so every rank decides alike.
        mean = self.torch.tensor([sum(last["seconds"]) / len(last["seconds"])], dtype=self.torch.float64,
                                 device=self.device)
        self.dist.all_reduce(mean)
        seconds = float(mean.item()) / self.world
        busbw = last["size"] / 1e9 / seconds * bus_factor(op, self.world)
        return busbw < float(self.args["floor_gbps"])

    def transfers(self) -> list[dict[str, Any]]:
        size = int(self.args.get("pair_size") or max(self.args["sizes"]))
        buffer = self.zeros(max(1, size // 4))
        out = []
        for src, dst in neighbour_pairs(self.world):
            seconds = []
            for step in range(int(self.args.get("warmup", 2)) + int(self.args.get("iters", 5))):
                self.dist.barrier()
                if self.rank == src:
                    self.dist.send(buffer, dst)
                    self.sync()
                elif self.rank == dst:
                    elapsed = self.timed(functools.partial(self.dist.recv, buffer, src))
                    if step >= int(self.args.get("warmup", 2)):
                        seconds.append(elapsed)
            if self.rank == dst:
                out.append({"src": src, "dst": dst, "size": size, "seconds": seconds})
        return out

    def run(self) -> dict[str, Any]:
        if self.nccl:
            # Before NCCL starts: its INFO lines go to a file, not into the JSON on stdout.
            os.environ["NCCL_DEBUG"] = "INFO"
            os.environ["NCCL_DEBUG_FILE"] = NCCL_LOG
            # NCCL 2.23+ logs INIT, BOOTSTRAP and ENV by default; the network and channel lines are INIT and NET.
            os.environ["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
        self.stage = "import torch"
        try:
            import torch  # pylint: disable=import-outside-toplevel
            import torch.distributed as dist  # pylint: disable=import-outside-toplevel
        except Exception as exc:  # pylint: disable=broad-exception-caught
            return self.result("cannot_run", f"the image has no usable torch ({type(exc).__name__}: {exc})")
        self.torch, self.dist = torch, dist
        self.base["torch"] = getattr(torch, "__version__", None)
        if not dist.is_available():
            return self.result("cannot_run", f"torch {self.base['torch']} was built without torch.distributed")
        if self.nccl:
            if not torch.cuda.is_available():
                reason = (f"backend nccl needs a GPU, and torch {self.base['torch']} sees none in the container "
                          f"(torch.cuda.is_available() is False)")
                return self.result("cannot_run", reason)
            torch.cuda.set_device(0)
            self.device = torch.device("cuda", 0)
            version = getattr(getattr(torch.cuda, "nccl", None), "version", lambda: None)()
            self.base["nccl_version"] = ".".join(map(str, version)) if isinstance(version, tuple) else version
        else:
            self.device = torch.device("cpu")
        self.stage = "rendezvous"
        address = f"tcp://{self.args['master_addr']}:{self.args['master_port']}"
        try:
            dist.init_process_group(self.args["backend"], init_method=address, rank=self.rank, world_size=self.world,
                                    timeout=datetime.timedelta(seconds=float(self.args["timeout_s"])))
        except Exception as exc:  # pylint: disable=broad-exception-caught
            return self.result("failed", f"rendezvous at {address} failed: {type(exc).__name__}: {exc}")
        try:
            timings = []
            for op in ("all_reduce", "all_gather"):
                for size in sorted(int(s) for s in self.args["sizes"]):
                    self.stage = f"{op} {size} B"
                    timings.append({"op": op, "size": size, "seconds": self.collective(op, size)})
            self.stage = "pairs"
            transfers = self.transfers() if self.wants_pairs(timings) else []
            self.stage = "done"
            return self.result("ok", timings=timings, transfers=transfers)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            return self.result("failed", f"{self.stage} failed: {type(exc).__name__}: {exc}")
        finally:
            try:
                dist.destroy_process_group()
            except Exception:  # pylint: disable=broad-exception-caught
                pass


def main(argv: list[str]) -> int:
    try:
        args = json.loads(argv[0])
        probe = Probe(args)
    except (IndexError, ValueError, KeyError, TypeError) as exc:
        emit({"version": VERSION, "status": "failed", "reason": f"bad probe arguments: {exc}"})
        return 0
    started = time.monotonic()

    def give_up() -> None:
        emit(probe.result("failed", f"no result after {args['timeout_s']} s (stage: {probe.stage}): a rank "
                                    f"waits for a peer that never answered", seconds=time.monotonic() - started))
        os._exit(0)

    watchdog = threading.Timer(float(args.get("timeout_s", 300)) + 10, give_up)
    watchdog.daemon = True
    watchdog.start()
    result = probe.run()
    result["seconds"] = time.monotonic() - started
    watchdog.cancel()
    emit(result)
    # A NCCL or gloo thread may keep the interpreter alive after a failure: leave at once.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
