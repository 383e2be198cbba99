#!/usr/bin/env python
# Copyright: lanekit developers
# Apache-2.0
"""Benchmark: lanekit's overhead over the engine's own boot, on the real-engine lane.

Issue #28 part 2. With the lane's image and weights already on the nodes, in one run, alternating
the two sides round by round so a change of machine load favours neither, this script times:

- baseline: the ranks started by hand with the plan's own argv (``reports/<lane>/plan.json``: each
  rank's ``docker_argv``, the paste-able ``docker run``), ``docker exec <node> docker run ...`` in
  the plan's start order, then polling the API's ``/health`` every 0.1 s until it answers 200;
- ours: ``deploy_lane`` from its start to the line "Lane <lane> is ready" (the whole playbook's
  time is printed too);
- the baseline's first token: after its /health, the same proof lanekit's ready probe makes (one
  streamed completion with the lane's API key, read from the inventory, until its first chunk).
  An engine may say ready before it can answer (vLLM's CPU build compiles on its first request), so
  the like-for-like figure is ours against the baseline with its first token;

and, for each, the delay between the engine's ready line (the head's log time stamp, ``docker logs
--timestamps``; the milestone the engine record reads, ``_engines.VLLM``) and the moment the side
saw the lane ready (the ready line arriving on the playbook's output, controller clock; the
simulated nodes share the controller's kernel clock). Before every timed side the lane's rank
containers are removed with ``docker rm -f`` (the node keeps the image, the staged weights and the
lane's secrets file, which the plan's argv reads), so lanekit deploys every phase each time, as
after a reboot of the lane. It prints the best and the median of each side, the ratio, what lanekit
adds, the goal (lanekit adds <= 15% or 10 s, whichever is larger; its ready declared within 1 s of
the engine's ready line) and the slowest tasks of the last deploy (profile_tasks).

Needs the simulated cluster with the real engine (``make sim-up``, which builds the vLLM CPU image
on the CPU nodes). The first deploy (not timed) puts the image and the weights on the nodes when
they are not there yet; the lane is left serving, deployed by lanekit.

    .venv/bin/python benchmarks/bench_boot.py [--rounds 3] [-i inventories/sim-cpu] [--lane tiny-llama-cpu-2x-vllm]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

from _common import import_collection  # noqa: E402 - the script's own folder

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"
GOAL_SHARE, GOAL_FLOOR_S, GOAL_DECLARE_S = 0.15, 10.0, 1.0
PROFILE = re.compile(r"^(.+?) -+ (\d+\.\d+)s$", re.M)
HEALTH_POLL_S = 0.1


def env(profile: bool = False) -> dict[str, str]:
    out = dict(os.environ)
    out.update(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", PYTHONUNBUFFERED="1")
    out["PATH"] = f"{BIN}{os.pathsep}{out.get('PATH', '')}"
    if profile:
        out.update(ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks", PROFILE_TASKS_TASK_OUTPUT_LIMIT="12")
    return out


def node_docker(host: str, *argv: str, check: bool = False) -> subprocess.CompletedProcess:
    """The docker CLI of one simulated node (its container is lksim-<host>)."""
    return subprocess.run(["docker", "exec", f"lksim-{host}", "docker", *argv], capture_output=True, text=True,
                          check=check)


def docker_time(text: str) -> float:
    """An RFC 3339 time with nanoseconds (docker's log time stamps) as epoch seconds."""
    text = text.strip().replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if not dot:
        return datetime.fromisoformat(text).timestamp()
    cut = next((i for i, ch in enumerate(rest) if ch in "+-"), len(rest))
    return datetime.fromisoformat(head + (rest[cut:] or "+00:00")).timestamp() + float("0." + (rest[:cut] or "0"))


def ready_pattern(engine: str) -> re.Pattern:
    """The engine's ready line, as lanekit reads it (the engine record's "ready" milestones)."""
    import_collection()
    from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines  # noqa: PLC0415
    patterns = [m.pattern.pattern for m in _engines.get(engine).milestones if m.phase == "ready"]
    return re.compile("|".join(f"(?:{p})" for p in patterns))


def engine_ready_at(plan: dict, pattern: re.Pattern) -> float | None:
    """Time stamp of the head's last ready line (None when it has none): vLLM says "Starting vLLM API
    server" and then uvicorn's "Application startup complete.", when /health answers; the later one
    is the engine's own word that it serves, so lanekit is measured from there."""
    head = next(r for r in plan["ranks"] if r.get("serves_api"))
    done = node_docker(head["host"], "logs", "--timestamps", head["container_name"])
    stamps = []
    for line in (done.stdout + "\n" + done.stderr).splitlines():
        stamp, _sep, text = line.partition(" ")
        if pattern.search(text):
            try:
                stamps.append(docker_time(stamp))
            except ValueError:
                continue
    return max(stamps) if stamps else None


def health(url: str, timeout: float = 2.0) -> int:
    try:
        with urllib.request.urlopen(url + "/health", timeout=timeout) as response:  # noqa: S310 - the lane's API
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return 0


def first_token(plan: dict, key: str, timeout: float = 300.0) -> float:
    """Seconds until the first chunk of one streamed completion (the proof lanekit's ready makes)."""
    body = json.dumps({"model": plan["api"].get("served_model_name") or "", "prompt": "hello", "max_tokens": 2,
                       "stream": True}).encode()
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(plan["api"]["url"] + "/v1/completions", data=body, headers=headers)
    start = time.time()
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the lane's API
        for line in response:
            if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
                return time.time() - start
    sys.exit("bench_boot: the hand-started lane streamed no token")


def api_key(inventory: str, host: str) -> str:
    """The lane's API key as the inventory gives it (lanekit_api_key), empty when it has none."""
    proc = subprocess.run([str(BIN / "ansible-inventory"), "-i", inventory, "--host", host], cwd=ROOT, env=env(),
                          capture_output=True, text=True, check=False)
    try:
        return str(json.loads(proc.stdout).get("lanekit_api_key") or "")
    except ValueError:
        return ""


def clear(plan: dict) -> None:
    """Remove the lane's rank containers (image, weights and the secrets file stay) and wait until
    the API port no longer answers."""
    for rank in plan["ranks"]:
        node_docker(rank["host"], "rm", "--force", rank["container_name"])
    deadline = time.monotonic() + 60
    while health(plan["api"]["url"], timeout=1.0) and time.monotonic() < deadline:
        time.sleep(0.2)


def baseline(plan: dict) -> tuple[float, float]:
    """The plan's docker run per rank in start order, then /health: (seconds to ready, ready time)."""
    by_rank = {int(r["node_rank"]): r for r in plan["ranks"]}
    start = time.time()
    for batch in plan["start_order"]:
        for number in batch:
            rank = by_rank[int(number)]
            argv = list(rank["docker_argv"])
            if argv[:2] != ["docker", "run"]:
                sys.exit(f"bench_boot: rank {number}'s docker_argv does not start with 'docker run': {argv[:4]}")
            done = node_docker(rank["host"], *argv[1:])
            if done.returncode != 0:
                sys.exit(f"bench_boot: docker run of rank {number} on {rank['host']} failed: {done.stderr.strip()[-600:]}")
    deadline = start + float(plan["boot"].get("budget_s") or 900)
    while health(plan["api"]["url"]) != 200:
        if time.time() > deadline:
            sys.exit("bench_boot: the hand-started lane did not answer /health within the boot budget")
        time.sleep(HEALTH_POLL_S)
    ready = time.time()
    return ready - start, ready


def ours(args: argparse.Namespace, round_no: int) -> tuple[float, float, float, str]:
    """deploy_lane from its start: (seconds to the ready line, whole playbook seconds, ready time, output)."""
    argv = [str(BIN / "ansible-playbook"), "playbooks/deploy_lane.yml", "-i", args.inventory, "-e", f"lane={args.lane}"]
    log_path = ROOT / ".sim" / f"bench-boot-{round_no}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    marker = f"Lane {args.lane} is ready"
    ready = None
    lines = []
    start = time.time()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env(profile=True), stdout=subprocess.PIPE,  # noqa: S603 - argv list
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    for line in proc.stdout or []:
        if ready is None and marker in line:
            ready = time.time()
        lines.append(line)
    proc.wait()
    whole = time.time() - start
    output = "".join(lines)
    log_path.write_text(output, encoding="utf-8")
    if proc.returncode != 0 or ready is None:
        sys.exit(f"bench_boot: deploy_lane failed or printed no '{marker}' line (rc {proc.returncode}); see {log_path}")
    return ready - start, whole, ready, output


def summary(values: list[float]) -> str:
    return f"best {min(values):6.1f} s  median {statistics.median(values):6.1f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", maxsplit=1)[0])
    parser.add_argument("-i", "--inventory", default="inventories/sim-cpu")
    parser.add_argument("--lane", default="tiny-llama-cpu-2x-vllm")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both sides, alternating (default 3)")
    args = parser.parse_args()

    print(f"bench_boot: deploying {args.lane} on {args.inventory} once, so its image and weights are on the nodes "
          "(not timed)", flush=True)
    first = subprocess.run([str(BIN / "ansible-playbook"), "playbooks/deploy_lane.yml", "-i", args.inventory,
                            "-e", f"lane={args.lane}"], cwd=ROOT, env=env(), capture_output=True, text=True, check=False)
    if first.returncode != 0:
        sys.exit("bench_boot: the set-up deploy failed:\n" + "\n".join(first.stdout.splitlines()[-25:]))
    with open(ROOT / "reports" / args.lane / "plan.json", encoding="utf-8") as fh:
        plan = json.load(fh)
    pattern = ready_pattern(plan["engine"])
    key = api_key(args.inventory, plan["ranks"][0]["host"])

    base_s, base_lag, base_token_s, our_s, whole_s, our_lag = [], [], [], [], [], []
    last_output, last_side = "", ""
    for round_no in range(1, args.rounds + 1):
        for side in ("baseline", "ours") if round_no % 2 else ("ours", "baseline"):
            clear(plan)
            if side == "baseline":
                seconds, seen = baseline(plan)
                base_s.append(seconds)
                base_token_s.append(seconds + first_token(plan, key))
                lags = base_lag
            else:
                seconds, whole, seen, last_output = ours(args, round_no)
                our_s.append(seconds)
                whole_s.append(whole)
                lags = our_lag
            engine_at = engine_ready_at(plan, pattern)
            if engine_at is None:
                sys.exit(f"bench_boot: the head's log has no ready line ({pattern.pattern}) after the {side} side")
            lags.append(seen - engine_at)
            last_side = side
            token = f", first token at {base_token_s[-1]:6.1f} s" if side == "baseline" else ""
            print(f"  round {round_no} {side:8}: ready in {seconds:6.1f} s, {seen - engine_at:5.2f} s after the engine's "
                  f"ready line{token}", flush=True)
    if last_side == "baseline":
        # Leave the lane as lanekit deploys it, not as the hand-started containers left it.
        clear(plan)
        ours(args, 0)

    slack = max(GOAL_SHARE * statistics.median(base_s), GOAL_FLOOR_S)
    added = statistics.median(our_s) - statistics.median(base_s)
    print("\nslowest tasks of the last deploy (profile_tasks):")
    for name, secs in PROFILE.findall(last_output)[:12]:
        print(f"  {float(secs):6.1f} s  {name.strip()}")
    print(f"\n{args.lane} on {args.inventory}: image and weights on the nodes, {args.rounds} rounds, sides alternating")
    print(f"baseline  docker run per rank (the plan's argv) + /health   {summary(base_s)}")
    print(f"baseline  the same + the first streamed token with the key  {summary(base_token_s)}")
    print(f"ours      deploy_lane start -> 'is ready'                {summary(our_s)}"
          f"  (whole playbook {summary(whole_s)})")
    print(f"ratio     best {min(our_s) / min(base_s):4.2f}x  median {statistics.median(our_s) / statistics.median(base_s):4.2f}x;"
          f" lanekit adds {added:5.1f} s (medians)")
    print(f"goal      lanekit adds <= {GOAL_SHARE:.0%} or {GOAL_FLOOR_S:.0f} s, whichever is larger (here {slack:.1f} s): "
          f"{'met' if added <= slack else 'not met'}")
    print(f"ready     engine's ready line -> lanekit's 'is ready': median {statistics.median(our_lag):5.2f} s, "
          f"worst {max(our_lag):5.2f} s (goal <= {GOAL_DECLARE_S:.0f} s: "
          f"{'met' if max(our_lag) <= GOAL_DECLARE_S else 'not met'}); "
          f"baseline's /health poll: median {statistics.median(base_lag):5.2f} s")
    like = statistics.median(our_s) - statistics.median(base_token_s)
    print(f"like for like  ours against the baseline with its first token: median "
          f"{statistics.median(our_s) / statistics.median(base_token_s):4.2f}x, lanekit adds {like:5.1f} s "
          f"({'met' if like <= max(GOAL_SHARE * statistics.median(base_token_s), GOAL_FLOOR_S) else 'not met'} "
          "against the same goal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
