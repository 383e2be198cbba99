#!/usr/bin/env python
# Copyright: lanekit developers
# Apache-2.0
"""Benchmark: how long after a rank exits the boot wait names it, polling only against watching events.

Issue #28 part 3: a failed rank must be named < 1 s after its exit, at any poll interval. In one
run, for each side (``poll``: ``ready_exit_watch=false``, the wait sees an exit at its next
poll; ``events``: the default, every node watches its ranks' ``docker events`` between polls)
and each of ``--trials`` trials, this script:

1. deploys the lane with rank 0 hanging in the load (the stand-in engine's ``STANDIN_HANG_*``),
   so the wait keeps polling, and a per-trial environment value so every rank is new;
2. once the wait has printed its first status line, sleeps a random 1 s to 2 x ``--poll-s``
   and kills a random other rank with ``docker kill`` on its node;
3. when the playbook has failed, reads the failure bundle's ``verdict.json``: ``judged_at``
   (when the line that ended the wait was printed, controller clock) and the culprits, and the
   killed container's ``FinishedAt`` from ``docker inspect`` on its node (the simulated nodes
   share the controller's kernel clock, so the two compare directly).

It prints each side's median and worst delay and the goal. It needs the simulated cluster with
the lane's image and weights in place (``make sim-up``, one ``make demo`` or a deploy), and it
leaves the lane failed (run ``teardown_lane.yml`` or a deploy afterwards).

    .venv/bin/python benchmarks/bench_exit_detect.py [--trials 20] [--poll-s 5] [--sides poll,events]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import random
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"
GOAL_S = 1.0


def env() -> dict[str, str]:
    out = dict(os.environ)
    out.update(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    out["PATH"] = f"{BIN}{os.pathsep}{out.get('PATH', '')}"
    return out


def node_docker(host: str, *argv: str) -> subprocess.CompletedProcess:
    """The docker CLI of one simulated node (its container is lksim-<host>)."""
    return subprocess.run(["docker", "exec", f"lksim-{host}", "docker", *argv], capture_output=True, text=True,
                          check=False)


def docker_time(text: str) -> float:
    """An RFC 3339 time with nanoseconds (docker's FinishedAt) as epoch seconds."""
    text = text.strip().replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if not dot:
        return datetime.fromisoformat(text).timestamp()
    cut = next((i for i, ch in enumerate(rest) if ch in "+-"), len(rest))
    return datetime.fromisoformat(head + (rest[cut:] or "+00:00")).timestamp() + float("0." + (rest[:cut] or "0"))


def newest_bundle(lane: str, since: float) -> str | None:
    # A failure bundle is a folder with its verdict.json (the ledger's timeline/ folder beside it is not one).
    found = [d for d in glob.glob(str(ROOT / "reports" / lane / "*")) if os.path.isfile(os.path.join(d, "verdict.json"))
             and os.path.getmtime(d) >= since]
    return max(found, key=os.path.getmtime) if found else None


def trial(args: argparse.Namespace, side: str, number: int, plan: dict) -> tuple[float, str]:
    """One deploy with a rank killed mid-wait: (delay in seconds, what happened)."""
    overrides = {"serve": {"env": {"STANDIN_HANG_RANK": "0", "STANDIN_HANG_PHASE": "load",
                                   "LANEKIT_BENCH_TRIAL": f"{side}-{number}-{time.time():.0f}"}}}
    argv = [str(BIN / "ansible-playbook"), "playbooks/deploy_lane.yml", "-i", args.inventory, "-e", f"lane={args.lane}",
            "-e", "lane_cli_overrides=" + json.dumps(overrides), "-e", f"ready_poll_s={args.poll_s}",
            "-e", "ready_stall_s=900", "-e", f"ready_exit_watch={'true' if side == 'events' else 'false'}"]
    log_path = ROOT / ".sim" / f"bench-exit-{side}-{number}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env(), stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
        banner = f"lane_wait {args.lane}:"
        while proc.poll() is None and banner not in log_path.read_text(encoding="utf-8", errors="replace"):
            time.sleep(0.2)
        if proc.poll() is not None:
            sys.exit(f"bench_exit_detect: the deploy ended before its wait began; see {log_path}")
        time.sleep(random.uniform(1.0, 2 * args.poll_s))
        victims = [r for r in plan["ranks"] if int(r["node_rank"]) != 0]
        victim = random.choice(victims)
        kill = node_docker(victim["host"], "kill", victim["container_name"])
        if kill.returncode != 0:
            proc.kill()
            sys.exit(f"bench_exit_detect: docker kill {victim['container_name']} failed: {kill.stderr.strip()}")
        proc.wait(timeout=args.poll_s * 10 + 600)
    finished = node_docker(victim["host"], "inspect", "-f", "{{.State.FinishedAt}}", victim["container_name"])
    exited_at = docker_time(finished.stdout)
    bundle = newest_bundle(args.lane, started)
    if proc.returncode == 0 or bundle is None:
        sys.exit(f"bench_exit_detect: the wait did not fail with a bundle after the kill; see {log_path}")
    with open(os.path.join(bundle, "verdict.json"), encoding="utf-8") as fh:
        verdict = json.load(fh)
    rank = int(victim["node_rank"])
    if rank not in (verdict.get("culprits") or []):
        sys.exit(f"bench_exit_detect: rank {rank} was killed but the wait blamed {verdict.get('culprits')}; see {bundle}")
    delay = float(verdict["judged_at"]) - exited_at
    seen = "at the event" if verdict.get("exit_seen") else "at a poll"
    return delay, f"r{rank} on {victim['host']} killed, named {delay:.2f} s after its exit ({seen})"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", maxsplit=1)[0])
    parser.add_argument("-i", "--inventory", default="inventories/sim")
    parser.add_argument("--lane", default="mistral-large4-nvfp4-8x-vllm")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--poll-s", type=int, default=5, help="the wait's poll interval (ready_poll_s)")
    parser.add_argument("--sides", default="poll,events", help="poll, events or both (default)")
    args = parser.parse_args()
    plan_path = ROOT / "reports" / args.lane / "plan.json"
    if not plan_path.is_file():
        sys.exit(f"bench_exit_detect: no plan at {plan_path}; deploy {args.lane} on {args.inventory} once first")
    with open(plan_path, encoding="utf-8") as fh:
        plan = json.load(fh)
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    delays: dict[str, list[float]] = {side: [] for side in sides}
    for number in range(1, args.trials + 1):
        # alternate the sides so a change of machine load does not favour one
        for side in sides if number % 2 else sides[::-1]:
            delay, what = trial(args, side, number, plan)
            delays[side].append(delay)
            print(f"  {side:6} trial {number:2}: {what}", flush=True)
    print(f"\n{args.lane} on {args.inventory}, poll every {args.poll_s} s, {args.trials} kills per side at random moments")
    for side in sides:
        values = delays[side]
        print(f"{side:6}  median {statistics.median(values):5.2f} s  worst {max(values):5.2f} s")
    if "events" in delays:
        worst = max(delays["events"])
        print(f"goal: every exit named < {GOAL_S:.0f} s after it happens -> {'met' if worst < GOAL_S else 'not met'}"
              f" (worst {worst:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
