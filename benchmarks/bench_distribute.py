#!/usr/bin/env python
# Copyright: lanekit developers
# Apache-2.0
"""Benchmark: distribute a >= 1 GiB image to the 8 simulated nodes.

Needs the simulated cluster (`make sim-up`). In one run it:

1. builds a benchmark image (the vLLM stand-in base + a layer of incompressible random data,
   `--blob-mib`, default 1024) on the builder spark-01 with the collection's image role;
2. removes it from the other nodes and distributes it with the collection (role
   lanekit.serving.image, method stream by default: one `docker save` on the builder streamed to
   every node in parallel, each node proves it can run the image) and times the whole playbook;
3. removes it again and distributes it the bring-up report's way: `docker save` on the builder
   piped into `docker load` on one node after another (two argv processes joined by a pipe,
   through `docker exec`, as `ssh a docker save | ssh b docker load` would), and times it;
4. re-runs the collection with every node current and times that;

then prints both times, the ratio, and the re-run's share of one serial transfer. Only loopback
and the simulated cluster's containers are contacted. The benchmark image and its lock live
under .sim/bench and are removed from the nodes at the end (``--keep`` keeps them).

With ``--link-mbit N`` it measures the link-bound regime instead: it caps every node's and the
registry's egress at N Mbit/s (tests/sim/playbooks/sim_links.yml), then in one run times serial
``docker save | docker load`` over the capped fabric (the builder sends, each node loads, one after
another; each of those is one single-node transfer), the registry (push once, pull everywhere),
the parallel stream from the builder (star) and the relay (chain), and prints each time and its
ratio to one single-node transfer. The caps are removed at the end, also on failure.

    .venv/bin/python benchmarks/bench_distribute.py [--blob-mib 1024] [--method stream|registry|relay]
    .venv/bin/python benchmarks/bench_distribute.py --link-mbit 100 --blob-mib 128
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".collections"))

import yaml  # noqa: E402

from ansible_collections.lanekit.serving.plugins.module_utils._image._spec import (  # noqa: E402
    load_image_spec,
    resolve_image,
)

NODES = [f"spark-{i:02d}" for i in range(1, 9)]
CONTAINER = "lksim-{}"
BUILDER = "spark-01"
BASE_IMAGE = "mistral-large4-vllm"  # the stand-in whose sim pin the benchmark image builds on
WORK = os.path.join(REPO, ".sim", "bench")
SIM_REGISTRY = "172.31.213.2:5000"

BLOB_PATCH = '''#!/usr/bin/env python3
"""Benchmark payload: {mib} MiB of incompressible data in /opt/bench/blob."""
import os
os.makedirs("/opt/bench", exist_ok=True)
with open("/opt/bench/blob", "wb") as handle:
    for _ in range({mib} // 4):
        handle.write(os.urandom(4 << 20))
print("bench blob written")
'''


def log(message: str) -> None:
    print(message, flush=True)


def docker_exec(node: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "exec", CONTAINER.format(node), "docker", *args],
                          capture_output=True, text=True, check=check)


def sim_pins() -> dict:
    path = os.path.join(REPO, "inventories", "sim", "group_vars", "all", "sim_pins.yml")
    if not os.path.isfile(path):
        sys.exit(f"{path} is missing: bring the simulated cluster up first (make sim-up).")
    with open(path, encoding="utf-8") as handle:
        return (yaml.safe_load(handle) or {}).get("lanekit_image_digests") or {}


def check_sim() -> None:
    for node in NODES:
        done = subprocess.run(["docker", "exec", CONTAINER.format(node), "docker", "version", "--format", "{{.Server.Version}}"],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"node {node} ({CONTAINER.format(node)}) is not running a docker engine: {done.stderr.strip()} "
                     f"Bring the simulated cluster up first (make sim-up).")


def write_spec(blob_mib: int, pins: dict) -> dict:
    """The benchmark image spec under .sim/bench/images/bench-blob; returns the plan's image section."""
    name = "bench-blob"
    images_dir = os.path.join(WORK, "images")
    spec_dir = os.path.join(images_dir, name)
    shutil.rmtree(spec_dir, ignore_errors=True)
    os.makedirs(os.path.join(spec_dir, "patches"))
    digest = (pins.get(BASE_IMAGE) or {}).get("amd64")
    if not digest:
        sys.exit(f"sim_pins.yml has no amd64 digest for {BASE_IMAGE}; re-run make sim-up.")
    spec = {
        "name": name,
        "description": f"Benchmark image: the vLLM stand-in plus {blob_mib} MiB of random data.",
        "upstream": {"repository": "vllm/vllm-openai", "tag": "mistral-large-4", "digests": {"amd64": digest}},
        "entrypoint": ["vllm", "serve"],
        "patches": [{"file": "patches/make_blob.py"}],
        "lanes": ["benchmark"],
    }
    with open(os.path.join(spec_dir, "image.yml"), "w", encoding="utf-8") as handle:
        yaml.safe_dump(spec, handle, sort_keys=False)
    patch = os.path.join(spec_dir, "patches", "make_blob.py")
    with open(patch, "w", encoding="utf-8") as handle:
        handle.write(BLOB_PATCH.format(mib=blob_mib))
    os.chmod(patch, 0o644)
    resolved = resolve_image(load_image_spec(images_dir, name), "amd64", {})
    keys = ("name", "ref", "content_hash", "base_ref", "base_digest", "arch", "platform", "pinned", "pin_problem",
            "spec_dir", "entrypoint", "patches", "labels", "repository", "tag")
    return {key: resolved[key] for key in keys}


def write_playbook() -> str:
    path = os.path.join(WORK, "distribute.yml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(
            "---\n"
            "- name: Benchmark the image role\n"
            "  hosts: lane_nodes\n"
            "  gather_facts: false\n"
            "  roles:\n"
            "    - role: lanekit.serving.image\n"
        )
    return path


DISTRIBUTE_TASK = "Get the image onto the node and prove the node can run it"


def task_seconds(log_text: str, name: str) -> float:
    """The profile_tasks time of one task (the nodes' transfer and exec probe), 0.0 when absent."""
    for line in log_text.splitlines():
        # TASKS RECAP lines: "role : task name ------- 43.76s" (the dashes pad to a width, down to one)
        found = re.search(r" -+ (\d+(?:\.\d+)?)s$", line.rstrip())
        if name in line and found:
            return float(found.group(1))
    return 0.0


def run_role(playbook: str, plan_image: dict, method: str, label: str, delta: bool = True) -> tuple[float, str]:
    extra = {
        "image_stream_delta": delta,
        "image_plan": plan_image,
        "image_lock_file": os.path.join(WORK, "bench-blob.image.lock.yml"),
        "image_lock_update": True,
        "image_method": method,
        "image_builder": BUILDER,
    }
    if method == "registry":
        extra["image_registry"] = SIM_REGISTRY
    extra_file = os.path.join(WORK, "extra.json")
    with open(extra_file, "w", encoding="utf-8") as handle:
        json.dump(extra, handle)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks")
    binary = os.path.join(REPO, ".venv", "bin", "ansible-playbook")
    start = time.monotonic()
    done = subprocess.run([binary, "-i", os.path.join(REPO, "inventories", "sim"), playbook, "-e", f"@{extra_file}"],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    with open(os.path.join(WORK, f"{label}.log"), "w", encoding="utf-8") as handle:
        handle.write(done.stdout + done.stderr)
    if done.returncode != 0:
        sys.exit(f"{label}: ansible-playbook failed (exit {done.returncode}); see {WORK}/{label}.log\n"
                 + "\n".join(done.stdout.splitlines()[-25:]))
    lines = done.stdout.splitlines()
    recap = [line for line in lines if line.startswith("spark-")]
    said = [line.strip().strip("-").strip().strip("'") for line in lines
            if line.strip().startswith("- ") and ": " in line and ("loaded" in line or "current" in line or "pulled" in line)]
    if said:
        recap += ["  nodes:"] + ["    " + line for line in said]
    if "TASKS RECAP" in done.stdout:
        top = lines[lines.index(next(text for text in lines if text.startswith("TASKS RECAP"))) + 3:][:5]
        recap += ["  slowest tasks:"] + ["    " + line for line in top]
    return seconds, "\n".join(recap)


def remove_everywhere_but_builder(ref: str) -> None:
    for node in NODES:
        if node == BUILDER:
            continue
        docker_exec(node, "image", "rm", "--force", ref, check=False)
        docker_exec(node, "image", "prune", "--force", check=False)


def serial_save_load(ref: str) -> list[float]:
    """The report's way: docker save on the builder | docker load on each node, one after another."""
    times = []
    for node in NODES:
        if node == BUILDER:
            continue
        start = time.monotonic()
        save = subprocess.Popen(["docker", "exec", CONTAINER.format(BUILDER), "docker", "save", ref],
                                stdout=subprocess.PIPE)
        load = subprocess.run(["docker", "exec", "-i", CONTAINER.format(node), "docker", "load"],
                              stdin=save.stdout, capture_output=True, text=True, check=False)
        save.stdout.close()
        if save.wait() != 0 or load.returncode != 0:
            sys.exit(f"serial save|load to {node} failed: {load.stderr.strip()}")
        times.append(time.monotonic() - start)
        log(f"  serial: {node} loaded in {times[-1]:.1f} s")
    return times


# Serial over the fabric: the builder sends `docker save` on a TCP port, the node pipes what it
# receives into `docker load` (what `ssh builder docker save | ssh node docker load` does), so the
# bytes cross the capped links. (docker exec pipes would bypass them through the host.)
SEND_SCRIPT = r"""
import socket, subprocess, sys
listener = socket.create_server(("0.0.0.0", int(sys.argv[1])))
conn, _addr = listener.accept()
save = subprocess.Popen(["docker", "save", sys.argv[2]], stdout=subprocess.PIPE)
while True:
    chunk = save.stdout.read(1 << 20)
    if not chunk:
        break
    conn.sendall(chunk)
conn.close()
sys.exit(save.wait())
"""
RECEIVE_SCRIPT = r"""
import socket, subprocess, sys, time
for _attempt in range(100):
    try:
        conn = socket.create_connection((sys.argv[1], int(sys.argv[2])))
        break
    except OSError:
        time.sleep(0.2)
load = subprocess.Popen(["docker", "load"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
while True:
    chunk = conn.recv(1 << 20)
    if not chunk:
        break
    load.stdin.write(chunk)
load.stdin.close()
sys.exit(load.wait())
"""
FABRIC_BUILDER = "172.31.213.11"
SERIAL_PORT = 47190


def fabric_save_load(ref: str, node: str) -> float:
    start = time.monotonic()
    send = subprocess.Popen(["docker", "exec", CONTAINER.format(BUILDER), "python3", "-c", SEND_SCRIPT,
                             str(SERIAL_PORT), ref], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    receive = subprocess.run(["docker", "exec", CONTAINER.format(node), "python3", "-c", RECEIVE_SCRIPT,
                              FABRIC_BUILDER, str(SERIAL_PORT)], capture_output=True, text=True, check=False)
    send_rc = send.wait(timeout=600)
    if send_rc != 0 or receive.returncode != 0:
        raise SystemExit(f"serial save|load to {node} over the fabric failed: {receive.stderr.strip()[-500:]} "
                         f"{send.stderr.read().decode(errors='replace')[-500:]}")
    return time.monotonic() - start


def set_links(mbit: int) -> None:
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    done = subprocess.run([os.path.join(REPO, ".venv", "bin", "ansible-playbook"),
                           os.path.join(REPO, "tests", "sim", "playbooks", "sim_links.yml"),
                           "-e", f"sim_cluster_link_mbit={mbit}"], cwd=REPO, env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"could not set the link caps to {mbit} Mbit/s:\n" + "\n".join(done.stdout.splitlines()[-15:]))
    log(f"links capped at {mbit} Mbit/s" if mbit else "link caps removed")


def link_bound(args, playbook: str, plan_image: dict, ref: str, size: int) -> int:
    """Serial, registry, star and relay over links capped at --link-mbit, in one run."""
    set_links(args.link_mbit)
    remove_everywhere_but_builder(ref)
    log("serial docker save | docker load over the fabric, one node after another")
    serial = []
    for node in NODES[1:]:
        serial.append(fabric_save_load(ref, node))
        log(f"  serial: {node} loaded in {serial[-1]:.1f} s")
    one = sorted(serial)[len(serial) // 2]
    rows = [("serial save|load (7 transfers)", sum(serial), sum(serial))]
    for method, label in (("registry", "registry push once, pull everywhere"), ("stream", "star: parallel stream"),
                          ("relay", "relay: chain")):
        remove_everywhere_but_builder(ref)
        log(f"collection, method {method}: 7 nodes lack the image")
        seconds, recap = run_role(playbook, plan_image, method, f"link-{method}")
        log(recap)
        with open(os.path.join(WORK, f"link-{method}.log"), encoding="utf-8") as handle:
            fill = task_seconds(handle.read(), DISTRIBUTE_TASK)
        rows.append((label, seconds, fill or seconds))
    log("")
    log(f"image {ref}, {size / (1 << 30):.2f} GiB (docker's size; the stream carries the whole save), "
        f"{len(NODES) - 1} nodes from {BUILDER}, links capped at {args.link_mbit} Mbit/s")
    log(f"one single-node transfer (median of the serial ones): {one:7.1f} s")
    log(f"{'method':40s} {'playbook':>9s} {'fill':>8s} {'fill / one transfer':>20s}")
    for label, seconds, fill in rows:
        log(f"{label:40s} {seconds:8.1f}s {fill:7.1f}s {fill / one:19.2f}x")
    log("fill: the nodes' transfer and exec probe (profile_tasks of the distribute task); serial: the sum of transfers.")
    relay = rows[-1][2]
    log(f"relay vs serial: {rows[0][2] / relay:.2f}x faster; vs star: {rows[2][2] / relay:.2f}x; "
        f"vs registry: {rows[1][2] / relay:.2f}x; goal: fill within 1.5x of one transfer -> {relay / one:.2f}x")
    return 0


def image_bytes(ref: str) -> int:
    done = docker_exec(BUILDER, "image", "inspect", "--format", "{{.Size}}", ref)
    return int(done.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--blob-mib", type=int, default=1024, help="random payload in MiB (default 1024)")
    parser.add_argument("--method", choices=["stream", "registry", "relay"], default="stream")
    parser.add_argument("--link-mbit", type=int, default=0,
                        help="cap every simulated link at N Mbit/s and compare serial, registry, star and relay")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark image on the nodes")
    parser.add_argument("--no-delta", action="store_true",
                        help="stream whole images even where a node holds the bottom layers (image_stream_delta=false)")
    args = parser.parse_args()

    check_sim()
    os.makedirs(WORK, exist_ok=True)
    plan_image = write_spec(args.blob_mib, sim_pins())
    playbook = write_playbook()
    ref = plan_image["ref"]
    log(f"benchmark image {ref}: vLLM stand-in + {args.blob_mib} MiB random data, builder {BUILDER}, "
        f"{len(NODES)} nodes, method {args.method}")

    log("setup: build on the builder and distribute once (not timed)")
    run_role(playbook, plan_image, args.method, "setup")
    size = image_bytes(ref)
    log(f"  image size {size / (1 << 30):.2f} GiB")
    if size < (1 << 30):
        log("  warning: the image is smaller than 1 GiB; raise --blob-mib")

    if args.link_mbit:
        try:
            return link_bound(args, playbook, plan_image, ref, size)
        finally:
            set_links(0)
            if not args.keep:
                remove_everywhere_but_builder(ref)
                docker_exec(BUILDER, "image", "rm", "--force", ref, check=False)

    remove_everywhere_but_builder(ref)
    log("collection: fresh nodes (7 lack the image)")
    collection_s, recap = run_role(playbook, plan_image, args.method, "collection", delta=not args.no_delta)
    log(recap)

    remove_everywhere_but_builder(ref)
    log("serial docker save | docker load, one node after another")
    serial = serial_save_load(ref)
    serial_s = sum(serial)

    log("collection: re-run with every node current")
    rerun_s, recap = run_role(playbook, plan_image, args.method, "rerun", delta=not args.no_delta)
    log(recap)

    one_transfer = serial_s / len(serial)
    log("")
    log(f"image {ref}, {size / (1 << 30):.2f} GiB, to {len(NODES)} nodes ({len(serial)} transfers from {BUILDER})")
    log(f"serial save|load (report's way):   {serial_s:7.1f} s  ({one_transfer:.1f} s per node)")
    log(f"collection, fresh nodes ({args.method}{', no delta' if args.no_delta else ''}): {collection_s:7.1f} s  "
        f"(whole playbook, incl. exec probes and pin checks)")
    log(f"speed-up:                          {serial_s / collection_s:7.2f}x")
    log(f"collection, all nodes current:     {rerun_s:7.1f} s  ({rerun_s / one_transfer:.2f} of one serial transfer)")

    if not args.keep:
        remove_everywhere_but_builder(ref)
        docker_exec(BUILDER, "image", "rm", "--force", ref, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
