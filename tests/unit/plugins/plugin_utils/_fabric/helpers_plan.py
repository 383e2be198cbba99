"""A minimal two-node plan, as _build.build_plan publishes it, for the fabric tests."""
from __future__ import annotations

import copy


def rank(n, host, ip, role="head", env=None, devices=None):
    env = {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0", "VLLM_HOST_IP": ip, "HF_HUB_OFFLINE": "1",
           **(env or {})}
    return {"host": host, "node_rank": n, "role": role, "fabric_ip": ip, "container_name": f"lanekit-L-r{n}",
            "image": "lanekit/img:abc", "env": env,
            "container": {"name": f"lanekit-L-r{n}", "image": "lanekit/img:abc", "entrypoint": ["vllm"],
                          "command": ["serve", "--node-rank", str(n)], "env": env, "network_mode": "host",
                          "ipc_mode": "host", "devices": devices or [], "ulimits": [], "capabilities": [],
                          "shm_size": "1g", "mounts": [{"source": "/m", "target": "/m"}], "labels": {"io.lanekit.lane": "L"},
                          "env_file": "/etc/lanekit/secrets/L.env"}}


PLAN = {"lane": "L", "engine": "vllm", "hardware": "cpu_x86", "rendezvous_port": 29501,
        "hardware_profile": {"gpu_name": None, "display_name": "x86-64 CPU node"},
        "image": {"ref": "lanekit/img:abc", "content_hash": "abc",
                  "pin": {"ref": "lanekit/img:abc", "content_hash": "abc", "rootfs": "", "config": ""}},
        "ranks": [rank(0, "cpu-01", "10.0.0.1"), rank(1, "cpu-02", "10.0.0.2", role="worker")]}


def plan(**over):
    out = copy.deepcopy(PLAN)
    out.update(over)
    return out
