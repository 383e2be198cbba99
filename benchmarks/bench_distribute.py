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

With ``--auto`` it measures the default settings (``image_method: auto``, issue #28 part 4) on
capped links (``--link-mbit``, default 100 there) in one run: a fresh image (the nodes hold the vLLM
stand-in base but none of the image's own 128 MiB data layer) and then a patch-layer change (a new
image whose only new layers are a small patch over the data layer every node now holds). The data
layer is in a benchmark base image the script builds on the builder and pushes to the simulated
registry, so a changed patch leaves it below, as a real re-deploy does. It prints each run's method
line (which method auto chose and why), its fill and the ratio to one single-node transfer (the
median of ``--one-samples`` serial ``docker save | docker load`` over the capped fabric), against the
goals: fresh <= 1.3, patch <= 0.3.

    .venv/bin/python benchmarks/bench_distribute.py [--blob-mib 1024] [--method stream|registry|relay]
    .venv/bin/python benchmarks/bench_distribute.py --link-mbit 100 --blob-mib 128
    .venv/bin/python benchmarks/bench_distribute.py --auto
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
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._build import image_section  # noqa: E402

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


def base_digest(pins: dict) -> str:
    digest = (pins.get(BASE_IMAGE) or {}).get("amd64")
    if not digest:
        sys.exit(f"sim_pins.yml has no amd64 digest for {BASE_IMAGE}; re-run make sim-up.")
    return digest


def write_spec(blob_mib: int, pins: dict, upstream: dict | None = None, patch_text: str = "") -> dict:
    """The benchmark image spec under .sim/bench/images/bench-blob; returns the plan's image section.

    By default the vLLM stand-in plus a patch that writes the random data; with ``upstream`` (a base
    that holds the data already) and ``patch_text``, that base plus that one small patch."""
    name = "bench-blob"
    images_dir = os.path.join(WORK, "images")
    spec_dir = os.path.join(images_dir, name)
    shutil.rmtree(spec_dir, ignore_errors=True)
    os.makedirs(os.path.join(spec_dir, "patches"))
    patch_name = "make_blob.py" if upstream is None else "bench_patch.py"
    spec = {
        "name": name,
        "description": f"Benchmark image: the vLLM stand-in plus {blob_mib} MiB of random data.",
        "upstream": upstream or {"repository": "vllm/vllm-openai", "tag": "mistral-large-4",
                                 "digests": {"amd64": base_digest(pins)}},
        "entrypoint": ["vllm", "serve"],
        "patches": [{"file": f"patches/{patch_name}"}],
        "lanes": ["benchmark"],
    }
    with open(os.path.join(spec_dir, "image.yml"), "w", encoding="utf-8") as handle:
        yaml.safe_dump(spec, handle, sort_keys=False)
    patch = os.path.join(spec_dir, "patches", patch_name)
    with open(patch, "w", encoding="utf-8") as handle:
        handle.write(patch_text if upstream is not None else BLOB_PATCH.format(mib=blob_mib))
    os.chmod(patch, 0o644)
    resolved = resolve_image(load_image_spec(images_dir, name), "amd64", {})
    # The image section as the plan publishes it (its pin included); no lock yet: the build gives the digests.
    return dict(image_section(resolved, None))


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


def run_role(playbook: str, plan_image: dict, method: str | None, label: str, delta: bool = True,
             tags: str = "") -> tuple[float, str]:
    """Run the image role; ``method`` None runs the role's default settings (no method, no delta given)."""
    extra = {
        "image_plan": plan_image,
        "image_lock_file": os.path.join(WORK, "bench-blob.image.lock.yml"),
        "image_lock_update": True,
        "image_builder": BUILDER,
    }
    if method is not None:
        extra.update(image_method=method, image_stream_delta=delta)
    if method == "registry":
        extra["image_registry"] = SIM_REGISTRY
    extra_file = os.path.join(WORK, "extra.json")
    with open(extra_file, "w", encoding="utf-8") as handle:
        json.dump(extra, handle)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks")
    binary = os.path.join(REPO, ".venv", "bin", "ansible-playbook")
    start = time.monotonic()
    argv = [binary, "-i", os.path.join(REPO, "inventories", "sim"), playbook, "-e", f"@{extra_file}"]
    done = subprocess.run(argv + (["--tags", tags] if tags else []), cwd=REPO, env=env, capture_output=True,
                          text=True, check=False)
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
    recap += [f"  {line}" for line in method_lines(done.stdout)]
    if said:
        recap += ["  nodes:"] + ["    " + line for line in said]
    if "TASKS RECAP" in done.stdout:
        top = lines[lines.index(next(text for text in lines if text.startswith("TASKS RECAP"))) + 3:][:5]
        recap += ["  slowest tasks:"] + ["    " + line for line in top]
    return seconds, "\n".join(recap)


def method_lines(stdout: str) -> list[str]:
    """The image role's "image method auto: ..." lines (the debug message, however the YAML callback
    folded or quoted it)."""
    flat = " ".join(stdout.split())
    return [found.replace("''", "'").strip() for found in re.findall(r"image method auto: (?:[^']|'')*", flat)]


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


# --auto: the default settings on a fresh image and on a patch-layer change (issue #28 part 4).
BASE_REPOSITORY = f"{SIM_REGISTRY}/lanekit-bench/blob-base"
BLOB_RUN = ("import os; os.makedirs('/opt/bench', exist_ok=True); handle = open('/opt/bench/blob', 'wb'); "
            "[handle.write(os.urandom(4 << 20)) for _ in range({mib} // 4)]; handle.close()")
PATCH_TEXT = '''#!/usr/bin/env python3
"""Benchmark patch {round}: {kib} KiB in /opt/bench/patch (a changed patch layer over the data layer)."""
import os
with open("/opt/bench/patch", "wb") as handle:
    handle.write(os.urandom({kib} << 10))
print("bench patch {round} written")
'''


def build_blob_base(blob_mib: int, pins: dict) -> dict:
    """The stand-in base plus the random data layer, built on the builder and pushed to the simulated
    registry (a base needs a digest to be pinned); returns the spec's upstream section."""
    tag = f"{BASE_REPOSITORY}:{blob_mib}m-{int(time.time())}"
    dockerfile = f"FROM vllm/vllm-openai@{base_digest(pins)}\nRUN {json.dumps(['python3', '-c', BLOB_RUN.format(mib=blob_mib)])}\n"
    done = subprocess.run(["docker", "exec", "-i", CONTAINER.format(BUILDER), "docker", "build", "--tag", tag, "-"],
                          input=dockerfile, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"building the benchmark base {tag} on {BUILDER} failed: {done.stderr.strip()[-800:]}")
    docker_exec(BUILDER, "image", "push", tag)
    digests = json.loads(docker_exec(BUILDER, "image", "inspect", "--format", "{{json .RepoDigests}}", tag).stdout)
    digest = next((d.split("@", 1)[1] for d in digests or [] if d.startswith(BASE_REPOSITORY + "@")), "")
    if not digest:
        sys.exit(f"{tag} was pushed but {BUILDER} reports no digest for it in {BASE_REPOSITORY} ({digests}).")
    log(f"  benchmark base {BASE_REPOSITORY}@{digest[:19]}: stand-in + {blob_mib} MiB data layer")
    return {"repository": BASE_REPOSITORY, "tag": tag.rsplit(":", 1)[1], "digests": {"amd64": digest}}


def auto_run(playbook: str, plan_image: dict, label: str) -> tuple[float, float, list[str]]:
    """The role with its default settings: (playbook seconds, fill seconds, method lines)."""
    seconds, recap = run_role(playbook, plan_image, None, label)
    log(recap)
    with open(os.path.join(WORK, f"{label}.log"), encoding="utf-8") as handle:
        text = handle.read()
    lines = method_lines(text)
    if not lines:
        sys.exit(f"{label}: the run printed no 'image method auto:' line; is image_method auto the role's default? "
                 f"See {WORK}/{label}.log")
    return seconds, task_seconds(text, DISTRIBUTE_TASK) or seconds, lines


def auto_mode(args, playbook: str) -> int:
    """Fresh image and patch-layer change with the default settings, on capped links, in one run."""
    pins = sim_pins()
    upstream = build_blob_base(args.blob_mib, pins)
    images = [write_spec(args.blob_mib, pins, upstream, PATCH_TEXT.format(round=n, kib=args.patch_kib)) for n in (1, 2)]
    refs = [image["ref"] for image in images]
    for n, image in enumerate(images, start=1):
        # Each image is built (and locked) up front, untimed: the timed runs only distribute.
        write_spec(args.blob_mib, pins, upstream, PATCH_TEXT.format(round=n, kib=args.patch_kib))
        run_role(playbook, image, None, f"auto-build-{n}", tags="image_preflight,image_build")
    size = image_bytes(refs[0])
    set_links(args.link_mbit)
    try:
        log(f"one transfer: serial docker save | docker load of {refs[0]} over the fabric, {args.one_samples} node(s)")
        one_times = []
        for node in NODES[1:1 + args.one_samples]:
            remove_everywhere_but_builder(refs[0])
            one_times.append(fabric_save_load(refs[0], node))
            log(f"  {node} loaded in {one_times[-1]:.1f} s")
        one = sorted(one_times)[len(one_times) // 2]

        remove_everywhere_but_builder(refs[0])
        write_spec(args.blob_mib, pins, upstream, PATCH_TEXT.format(round=1, kib=args.patch_kib))
        log("default settings, fresh image: 7 nodes hold the stand-in base, not the data layer nor the patch")
        fresh = auto_run(playbook, images[0], "auto-fresh")
        write_spec(args.blob_mib, pins, upstream, PATCH_TEXT.format(round=2, kib=args.patch_kib))
        log(f"default settings, patch-layer change: every node holds {refs[0]}; {refs[1]} changes the patch")
        patch = auto_run(playbook, images[1], "auto-patch")
    finally:
        set_links(0)
        if not args.keep:
            for ref in refs:
                remove_everywhere_but_builder(ref)
                docker_exec(BUILDER, "image", "rm", "--force", ref, check=False)
            docker_exec(BUILDER, "image", "rm", "--force", f"{BASE_REPOSITORY}:{upstream['tag']}", check=False)

    log("")
    log(f"images {refs[0]} / {refs[1]}, {size / (1 << 30):.2f} GiB (docker's size), {len(NODES) - 1} nodes from "
        f"{BUILDER}, links capped at {args.link_mbit} Mbit/s, default settings (image_method auto)")
    log(f"one single-node transfer (median of {len(one_times)} serial ones): {one:7.1f} s")
    log(f"{'run':28s} {'playbook':>9s} {'fill':>8s} {'fill / one transfer':>20s} {'goal':>6s}")
    for label, (seconds, fill, _lines), goal in (("fresh image", fresh, 1.3), ("patch-layer change", patch, 0.3)):
        verdict = "met" if fill / one <= goal else "NOT met"
        log(f"{label:28s} {seconds:8.1f}s {fill:7.1f}s {fill / one:19.2f}x {goal:5.1f}x  {verdict}")
    for label, (_seconds, _fill, lines), _goal in (("fresh", fresh, 0), ("patch", patch, 0)):
        for line in lines:
            log(f"{label}: {line}")
    log("fill: the nodes' transfer and exec probe (profile_tasks of the distribute task); one transfer: the whole "
        "docker save over one capped link into docker load.")
    return 0


def image_bytes(ref: str) -> int:
    done = docker_exec(BUILDER, "image", "inspect", "--format", "{{.Size}}", ref)
    return int(done.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--blob-mib", type=int, default=None, help="random payload in MiB (default 1024; 128 with --auto)")
    parser.add_argument("--method", choices=["stream", "registry", "relay"], default="stream")
    parser.add_argument("--link-mbit", type=int, default=0,
                        help="cap every simulated link at N Mbit/s and compare serial, registry, star and relay")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark image on the nodes")
    parser.add_argument("--no-delta", action="store_true",
                        help="stream whole images even where a node holds the bottom layers (image_stream_delta=false)")
    parser.add_argument("--auto", action="store_true",
                        help="the default settings (image_method auto) on a fresh image and a patch-layer change, on capped "
                             "links (--link-mbit, default 100 here; --blob-mib default 128 here)")
    parser.add_argument("--patch-kib", type=int, default=256, help="with --auto, the changed patch layer's payload in KiB")
    parser.add_argument("--one-samples", type=int, default=3,
                        help="with --auto, single-node transfers timed for the one-transfer baseline (median)")
    args = parser.parse_args()

    check_sim()
    os.makedirs(WORK, exist_ok=True)
    if args.auto:
        # The link-bound regime of the relay's measurement (docs/benchmarks.md), unless told otherwise.
        args.link_mbit = args.link_mbit or 100
        args.blob_mib = args.blob_mib or 128
        log(f"benchmark: default settings on {len(NODES)} nodes, links capped at {args.link_mbit} Mbit/s, "
            f"data layer {args.blob_mib} MiB, patch {args.patch_kib} KiB")
        return auto_mode(args, write_playbook())
    args.blob_mib = args.blob_mib or 1024
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
