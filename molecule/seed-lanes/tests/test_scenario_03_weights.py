"""Weights on the simulated cluster: staging killed mid-copy resumes and verifies; a flipped byte
that keeps size and mtime is invisible to the quick check, found by verify: full, and only that
file is fetched again; a node that cannot see one shard stops the deploy, naming it.

Staging the synthetic checkpoint is the scenario's converge; the quiet second deploy is scenario 05's re-run
test. The NFS export of the simulated cluster is .sim/nfs on this machine, mounted at
/mnt/nfs/models in every node; the staging host's mirror is .sim/mirror at /srv/mirror.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from simlib import (
    ROOT,
    STAGING_NODE,
    assert_no_traceback,
    changed_hosts,
    flat,
    forget_killed_payload,
    lane_containers,
    node_of,
    plan,
    run_playbook,
)

NFS_HOST = os.path.join(ROOT, ".sim", "nfs")
NFS_NODE = "/mnt/nfs/models"
MIRROR_HOST = os.path.join(ROOT, ".sim", "mirror")


def host_path(node_path: str) -> str:
    assert node_path.startswith(NFS_NODE + "/"), node_path
    return os.path.join(NFS_HOST, node_path[len(NFS_NODE) + 1:])


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def shards(directory: str) -> list[str]:
    return sorted(f for f in os.listdir(directory) if f.endswith(".safetensors"))


@pytest.fixture()
def big_checkpoint():
    """A 1 GiB checkpoint in the staging host's mirror (eight 128 MiB shards), so a copy lasts long
    enough to be killed half way; removed afterwards with what was staged from it."""
    source = os.path.join(MIRROR_HOST, "scenario", "big")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "sim", "make_checkpoint.py"), "--out", source,
                    "--size-mib", "1024", "--shards", "8", "--seed", "7"], check=True, capture_output=True)
    yield source
    shutil.rmtree(os.path.join(MIRROR_HOST, "scenario"), ignore_errors=True)
    shutil.rmtree(os.path.join(NFS_HOST, "scenario"), ignore_errors=True)


def stage_args(dest: str, source_in_node: str, *more: str) -> list[str]:
    return ["-e", f"weights_path={dest}",
            "-e", json.dumps({"weights_source": {"kind": "local", "path": source_in_node}}),
            "-e", "weights_stage_poll_s=1", *more]


def marked_processes(mark: str) -> list[int]:
    """Pids of the live (not zombie) processes whose environment carries ``mark``: a run's every
    process, also the workers Ansible detaches into their own sessions (os.setsid) and that outlive
    a killed ansible-playbook, reparented away from it."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if mark.encode() in env and state != "Z":
            found.append(int(entry))
    return found


def kill_run(run: subprocess.Popen, mark: str) -> None:
    """Kill a background run and every process it started, wherever they went, and reap it."""
    for _round in range(5):
        pids = marked_processes(mark)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)
    run.wait(timeout=60)
    assert marked_processes(mark) == [], "a process of the killed run is still alive"


def test_staging_killed_mid_copy_resumes_and_verifies(big_checkpoint, monkeypatch, staging_host_alone):
    dest = f"{NFS_NODE}/scenario/resume"
    dest_host = host_path(dest)
    # One worker: the shards go one after the other, so "some done, one half-written" is a state
    # the copy really passes through.
    args = stage_args(dest, "/srv/mirror/scenario/big", "-e", "weights_workers=1")
    mark = f"LANEKIT_SCENARIO_RUN=killed-{os.getpid()}-{time.time_ns()}"
    monkeypatch.setenv("LANEKIT_SCENARIO_RUN", mark.split("=", 1)[1])
    run = run_playbook("stage_weights.yml", extra=args, wait=False)
    monkeypatch.delenv("LANEKIT_SCENARIO_RUN")
    tmp = os.path.join(dest_host, ".lanekit", "tmp")
    done, partial = [], []
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and run.poll() is None:
            done = shards(dest_host) if os.path.isdir(dest_host) else []
            partial = [f for f in os.listdir(tmp) if f.endswith(".part") and os.path.getsize(os.path.join(tmp, f)) > 0] \
                if os.path.isdir(tmp) else []
            if done and partial:
                break
            time.sleep(0.02)
        assert done and partial, "the copy was never seen half way (finished too fast or never started)"
        # The staging host dies mid-copy: its module process is killed, and so is the controller's run.
        subprocess.run(["docker", "exec", STAGING_NODE, "pkill", "-KILL", "-f", "AnsiballZ_weights_stage"], check=False)
    finally:
        # Always, also when the run has exited: its detached workers may not have.
        kill_run(run, mark)
        forget_killed_payload(STAGING_NODE, "weights_stage")
    assert not os.path.exists(os.path.join(dest_host, "MANIFEST.json")), "a killed staging must not publish a manifest"
    finished_before = len(shards(dest_host))
    assert 0 < finished_before < 8

    # The killed run left its lane lock: stale (its process is gone), broken only on purpose.
    refused = run_playbook("stage_weights.yml", extra=args)
    assert refused.returncode != 0 and "is gone from this controller" in flat(refused.stdout)
    resumed = run_playbook("stage_weights.yml", extra=args + ["-e", "lanekit_break_lock=true"])
    assert "broken on purpose" in flat(resumed.stdout + resumed.stderr)  # a warning, on stderr
    assert resumed.returncode == 0
    assert_no_traceback(resumed.stdout)
    fetched = re.search(r"fetched (\d+) files", flat(resumed.stdout))
    assert fetched, "the staging report is missing"
    # The finished shards are kept (journal), the half-written one is discarded and copied again.
    total = len([f for f in os.listdir(big_checkpoint) if os.path.isfile(os.path.join(big_checkpoint, f))])
    assert int(fetched.group(1)) <= total - finished_before
    assert not [f for f in os.listdir(tmp) if f.endswith(".part")] if os.path.isdir(tmp) else True
    manifest = json.load(open(os.path.join(dest_host, "MANIFEST.json"), encoding="utf-8"))
    assert manifest
    for name in shards(big_checkpoint):
        assert sha256(os.path.join(dest_host, name)) == sha256(os.path.join(big_checkpoint, name)), name

    verified = run_playbook("stage_weights.yml", extra=args + ["-e", "weights_verify=full"])
    assert verified.returncode == 0 and changed_hosts(verified.stdout) == set()


def test_flipped_byte_is_found_by_full_verify_and_only_that_file_is_fetched_again(vllm_staged):
    weights = plan()["weights"]["path"]
    directory = host_path(weights)
    victim = os.path.join(directory, shards(directory)[1])
    good = sha256(victim)
    others = {name: os.stat(os.path.join(directory, name)).st_ino for name in os.listdir(directory)
              if os.path.isfile(os.path.join(directory, name))}
    stat = os.stat(victim)
    with open(victim, "r+b") as fh:
        fh.seek(stat.st_size // 2)
        byte = fh.read(1)
        fh.seek(stat.st_size // 2)
        fh.write(bytes([byte[0] ^ 0x01]))
    # Bit rot keeps size and mtime: what the quick check trusts.
    os.utime(victim, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert sha256(victim) != good

    quick = run_playbook("stage_weights.yml")
    assert quick.returncode == 0 and changed_hosts(quick.stdout) == set()

    full = run_playbook("stage_weights.yml", extra=["-e", "weights_verify=full"])
    assert full.returncode == 0
    assert_no_traceback(full.stdout)
    assert f"repaired {os.path.basename(victim)}" in flat(full.stdout)
    assert re.search(r"fetched 1 files", flat(full.stdout))
    assert sha256(victim) == good
    replaced = [name for name, ino in others.items()
                if os.stat(os.path.join(directory, name)).st_ino != ino and not name.endswith((".json", "SUMS"))]
    assert replaced == [os.path.basename(victim)]

    again = run_playbook("stage_weights.yml")
    assert again.returncode == 0 and changed_hosts(again.stdout) == set()


def test_node_that_cannot_see_a_shard_stops_the_deploy_naming_it(vllm_staged):
    weights = plan()["weights"]["path"]
    directory = host_path(weights)
    hidden = shards(directory)[2]
    node = node_of("spark-04")
    view = "/tmp/lanekit-scenario-view"
    # spark-04's view of the export lacks one shard (a stale or partial NFS view); the others see all.
    subprocess.run(["docker", "exec", node, "mkdir", "-p", view], check=True)
    files = [f for f in os.listdir(directory) if f != hidden and os.path.isfile(os.path.join(directory, f))]
    subprocess.run(["docker", "exec", node, "cp", "-a", *[f"{weights}/{f}" for f in files], view + "/"], check=True)
    subprocess.run(["docker", "exec", node, "mount", "--bind", view, weights], check=True)
    before = lane_containers()
    try:
        proc = run_playbook("deploy_lane.yml")
    finally:
        subprocess.run(["docker", "exec", node, "umount", weights], check=False)
        subprocess.run(["docker", "exec", node, "rm", "-rf", view], check=False)
    assert proc.returncode != 0
    assert_no_traceback(proc.stdout)
    assert hidden in flat(proc.stdout) and "spark-04" in proc.stdout
    failed_hosts = set(re.findall(r"^fatal: \[([^\]]+)\]", proc.stdout, re.MULTILINE))
    assert failed_hosts == {"spark-04"}, failed_hosts
    assert lane_containers() == before, "the deploy stopped at the weights and must not touch the ranks"


def test_restaging_another_revision_while_the_lane_runs_leaves_its_files_alone(vllm_serving):
    """The running lane reads its own revision directory; staging another revision of the same
    model writes a new directory and switches `current`, and no file the ranks read changes."""
    running = plan()["weights"]["path"]
    assert "/.revisions/" in running
    model_dir = host_path(plan()["weights"]["dir"])
    before = {name: (os.stat(os.path.join(host_path(running), name)).st_ino,
                     os.stat(os.path.join(host_path(running), name)).st_mtime_ns)
              for name in os.listdir(host_path(running)) if os.path.isfile(os.path.join(host_path(running), name))}
    ranks = lane_containers()
    labels = subprocess.run(["docker", "exec", node_of("spark-01"), "docker", "inspect", "--format",
                             '{{ index .Config.Labels "io.lanekit.weights" }}', list(ranks)[0]],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert labels == running, "the ranks name the revision they read"
    revision = "b" * 40  # a lane pins full commits; the local mirror declares none, so any pin stages it
    other = os.path.join(model_dir, ".revisions", revision)
    try:
        # a second revision of the model, staged without writing the lane's plan file
        staged = run_playbook("stage_weights.yml", overrides={"model": {"revision": revision}},
                              extra=["-e", "plan_file="])
        assert staged.returncode == 0
        assert_no_traceback(staged.stdout)
        assert os.path.isfile(os.path.join(other, "MANIFEST.json"))
        assert os.readlink(os.path.join(model_dir, "current")) == ".revisions/" + revision
        assert f"current -> {revision}" in flat(staged.stdout)
        after = {name: (os.stat(os.path.join(host_path(running), name)).st_ino,
                        os.stat(os.path.join(host_path(running), name)).st_mtime_ns) for name in before}
        assert after == before, "a file of the running revision was replaced"
        assert lane_containers() == ranks, "the ranks were touched"
    finally:
        back = run_playbook("stage_weights.yml")
        shutil.rmtree(other, ignore_errors=True)
    assert back.returncode == 0
    assert os.readlink(os.path.join(model_dir, "current")) == ".revisions/" + os.path.basename(running)
