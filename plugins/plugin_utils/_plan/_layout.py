# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Which processes a lane runs, where, and with which engine arguments: one record per rank.

One job: lay the lane's ranks out over the ordered hosts for each ``topology.layout``:

- ``tp`` (the default): one group over every node (``--nnodes``/``--node-rank``), the head first;
- ``dp``: one engine per node joined by data parallelism (``multi_node_dep``, ``multi_node_tp_dp``):
  each rank gets ``--data-parallel-start-rank`` = node rank x ``data_parallel_rank_step``; ranks
  above 0 serve HTTP of their own (health-probed) unless the lane makes them ``--headless``; the
  lane's API is rank 0;
- ``pd``: a prefill pool and a decode pool (each a ``tp`` group or ``dp`` engines, with its own
  head, port and rendezvous port), then the router on the prefill head's host, which is the lane's
  API. The router starts last and stops first.

``_plan.render`` turns each record into a container spec; nothing here touches docker options.
"""
from __future__ import annotations

import copy
import ipaddress
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._flags import effective_args, render_args
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._model import Lane

POOLS = ("prefill", "decode")


def layout_of(lane: Lane) -> str:
    return lane["topology"].get("layout") or "tp"


def bind_address(lane: Lane, rank: int) -> str:
    """The address a rank's HTTP server binds: the lane's api.bind (default 0.0.0.0) on the head.

    A worker's health server (SGLang) keeps a wildcard or loopback bind as it is; a specific
    address (the head's) cannot be bound on a worker, which then serves its health on 127.0.0.1
    (its only client is the status probe on its own node).
    """
    bind = (lane.get("api") or {}).get("bind") or "0.0.0.0"
    if rank == 0 or bind in ("0.0.0.0", "::") or ipaddress.ip_address(bind).is_loopback:
        return bind
    return "127.0.0.1"


def _engine_argv(lane: Lane, model_path: str, rank: int, nnodes: int, head_ip: str, **extra: Any) -> list[str]:
    serve, topo = lane["serve"], lane["topology"]
    return lane["_engine"].argv(_engines.RankArgs(
        model_path=model_path,
        served_name=lane["model"]["served_name"],
        port=serve["port"],
        rendezvous_port=serve["rendezvous_port"],
        rank=rank,
        nnodes=nnodes,
        head_ip=head_ip,
        tensor_parallel=topo["tensor_parallel"],
        pipeline_parallel=topo["pipeline_parallel"],
        data_parallel=topo["data_parallel"],
        # The boot budget's flags follow the lane's own (appended when the lane leaves them unset).
        lane_args=render_args(effective_args(lane)),
        bind_host=bind_address(lane, rank),
        **extra,
    ))


def _headless(lane: Lane) -> bool:
    return effective_args(lane).get("--headless") not in (None, False)


def _dp_extra(lane: Lane, rank: int) -> dict[str, Any]:
    topo = lane["topology"]
    local = topo.get("data_parallel_local") or topo["gpus_per_node"]
    step = topo.get("data_parallel_rank_step") or local
    return {"layout": "dp", "data_parallel_local": local, "data_parallel_start": rank * step,
            "serves_http": rank > 0 and not _headless(lane)}


def _group(lane: Lane, hosts: list[dict[str, Any]], model_path: str, roles: tuple[str, str]) -> list[dict[str, Any]]:
    """The ranks of one group (the whole lane, or one P/D pool) over ``hosts``, its head first."""
    engine = lane["_engine"]
    head_ip = hosts[0].get("fabric_ip") or ""
    dp = layout_of(lane) == "dp"
    out = []
    for rank, host in enumerate(hosts):
        extra = _dp_extra(lane, rank) if dp else {}
        argv = _engine_argv(lane, model_path, rank, len(hosts), head_ip, **extra)
        http = rank == 0 or engine.workers_serve_health or bool(extra.get("serves_http"))
        out.append({"host": host, "role": roles[0] if rank == 0 else roles[1], "argv": argv, "lane": lane,
                    "health_port": lane["serve"]["port"] if http else None, "gpu": True, "pool_rank": rank})
    return out


def pool_lane(lane: Lane, role: str) -> Lane:
    """The lane as one P/D pool sees it: the pool's flags and env over the lane's, its port and parallel sizes."""
    pool = (lane.get("pd") or {})[role]
    out = copy.deepcopy(lane)
    out["serve"]["args"] = dict(lane["serve"]["args"], **pool.get("args", {}))
    out["serve"]["env"] = dict(lane["serve"]["env"], **pool.get("env", {}))
    out["serve"]["port"] = pool["port"]
    out["serve"]["rendezvous_port"] = pool["rendezvous_port"]
    dep = pool["parallelism"] == "dep"
    out["topology"] = {"nodes": pool["nodes"], "gpus_per_node": lane["topology"]["gpus_per_node"],
                       "tensor_parallel": pool["tensor_parallel"], "pipeline_parallel": 1,
                       "data_parallel": pool.get("data_parallel") or 1}
    if dep:
        out["topology"]["layout"] = "dp"
        out["topology"]["data_parallel_local"] = pool.get("data_parallel_local") or 1
    return out


def check_layout_args(lane: Lane) -> None:
    """Refuse flags a data-parallel layout renders itself, in serve.args (and pool/router flags for P/D)."""
    engine = lane["_engine"]
    owned = _engines.layout_owned(engine, layout_of(lane))
    if layout_of(lane) == "dp":
        for flag, value in lane["serve"]["args"].items():
            if flag in owned and flag not in engine.plan_owned and value not in (None, False):
                raise LanekitError(
                    f"{lane['_source']}: key 'serve.args.{flag}' is set, but in a data-parallel lane (topology.layout "
                    f"dp) the plan renders {flag} from {owned[flag]}; remove it from serve.args.")
    if layout_of(lane) != "pd":
        return
    pd = lane.get("pd") or {}
    for role in POOLS:
        for flag, value in pd[role].get("args", {}).items():
            if flag in owned and value not in (None, False):
                raise LanekitError(
                    f"{lane['_source']}: key 'pd.{role}.args.{flag}' is set, but the plan renders {flag} from "
                    f"{owned[flag].replace('serve.port', f'pd.{role}.port').replace('topology.', f'pd.{role}.')}"
                    f"; remove it from pd.{role}.args.")
    router = _engines.ROLES["router"]
    for flag, value in (pd.get("router") or {}).get("args", {}).items():
        if flag in router.plan_owned and value not in (None, False):
            raise LanekitError(
                f"{lane['_source']}: key 'pd.router.args.{flag}' is set, but the plan renders {flag} from "
                f"{router.plan_owned[flag]}; remove it from pd.router.args.")


def _url(host: dict[str, Any], port: int) -> str:
    ip = host.get("fabric_ip") or ""
    return f"http://[{ip}]:{port}" if ":" in ip else f"http://{ip}:{port}"


def processes(lane: Lane, hosts: list[dict[str, Any]], model_path: str, rank_lanes: dict[str, Lane] | None = None,
              ) -> list[dict[str, Any]]:
    """One record per rank, in rank order: host, role, engine argv, the lane it was rendered from, health port."""
    layout = layout_of(lane)
    check_layout_args(lane)
    if layout != "pd":
        if rank_lanes:
            own = []
            for rank, host in enumerate(hosts):
                rlane = rank_lanes.get(host["name"], lane)
                own.append(_group(rlane, hosts, model_path, ("head", "worker"))[rank])
            return own
        return _group(lane, hosts, model_path, ("head", "worker"))
    pd = lane.get("pd") or {}
    sizes = [pd[role]["nodes"] for role in POOLS]
    pools = {"prefill": hosts[:sizes[0]], "decode": hosts[sizes[0]:sizes[0] + sizes[1]]}
    records: list[dict] = []
    urls: dict[str, list[str]] = {}
    for role in POOLS:
        plane = pool_lane(lane, role)
        group = _group(plane, pools[role], model_path, (f"{role}-head", f"{role}-worker"))
        for record in group:
            record["pool"] = role
        records += group
        # The router gets one endpoint per TP pool, one per node of a DEP pool (each serves HTTP).
        serving = [r for r in group if r["health_port"]] if layout_of(plane) == "dp" else group[:1]
        urls[role] = [_url(r["host"], plane["serve"]["port"]) for r in serving]
    router = pd["router"]
    router_role = _engines.ROLES["router"]
    argv = router_role.argv(_engines.RouterArgs(
        prefill=urls["prefill"], decode=urls["decode"], port=lane["serve"]["port"], policy=router["policy"],
        intra_node_data_parallel_size=router["intra_node_data_parallel_size"],
        lane_args=render_args(router.get("args") or {})))
    records.append({"host": pools["prefill"][0], "role": "router", "argv": argv, "lane": lane,
                    "health_port": lane["serve"]["port"], "gpu": False, "pool": "router", "pool_rank": 0,
                    "entrypoint": list(router.get("entrypoint") or router_role.program)})
    return records


def orders(layout: str, roles: list[str], engine: _engines.Engine) -> tuple[list[list[int]], list[list[int]]]:
    """(start_order, stop_order) batches of rank indexes."""
    if layout != "pd":
        return engine.batches(roles, engine.start_first), engine.batches(roles, engine.stop_first)

    def batches(order: tuple[tuple[str, ...], ...]) -> list[list[int]]:
        out = [[i for i, role in enumerate(roles) if role in batch] for batch in order]
        return [b for b in out if b]
    return batches(_engines.PD_START_ORDER), batches(_engines.PD_STOP_ORDER)
