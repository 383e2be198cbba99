#!/usr/bin/env python
# Copyright: lanekit developers
# Apache-2.0
"""Benchmark: a no-op re-run of deploy against the connection floor, on one inventory.

Operators re-run ``deploy_lane.yml`` as a health check and after every small edit, so a re-run
of a lane that already serves should cost little more than reaching the nodes. In one run this
script:

1. makes sure the lane serves (deploys it once when it does not; that run is not timed);
2. times ``ansible all -m ansible.builtin.ping`` on the same inventory (the floor: one round
   trip to every host through the inventory's connection plugin), ``--repeat`` times;
3. times ``deploy_lane.yml`` (nothing to change: it must report changed=0 on every host), and
   the same in check mode, ``--repeat`` times each, with the profile_tasks callback so the
   slowest tasks are printed;

then prints the median of each, the ratios deploy/ping and check/ping, and the goal (6x).
It only contacts the inventory's hosts. Default inventory: the simulated cluster.

    .venv/bin/python benchmarks/bench_rerun.py [-i inventories/sim] [--lane NAME] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"
GOAL_RATIO = 6.0
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
PROFILE = re.compile(r"^(.+?) -+ (\d+\.\d+)s$", re.M)


def _env(profile: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["ANSIBLE_COLLECTIONS_PATH"] = str(ROOT / ".collections")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    if profile:
        env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.posix.profile_tasks"
        env["PROFILE_TASKS_TASK_OUTPUT_LIMIT"] = "12"
    return env


def _run(argv: list[str], profile: bool = False) -> tuple[float, subprocess.CompletedProcess]:
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=_env(profile), capture_output=True, text=True, check=False)
    return time.monotonic() - start, proc


def _recap(output: str) -> dict[str, tuple[int, int, int, int]]:
    return {m[1]: (int(m[2]), int(m[3]), int(m[4]), int(m[5])) for m in RECAP.finditer(output)}


def _deploy_argv(inventory: str, lane: str, check: bool) -> list[str]:
    argv = [str(BIN / "ansible-playbook"), "playbooks/deploy_lane.yml", "-i", inventory, "-e", f"lane={lane}"]
    return argv + (["--check"] if check else [])


def _fail(what: str, proc: subprocess.CompletedProcess) -> None:
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
    sys.exit(f"bench_rerun: {what} failed (rc {proc.returncode}):\n{tail}")


def _quiet_deploy(inventory: str, lane: str, check: bool) -> tuple[float, str]:
    seconds, proc = _run(_deploy_argv(inventory, lane, check), profile=True)
    if proc.returncode != 0:
        _fail("the re-run of deploy" + (" in check mode" if check else ""), proc)
    changed = {host: counts[1] for host, counts in _recap(proc.stdout).items() if counts[1]}
    if changed:
        sys.exit(f"bench_rerun: the re-run changed something ({changed}); it is not a no-op, "
                 "so its time says nothing about the re-run cost")
    return seconds, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", maxsplit=1)[0])
    parser.add_argument("-i", "--inventory", default="inventories/sim")
    parser.add_argument("--lane", default="mistral-large4-nvfp4-8x-vllm")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    print(f"bench_rerun: making sure {args.lane} serves on {args.inventory} (not timed)")
    seconds, proc = _run(_deploy_argv(args.inventory, args.lane, check=False))
    if proc.returncode != 0:
        _fail("the set-up deploy", proc)
    print(f"  set-up deploy took {seconds:.1f} s")

    ping, deploy, check = [], [], []
    last_profile = ""
    for round_no in range(1, args.repeat + 1):
        seconds, proc = _run([str(BIN / "ansible"), "all", "-i", args.inventory, "-m", "ansible.builtin.ping"])
        if proc.returncode != 0:
            _fail("ansible all -m ping", proc)
        ping.append(seconds)
        seconds, out = _quiet_deploy(args.inventory, args.lane, check=False)
        deploy.append(seconds)
        last_profile = out
        seconds, _out = _quiet_deploy(args.inventory, args.lane, check=True)
        check.append(seconds)
        print(f"  round {round_no}: ping {ping[-1]:.1f} s, deploy {deploy[-1]:.1f} s, check {check[-1]:.1f} s")

    floor, rerun, checked = (statistics.median(v) for v in (ping, deploy, check))
    print("\nslowest tasks of the last no-op deploy (profile_tasks):")
    for name, secs in PROFILE.findall(last_profile)[:12]:
        print(f"  {float(secs):6.1f} s  {name.strip()}")
    print(f"\nbaseline  ansible all -m ping       {floor:6.1f} s (median of {args.repeat})")
    print(f"ours      deploy_lane.yml, no-op    {rerun:6.1f} s  ratio {rerun / floor:4.1f}x")
    print(f"ours      deploy_lane.yml --check   {checked:6.1f} s  ratio {checked / floor:4.1f}x")
    print(f"goal      within {GOAL_RATIO:.0f}x of ping: "
          f"{'met' if max(rerun, checked) <= GOAL_RATIO * floor else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
