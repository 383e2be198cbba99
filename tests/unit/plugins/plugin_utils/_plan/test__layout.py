"""Recipe lanes of the data-parallel and P/D layouts (plugin_utils/_plan/_layout.py, _recipe/_lane.py): the plan
renders every rank's flags as the recipe site composes them, the P/D router, batch orders, who serves HTTP,
and the lane files re-plan identically; wrong layouts are one sentence."""
from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import RankLog
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._lane import _engines
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _tracker as _boot
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rankstatus import RankStatus
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import Layers, validate
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _layout as _plan_layout
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._choice import Choice
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._compose import compile_recipe
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._lane import build_lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._recipe._load import load_recipe
from tests.unit.helpers.inventories import compile_on, inventory_hosts, plan_on
from tests.unit.helpers.recipes import SEED

PD_1P2D = {"strategy": "pd_cluster", "pd": {"prefill": {"nodes": 1, "parallelism": "dep"},
                                            "decode": {"nodes": 2, "parallelism": "tp"}}}


def _flag(argv: list, flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_multi_node_dep_ranks_carry_the_sites_data_parallel_flags_and_every_engine_serves_http(tmp_path):
    _compiled, plan, findings = plan_on("gb300", str(tmp_path), {"strategy": "multi_node_dep"}, hosts=2)
    assert findings["errors"] == []
    assert plan["topology"]["layout"] == "dp" and plan["topology"]["data_parallel"] == 8
    head, worker = plan["ranks"][0]["command"], plan["ranks"][1]["command"]
    for cmd in (head, worker):
        assert _flag(cmd, "--data-parallel-size") == "8" and _flag(cmd, "--data-parallel-size-local") == "4"
        assert _flag(cmd, "--data-parallel-address") == plan["ranks"][0]["fabric_ip"]
        assert _flag(cmd, "--data-parallel-rpc-port") == str(plan["rendezvous_port"])
        assert "--data-parallel-hybrid-lb" in cmd and "--enable-expert-parallel" in cmd
        assert "--headless" not in cmd and "--nnodes" not in cmd and "--port" in cmd
    assert "--data-parallel-start-rank" not in head and _flag(worker, "--data-parallel-start-rank") == "4"
    # The API is rank 0's; rank 1's own HTTP server is health-probed.
    assert [r["role"] for r in plan["ranks"]] == ["head", "worker"]
    assert [r["health_port"] for r in plan["ranks"]] == [8000, 8000]
    assert [r["serves_api"] for r in plan["ranks"]] == [True, False]
    assert plan["api"]["host"] == plan["ranks"][0]["host"]
    assert plan["start_order"] == [[0], [1]] and plan["stop_order"] == [[0], [1]]


def test_the_start_rank_step_follows_the_sites_dp_local_when_it_differs(tmp_path):
    lane = yaml.safe_load(_lane_text(tmp_path, {"strategy": "multi_node_dep"}, hosts=2))
    assert "data_parallel_rank_step" not in lane["topology"]  # 4 GPUs per node: the same as the local size
    lane["topology"]["data_parallel_rank_step"] = 2
    hosts = [{"name": "a", "fabric_ip": "10.0.0.1"}, {"name": "b", "fabric_ip": "10.0.0.2"}]
    records = _plan_layout.processes(load_lane_data(lane), hosts, "/m")
    assert _flag(records[1]["argv"], "--data-parallel-start-rank") == "2"


def test_multi_node_tp_dp_gives_each_node_one_tp_group_and_its_dp_rank():
    # The seed does not offer tp_dp; grant it on gb300 (as strategy_hardware does) to compile one.
    src = load_recipe(SEED)
    src.recipe["strategy_hardware"]["multi_node_tp_dp"] = {"gb300": "supported"}
    result = compile_recipe(src, Choice(hardware="gb300", strategy="multi_node_tp_dp", nodes=2))
    lane, _comments = build_lane(src, result, "x")
    assert lane["topology"] == {"nodes": 2, "gpus_per_node": 4, "tensor_parallel": 4, "pipeline_parallel": 1,
                                "data_parallel": 2, "layout": "dp", "data_parallel_local": 1}
    lane = load_lane_data(lane)
    records = _plan_layout.processes(lane, [{"name": "a", "fabric_ip": "10.0.0.1"},
                                            {"name": "b", "fabric_ip": "10.0.0.2"}], "/m")
    site = result["commands"][1]["argv"]
    worker = records[1]["argv"]
    for flag in ("--tensor-parallel-size", "--data-parallel-size", "--data-parallel-size-local",
                 "--data-parallel-start-rank"):
        assert _flag(worker, flag) == _flag(site, flag)
    assert _flag(worker, "--data-parallel-address") == "10.0.0.1" and records[1]["health_port"] == 8000


def load_lane_data(lane: dict) -> dict:
    """A lane mapping validated as the plan reads it (defaults filled in)."""
    return validate(Layers("x.yml", lane), lane["lane"]) | {"_source": "x.yml"}


def test_pd_cluster_plans_two_pools_with_their_own_heads_and_the_router_last(tmp_path):
    _compiled, plan, findings = plan_on("gb300", str(tmp_path), PD_1P2D, hosts=3)
    assert findings["errors"] == []
    roles = [r["role"] for r in plan["ranks"]]
    assert roles == ["prefill-head", "decode-head", "decode-worker", "router"]
    prefill, decode, decode_w, router = plan["ranks"]
    assert plan["start_order"] == [[0, 1], [2], [3]] and plan["stop_order"] == [[3], [0, 1], [2]]
    assert plan["hosts"][prefill["host"]] == [0, 3] and router["host"] == prefill["host"]
    # Each pool: its port, its KV role, its own head and rendezvous.
    assert _flag(prefill["command"], "--port") == "8001" and _flag(decode["command"], "--port") == "8002"
    assert json.loads(_flag(prefill["command"], "--kv-transfer-config"))["kv_role"] == "kv_producer"
    assert json.loads(_flag(decode["command"], "--kv-transfer-config"))["kv_role"] == "kv_consumer"
    assert "--compilation-config" in decode["command"] and "--compilation-config" not in prefill["command"]
    assert _flag(prefill["command"], "--data-parallel-size") == "4" and "--enable-expert-parallel" in prefill["command"]
    assert _flag(decode["command"], "--tensor-parallel-size") == "8"
    assert _flag(decode_w["command"], "--master-addr") == decode["fabric_ip"] and "--headless" in decode_w["command"]
    assert _flag(decode["command"], "--master-port") == "29502"
    assert decode_w["health_port"] is None and decode["health_port"] == 8002 and prefill["health_port"] == 8001
    for spec in (prefill, decode, decode_w):
        assert spec["env"]["VLLM_NIXL_SIDE_CHANNEL_HOST"] == spec["fabric_ip"]
    assert prefill["env"]["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5557" and decode["env"]["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5558"
    # The router: the recipe site's command with the real endpoints; no GPU, no weights.
    assert router["entrypoint"] == ["vllm-router"]
    assert router["command"] == ["--policy", "round_robin", "--vllm-pd-disaggregation",
                                 "--prefill", f"http://{prefill['fabric_ip']}:8001",
                                 "--decode", f"http://{decode['fabric_ip']}:8002",
                                 "--host", "0.0.0.0", "--port", "8000", "--intra-node-data-parallel-size", "4"]
    assert router["mounts"] == [] and router["gpus"] == "" and "device_requests" not in router["container"]
    assert router["serves_api"] and plan["api"]["port"] == 8000 and plan["api"]["host"] == router["host"]
    assert plan["rendezvous_port"] is None
    assert plan["pools"]["prefill"] == {"ranks": [0], "port": 8001, "parallelism": "dep"}
    assert plan["pools"]["router"] == {"ranks": [3], "port": 8000}


def _lane_text(tmp_path, choice, hosts):
    compiled = compile_on("gb300", str(tmp_path), choice, hosts=hosts)
    with open(compiled["lane_file"], encoding="utf-8") as handle:
        return handle.read()


@pytest.mark.parametrize("choice,hosts", [({"strategy": "multi_node_dep"}, 2), (PD_1P2D, 3)])
def test_a_written_lane_replans_identically_and_a_second_compile_changes_nothing(tmp_path, choice, hosts):
    first = compile_on("gb300", str(tmp_path), choice, hosts=hosts)
    assert first["changed"] and not compile_on("gb300", str(tmp_path), choice, hosts=hosts)["changed"]
    _c, plan1, _f = plan_on("gb300", str(tmp_path), choice, hosts=hosts)
    again, _findings = plan_lane(first["lanes_dir"], first["images_dir"], first["lane"],
                                 inventory_hosts("gb300", None, hosts), [], "plan", str(tmp_path))
    assert again["plan_hash"] == plan1["plan_hash"] and again["ranks"] == plan1["ranks"]


def test_recipe_lanes_carry_a_memory_section_so_the_kv_budget_is_checked(tmp_path):
    lane = yaml.safe_load(_lane_text(tmp_path, {"strategy": "multi_node_dep"}, 2))
    # 733 GB x 0.83 over 8 expert-parallel ranks; 4% of a B300's 268 GiB; the seed's measured KV bytes.
    assert lane["memory"] == {"weights_per_rank_gib": 70.8, "graph_reserve_gib": 10.7, "kv_bytes_per_token": 51226,
                              "kv_block_tokens": 64}
    _c, plan, findings = plan_on("gb300", str(tmp_path), {"strategy": "multi_node_dep"}, hosts=2)
    assert plan["memory"]["fits"] and "kv-budget-unchecked" not in [w["id"] for w in findings["warnings"]]


def test_pd_pools_must_fill_the_inventory_with_a_sentence(tmp_path):
    with pytest.raises(LanekitError) as err:
        compile_on("gb300", str(tmp_path), {"strategy": "pd_cluster", "pd": {"prefill": {"nodes": 2},
                                                                             "decode": {"nodes": 2}}}, hosts=3)
    message = str(err.value)
    assert "2 prefill + 2 decode" in message and "3 hosts" in message and "\n" not in message
    # Unsized pools split the inventory's nodes: prefill gets the odd one.
    compiled = compile_on("gb300", str(tmp_path), {"strategy": "pd_cluster"}, hosts=3)
    assert yaml.safe_load(open(compiled["lane_file"], encoding="utf-8"))["pd"]["prefill"]["nodes"] == 2


@pytest.mark.parametrize("edit,words", [
    (lambda lane: lane.pop("pd"), "'pd' is missing"),
    (lambda lane: lane["topology"].pop("layout"), "'topology.layout' is null; expected pd when the lane has a pd"),
    (lambda lane: lane["topology"].update(nodes=4), "expected 3, the prefill and decode pools' nodes together"),
    (lambda lane: lane["pd"]["decode"].update(port=8001), "a port of its own"),
    (lambda lane: lane["pd"]["prefill"]["args"].update({"--port": 9000}), "'pd.prefill.args.--port' is set"),
    (lambda lane: lane["pd"]["decode"]["args"].update({"--data-parallel-size": 2}),
     "'pd.decode.args.--data-parallel-size' is set"),
])
def test_pd_lane_mistakes_are_one_sentence(tmp_path, edit, words):
    compiled = compile_on("gb300", str(tmp_path), PD_1P2D, hosts=3)
    with open(compiled["lane_file"], encoding="utf-8") as handle:
        lane = yaml.safe_load(handle)
    edit(lane)
    with open(compiled["lane_file"], "w", encoding="utf-8") as handle:
        yaml.safe_dump(lane, handle)
    with pytest.raises(LanekitError) as err:
        plan_lane(compiled["lanes_dir"], compiled["images_dir"], compiled["lane"], inventory_hosts("gb300", None, 3),
                  [], "plan", str(tmp_path))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_data_parallel_lane_refuses_dp_flags_in_serve_args(tmp_path):
    compiled = compile_on("gb300", str(tmp_path), {"strategy": "multi_node_dep"}, hosts=2)
    with open(compiled["lane_file"], encoding="utf-8") as handle:
        lane = yaml.safe_load(handle)
    lane["serve"]["args"]["--data-parallel-start-rank"] = 3
    with open(compiled["lane_file"], "w", encoding="utf-8") as handle:
        yaml.safe_dump(lane, handle)
    with pytest.raises(LanekitError, match=r"serve.args.--data-parallel-start-rank' is set, but in a data-parallel"):
        plan_lane(compiled["lanes_dir"], compiled["images_dir"], compiled["lane"], inventory_hosts("gb300", None, 2),
                  [], "plan", str(tmp_path))


def _status(rank: int, role: str, **probes) -> RankStatus:
    return RankStatus.for_rank({"node_rank": rank, "role": role, "host": f"h{rank}", "container_name": f"c{rank}"},
                               state="running", probes=probes)


def test_readiness_needs_the_router_api_and_every_pool_head_health():
    api = {"accepts": True, "health_status": 200, "model_listed": True, "chat_ok": True}
    statuses = {0: _status(0, "prefill-head", health={"status": 200}), 1: _status(1, "decode-head", health={"status": None}),
                2: _status(2, "router", api=api)}
    assert _boot.readiness("vllm", statuses, True) == (False, "worker health not 200 on r1")
    statuses[1] = _status(1, "decode-head", health={"status": 200})
    assert _boot.readiness("vllm", statuses, True) == (True, "")
    assert statuses[2].is_head and not statuses[0].is_head


def test_the_router_log_moves_its_rank_to_ready():
    log = RankLog("vllm", "router")
    log.feed([(1.0, "INFO vllm_router: Waiting for 2 workers to become healthy"),
              (2.0, "INFO vllm_router: All workers are healthy"), (3.0, "INFO vllm_router: Starting router on 0.0.0.0:8000")])
    assert log.phase == "ready" and _engines.milestones("vllm", "router") == _engines.VLLM_ROUTER.milestones


def test_single_node_dep_is_a_data_parallel_lane_on_one_node():
    src = load_recipe(SEED)
    src.recipe["strategy_hardware"]["single_node_dep"] = {"gb300": "supported"}
    result = compile_recipe(src, Choice(hardware="gb300", strategy="single_node_dep"))
    lane, _comments = build_lane(src, result, "x")
    assert lane["topology"] == {"nodes": 1, "gpus_per_node": 4, "tensor_parallel": 1, "pipeline_parallel": 1,
                                "data_parallel": 4, "layout": "dp", "data_parallel_local": 4}
    records = _plan_layout.processes(load_lane_data(lane), [{"name": "a", "fabric_ip": "10.0.0.1"}], "/m")
    argv = records[0]["argv"]
    assert _flag(argv, "--data-parallel-size") == "4" and "--data-parallel-start-rank" not in argv
    assert "--enable-expert-parallel" in argv and records[0]["role"] == "head"


def test_a_pd_lane_refuses_an_api_key_its_router_cannot_check(tmp_path):
    # The router is the P/D lane's API and takes no key: a key would be checked by the pools only.
    with pytest.raises(LanekitError, match="cannot be enforced on a P/D lane"):
        plan_on("gb300", str(tmp_path), PD_1P2D, extra_vars={"lanekit_api_key": "sk-unit-pd"}, hosts=3)
    _compiled, plan, findings = plan_on("gb300", str(tmp_path), {"strategy": "multi_node_dep"},
                                        extra_vars={"lanekit_api_key": "sk-unit-dp"}, hosts=2)
    assert findings["errors"] == [] and plan["secrets"]["api_key"] is True


def test_a_host_layer_on_a_pd_lane_is_refused_instead_of_ignored(tmp_path):
    # The pools' ranks are rendered from pd.prefill/pd.decode: a host's own layer would be dropped silently.
    from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import host_source
    compiled = compile_on("gb300", str(tmp_path), PD_1P2D, hosts=3)
    hosts = inventory_hosts("gb300", None, 3)
    hosts[1]["layers"] = [(host_source(hosts[1]["name"]), {"serve": {"env": {"NCCL_DEBUG": "INFO"}}})]
    with pytest.raises(LanekitError) as err:
        plan_lane(compiled["lanes_dir"], compiled["images_dir"], compiled["lane"], hosts, [], "plan", str(tmp_path))
    text = str(err.value)
    assert text.startswith(host_source(hosts[1]["name"]) + " is set, but lane ") and "prefill/decode lane" in text
