# Copyright: lanekit developers
# Apache-2.0
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The bus bandwidth below which a lane's fabric is refused, per hardware profile.

One job: the floor table and the choice of a lane's floor. Each floor is a nccl-tests busbw (GB/s,
10^9 bytes) of one collective at its largest size, measured with ONE process per node (the probe
runs one rank per node, as NVIDIA's DGX Spark cluster check does), with where it comes from:

- DGX Spark (GB10): NVIDIA's own figure. dgx-spark-playbooks (commit 5beeea4a),
  nvidia/multi-sparks-through-switch/assets/spark_cluster_setup/spark_cluster_setup.py runs
  ``all_gather_perf -b 16G -e 16G`` with one process per Spark and warns below
  ``MIN_NCCL_TEST_BW = 21.875 # 175 Gbps`` (``MIN_NCCL_TEST_BW_RING = 10 # 80 Gbps`` for three
  Sparks cabled in a ring without a switch: set lanekit_fabric_floor_gbps: 10 there).
- The others: ESTIMATES from the published interconnect, 60% of one NIC's line rate (one process
  per node drives the NIC nearest its GPU): ConnectX-7 400 Gb/s = 50 GB/s -> 30; ConnectX-8
  800 Gb/s = 100 GB/s -> 60. Inside one NVL72 rack the traffic goes over NVLink, far above this,
  so there the floor only catches the gross failures (TCP sockets, a dead NIC). Replace them with
  what nccl-tests measures on your cluster: ``lanekit_fabric_floor_gbps`` in the inventory.
- CPU nodes (gloo over TCP): an ESTIMATE for 10 GbE (1.25 GB/s line rate, gloo reaching about
  40% of it over one TCP stream): 0.5.
- TPU, Intel XPU and Ascend nodes: the probe measures their host network with gloo (_launch), so
  their floor is an ESTIMATE of gloo over one TCP stream (40%) on the host NIC their vendors' systems
  carry: 100 Gb/s (TPU hosts' data-centre network, Arc Pro and Ascend servers' Ethernet).
- Workstation and PCIe NVIDIA profiles (RTX, RTX PRO, DGX Station): ESTIMATES from the NIC such a
  node most often has (100 GbE; ConnectX-7 on RTX PRO 6000 8-GPU servers; the DGX Station's
  ConnectX-8 SuperNIC).
"""
from __future__ import annotations

from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

_SPARK_SOURCE = ("NVIDIA dgx-spark-playbooks spark_cluster_setup.py: all_gather_perf 16 GiB, one process per "
                 "Spark, MIN_NCCL_TEST_BW = 21.875 GB/s (175 Gbps)")


def _nic(gbit: int, nic: str) -> dict[str, Any]:
    return {"op": "all_gather", "gbps": round(gbit / 8 * 0.6, 3), "estimated": True,
            "source": f"estimate: 60% of one {nic} ({gbit} Gb/s = {gbit / 8:g} GB/s line rate) per node"}


def _gloo(gbit: int, nic: str) -> dict[str, Any]:
    return {"op": "all_gather", "gbps": round(gbit / 8 * 0.4, 3), "estimated": True,
            "source": f"estimate: gloo over one TCP stream at about 40% of one {nic} ({gbit} Gb/s = {gbit / 8:g} GB/s)"}


FLOORS: dict[str, dict[str, Any]] = {
    "dgx_spark_gb10": {"op": "all_gather", "gbps": 21.875, "estimated": False, "source": _SPARK_SOURCE},
    # DGX/HGX H100, H200 and B200: eight ConnectX-7 400 Gb/s, one per GPU (NVIDIA DGX datasheets).
    "h100": _nic(400, "ConnectX-7"),
    "h200": _nic(400, "ConnectX-7"),
    "b200": _nic(400, "ConnectX-7"),
    # Blackwell Ultra (DGX B300, GB300 NVL72): ConnectX-8 SuperNIC 800 Gb/s per GPU.
    "b300": _nic(800, "ConnectX-8"),
    "gb200": _nic(400, "ConnectX-7"),
    "gb300": _nic(800, "ConnectX-8"),
    # AMD Instinct platforms: one 400 Gb/s NIC per GPU (Pensando Pollara 400 or ConnectX-7).
    "mi300x": _nic(400, "400 Gb/s NIC (Pollara 400 / ConnectX-7)"),
    "mi325x": _nic(400, "400 Gb/s NIC (Pollara 400 / ConnectX-7)"),
    "mi350x": _nic(400, "400 Gb/s NIC (Pollara 400 / ConnectX-7)"),
    "mi355x": _nic(400, "400 Gb/s NIC (Pollara 400 / ConnectX-7)"),
    "cpu_x86": {"op": "all_gather", "gbps": 0.5, "estimated": True,
                "source": "estimate: 10 GbE (1.25 GB/s line rate), gloo over one TCP stream at about 40%"},
    "xeon5": _gloo(25, "25 GbE"),
    "xeon6": _gloo(25, "25 GbE"),
    "trillium": _gloo(100, "TPU host data-centre network link"),
    "ironwood": _gloo(100, "TPU host data-centre network link"),
    "arc_pro_b60": _gloo(100, "100 GbE NIC"),
    "arc_pro_b70": _gloo(100, "100 GbE NIC"),
    "ascend_950pr": _gloo(100, "100 GbE NIC"),
    "dgx_station_gb300": _nic(800, "ConnectX-8 SuperNIC"),
    "rtx_pro_6000_8x": _nic(400, "ConnectX-7"),
    "rtx_pro_6000": _nic(100, "100 GbE NIC"),
    "rtx_pro_6000_2x": _nic(100, "100 GbE NIC"),
    "rtx_pro_5000": _nic(100, "100 GbE NIC"),
    "rtx_pro_5000_4x": _nic(100, "100 GbE NIC"),
    "rtx_5090": _nic(100, "100 GbE NIC"),
    "rtx_5090_2x": _nic(100, "100 GbE NIC"),
    "rtx_4090_2x": _nic(100, "100 GbE NIC"),
}


def choose(hardware: str, override: Any = None) -> dict[str, Any]:
    """The lane's floor: {op, gbps, estimated, source}. ``override`` (lanekit_fabric_floor_gbps) wins; a
    profile without a floor and no override gives gbps None (measured and reported, never refused)."""
    base = dict(FLOORS.get(hardware) or {"op": "all_gather", "gbps": None, "estimated": True,
                                         "source": f"no floor known for hardware {hardware!r}"})
    if override is None or override == "":
        return base
    if isinstance(override, bool):
        override = None
    try:
        value = float(override) if override is not None else -1.0
    except (TypeError, ValueError):
        value = -1.0
    if value <= 0:
        raise LanekitError(
            f"lanekit_fabric_floor_gbps is {override!r}; expected a bus bandwidth in GB/s above 0 (nccl-tests' busbw of "
            f"all_gather at the largest size, e.g. 21.875 for DGX Spark), in the group_vars of the inventory.")
    return {"op": base["op"], "gbps": value, "estimated": False,
            "source": f"inventory: lanekit_fabric_floor_gbps = {value:g} (profile: {base['gbps']} GB/s, {base['source']})"}
