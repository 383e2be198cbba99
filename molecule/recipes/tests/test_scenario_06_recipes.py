"""Recipe lanes of the new layouts on the simulated cluster, one after another on a few nodes each:
a multi_node_dep lane (data-parallel engines, --data-parallel-start-rank, the API on rank 0) and a
pd_cluster lane (a prefill pool, a decode pool and the router) deploy and answer the OpenAI API; a
multi_node_tp_pp lane reaches ready. Each is compiled from the seed recipe (recipes/) by
deploy_lane.yml -e recipe=... for the recipe's own hardware with the sim's one GPU per node, then
pointed at the sim's GB10 nodes through the CLI override layer (hardware, the stand-in's memory
figures; the recipe's image pinned to the sim's stand-in upstream) -- what a user does with a recipe made for other hardware.

The two nodes are the sim's CPU nodes (inventories/sim-cpu's hosts with inventories/sim's settings),
posing as GB10s for this module through the simulated nvidia-smi's own override file: this scenario
then runs (scenario recipes, tests/test-all.sh's cpu track) beside the seed lane's scenarios on
the eight spark nodes instead of after them, and the seed lane keeps serving. Every recipe lane is torn
down at the end and the CPU nodes report no GPU again before the real vLLM lane's scenarios use them.
Test code only (not part of the collection).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest
import yaml
from simlib import (
    ANSI,
    PLAYBOOK,
    ROOT,
    assert_no_traceback,
    docker,
    flat,
    rank_containers,
    record_timing,
    staging_host_held,
)

RECIPE = os.path.join(ROOT, "recipes", "mistralai", "Mistral-Large-4-1T-A52B.json")
# The sim's nodes are GB10s with the stand-in's memory (tests/sim/standin/lanekit_standin/memory.py);
# the recipe's image is pinned to the sim's stand-in upstream (_digests).
TO_THE_SIM = {"hardware": "dgx_spark_gb10",
              "memory": {"weights_per_rank_gib": 73.8, "graph_reserve_gib": 5.0, "kv_bytes_per_token": 51215}}
DEP = "mistral-large-4-1t-a52b-default-gb300-multi-node-dep-2n"
PD = "mistral-large-4-1t-a52b-default-gb300-pd-cluster"
TP_PP = "mistral-large-4-1t-a52b-fp8-h200-multi-node-tp-pp-2n"
LANES = (DEP, PD, TP_PP)
# The sim's CPU nodes (inventories/sim-cpu), where the real vLLM lane runs before or after this module.
CPU_INVENTORY = os.path.join(ROOT, "inventories", "sim-cpu")
REAL_LANE = "tiny-llama-cpu-2x-vllm"
# The simulated nvidia-smi reads this file on the CPU nodes (tests/sim/roles/sim_cluster: nodes.yml);
# an empty object is its defaults, one NVIDIA GB10.
NVIDIA_SMI_CONFIG = "/etc/lksim/no-gpu.json"


def _cpu_hosts() -> dict:
    with open(os.path.join(CPU_INVENTORY, "hosts.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["all"]["children"]["lane_nodes"]["hosts"]


NODES = [f"lksim-{host}" for host in _cpu_hosts()]


def lane_containers(lane: str) -> dict[str, tuple[str, str]]:
    """{container name: (id, state)} of a lane's ranks on the CPU nodes."""
    return {c["Names"]: (c["ID"], c["State"]) for node in NODES for c in rank_containers(node, lane)}


def _inventory(path, hosts: int, extra: dict) -> str:
    """inventories/sim with the first ``hosts`` CPU nodes as its lane nodes (their CPU-lane thread binding
    dropped) and the GPUs per node the recipe is compiled for; inventories/sim's group_vars. The inventory
    says nothing of the nodes' hardware: the recipe is compiled for its own (-e recipe_hardware) and the lane
    then pointed at the sim's GB10s by the override layer; an inventory that said gb300 would be refused
    against a lane for GB10s (issue 37: the lane's hardware against the inventory's on every path)."""
    with open(os.path.join(ROOT, "inventories", "sim", "hosts.yml"), encoding="utf-8") as handle:
        sim = yaml.safe_load(handle)
    nodes = sim["all"]["children"]["lane_nodes"]
    nodes["hosts"] = {name: {key: value for key, value in host.items() if key != "lanekit_cpu_threads_bind"}
                      for name, host in list(_cpu_hosts().items())[:hosts]}
    nodes.setdefault("vars", {}).update(extra)
    path.mkdir(parents=True, exist_ok=True)
    (path / "hosts.yml").write_text(yaml.safe_dump(sim), encoding="utf-8")
    if not (path / "group_vars").exists():
        os.symlink(os.path.join(ROOT, "inventories", "sim", "group_vars"), path / "group_vars")
    return str(path)


def _run(playbook: str, inventory: str, extra_vars: dict, timeout: int = 1200):
    """Like simlib.run_playbook, with an inventory of our own and every variable as one JSON -e."""
    argv = [PLAYBOOK, os.path.join(ROOT, "playbooks", playbook), "-i", inventory, "-e", json.dumps(extra_vars)]
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    started = time.monotonic()
    # Beside the seed lane's scenarios (CI's cpu track, tests/test-all.sh): hold the shared staging host.
    with staging_host_held():
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    proc.seconds = time.monotonic() - started
    print(proc.stdout[-6000:])
    print(proc.stderr[-2000:])
    return proc


# The shared sim's stand-in images change with whoever ran sim-up last; the recipe image's lock in
# .sim/locks follows them (a fresh CI sim has none).
LOCK_FOLLOWS_THE_SIM = {"image_lock_update": True}


def _digests() -> dict:
    """The sim's pins, and the recipe image's (the same stand-in upstream) under its own name."""
    with open(os.path.join(ROOT, "inventories", "sim", "group_vars", "all", "sim_pins.yml"), encoding="utf-8") as fh:
        pins = yaml.safe_load(fh)["lanekit_image_digests"]
    return dict(pins, **{"mistral-large-4-1t-a52b-vllm": pins["mistral-large4-vllm"]})


def _plan(lane: str) -> dict:
    with open(os.path.join(ROOT, "reports", lane, "plan.json"), encoding="utf-8") as handle:
        return json.load(handle)


def _post(node: str, url: str, body: dict) -> tuple[int, dict, str]:
    """POST from inside a sim node (the fabric addresses are reachable there)."""
    script = ("import json,sys,urllib.request as u\n"
              "r=u.urlopen(u.Request(sys.argv[1],data=sys.argv[2].encode(),headers={'Content-Type':'application/json'}),"
              "timeout=60)\n"
              "print(json.dumps({'status':r.status,'headers':dict(r.headers),'body':r.read().decode()}))")
    out = subprocess.run(["docker", "exec", node, "python3", "-c", script, url, json.dumps(body)],
                         capture_output=True, text=True, timeout=90, check=False)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    return data["status"], data["headers"], data["body"]


def _chat(node: str, address: str, port: int, model: str) -> tuple[dict, str]:
    status, headers, body = _post(node, f"http://{address}:{port}/v1/chat/completions",
                                  {"model": model, "messages": [{"role": "user", "content": "Say hello."}],
                                   "max_tokens": 16})
    assert status == 200, body
    text = json.loads(body)["choices"][0]["message"]["content"]
    assert "stand-in" in text.lower() or text, body
    return headers, text


def _logs(plan: dict, rank: int) -> str:
    spec = plan["ranks"][rank]
    proc = docker(f"lksim-{spec['host']}", "logs", spec["container_name"], check=False)
    return proc.stdout + proc.stderr


def _teardown(inventory: str, lane: str):
    proc = _run("teardown_lane.yml", inventory, {"lane": lane, "teardown_remove": True}, timeout=600)
    assert proc.returncode == 0
    assert lane_containers(lane) == {}, f"teardown left containers of {lane}"
    return proc


def _nvidia_smi_config(node: str, content: str | None = None) -> str:
    """The CPU node's simulated nvidia-smi configuration; with ``content``, replaced by it first."""
    if content is not None:
        subprocess.run(["docker", "exec", "-i", node, "sh", "-c", f"cat > {NVIDIA_SMI_CONFIG}"], input=content,
                       text=True, check=True)
    return subprocess.run(["docker", "exec", node, "cat", NVIDIA_SMI_CONFIG], capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture(scope="module")
def recipe_nodes(tmp_path_factory):
    """The CPU nodes free of the real vLLM lane (one lane per GPU) and posing as GB10s; every recipe lane
    off them at the end, and their own "no GPU" answer back."""
    if lane_containers(REAL_LANE):
        proc = _run("teardown_lane.yml", CPU_INVENTORY, {"lane": REAL_LANE, "teardown_remove": True}, timeout=600)
        assert proc.returncode == 0, f"could not tear down {REAL_LANE}"
    base = tmp_path_factory.mktemp("recipe-inventories")
    saved = {node: _nvidia_smi_config(node) for node in NODES}
    try:
        for node in NODES:
            _nvidia_smi_config(node, "{}\n")
        yield base
        everything = _inventory(base / "all", len(NODES), {})
        for lane in LANES:
            if lane_containers(lane):
                _run("teardown_lane.yml", everything, {"lane": lane, "teardown_remove": True}, timeout=600)
        for lane in LANES:
            assert lane_containers(lane) == {}, f"{lane} left containers behind"
    finally:
        for node, content in saved.items():
            _nvidia_smi_config(node, content)


def test_a_multi_node_dep_lane_deploys_and_answers_on_rank_zero(recipe_nodes):
    inventory = _inventory(recipe_nodes / "dep", 2, {"lanekit_gpus_per_node": 1})
    proc = _run("deploy_lane.yml", inventory, {"recipe": RECIPE, "recipe_hardware": "gb300", "recipe_strategy": "multi_node_dep",
                                               "lanekit_image_digests": _digests(), "lane_cli_overrides": TO_THE_SIM,
                                               **LOCK_FOLLOWS_THE_SIM})
    record_timing("scenario 6 multi_node_dep deploy (2 nodes)", proc.seconds)
    assert_no_traceback(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "is ready" in flat(proc.stdout)
    plan = _plan(DEP)
    assert plan["topology"]["layout"] == "dp" and [r["role"] for r in plan["ranks"]] == ["head", "worker"]
    worker = plan["ranks"][1]["command"]
    assert worker[worker.index("--data-parallel-start-rank") + 1] == "1"
    assert worker[worker.index("--data-parallel-address") + 1] == plan["ranks"][0]["fabric_ip"]
    assert "--data-parallel-start-rank" not in plan["ranks"][0]["command"]
    assert plan["api"]["host"] == plan["ranks"][0]["host"]
    headers, _text = _chat(NODES[0], plan["api"]["address"], plan["api"]["port"], plan["api"]["served_model_name"])
    assert "X-Lanekit-Standin" in headers
    # Both DP engines joined one group: rank 1 logs its DP rank.
    assert re.search(r"is assigned as DP rank 1\b", _logs(plan, 1)), _logs(plan, 1)[-2000:]
    _teardown(inventory, DEP)


def test_a_pd_cluster_lane_routes_a_request_through_prefill_and_decode(recipe_nodes):
    inventory = _inventory(recipe_nodes / "pd", 2, {"lanekit_gpus_per_node": 1})
    proc = _run("deploy_lane.yml", inventory, {
        "recipe": RECIPE, "recipe_hardware": "gb300", "recipe_strategy": "pd_cluster",
        "recipe_pd": {"prefill": {"nodes": 1}, "decode": {"nodes": 1}},
        "lanekit_image_digests": _digests(), "lane_cli_overrides": TO_THE_SIM, **LOCK_FOLLOWS_THE_SIM})
    record_timing("scenario 6 pd_cluster deploy (1+1 nodes + router)", proc.seconds)
    assert_no_traceback(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "is ready" in flat(proc.stdout)
    plan = _plan(PD)
    roles = [r["role"] for r in plan["ranks"]]
    assert roles == ["prefill-head", "decode-head", "router"]
    assert plan["start_order"] == [[0, 1], [2]] and plan["stop_order"] == [[2], [0, 1]]
    router = plan["ranks"][2]
    assert router["entrypoint"] == ["vllm-router"] and router["host"] == plan["ranks"][0]["host"]
    headers, _text = _chat(NODES[1], plan["api"]["address"], plan["api"]["port"], plan["api"]["served_model_name"])
    prefill_url = f"http://{plan['ranks'][0]['fabric_ip']}:{plan['pools']['prefill']['port']}"
    decode_url = f"http://{plan['ranks'][1]['fabric_ip']}:{plan['pools']['decode']['port']}"
    assert headers.get("X-Lanekit-Router-Path") == f"prefill={prefill_url} decode={decode_url}", headers
    # Both pools served the request the router sent them, and said which KV role they play.
    router_ip = router["fabric_ip"]
    prefill_log, decode_log = _logs(plan, 0), _logs(plan, 1)
    assert "kv_role: kv_producer" in prefill_log and "kv_role: kv_consumer" in decode_log
    for log in (prefill_log, decode_log):
        assert re.search(rf"{re.escape(router_ip)}:\d+ - \"POST /v1/chat/completions HTTP/1.1\" 200", log), log[-2000:]
    assert re.search(r"prefill .* \(200\) -> decode .* \(200\)", _logs(plan, 2))
    # The router stops first, the pools after it.
    down = _teardown(inventory, PD)
    text = ANSI.sub("", down.stdout)
    start = text.index("Stop the ranks that stop first")
    first_task = text[start:text.index("TASK [", start)]
    assert set(re.findall(r"-(r\d+)\b", first_task)) == {"r2"}, first_task


def test_a_router_that_refuses_its_arguments_is_triaged_with_the_routers_own_cause_and_fix(recipe_nodes):
    # A router flag the router does not know (pd.router.args): the stand-in refuses it with clap's
    # text, as the Rust vllm-router does, and the wait names the router's own cause and fix.
    inventory = _inventory(recipe_nodes / "pd", 2, {"lanekit_gpus_per_node": 1})
    overrides = dict(TO_THE_SIM, pd={"router": {"args": {"--no-such-router-flag": True}}})
    proc = _run("deploy_lane.yml", inventory, {
        "recipe": RECIPE, "recipe_hardware": "gb300", "recipe_strategy": "pd_cluster",
        "recipe_pd": {"prefill": {"nodes": 1}, "decode": {"nodes": 1}},
        "lanekit_image_digests": _digests(), "lane_cli_overrides": overrides, **LOCK_FOLLOWS_THE_SIM})
    record_timing("scenario 6 pd_cluster with a router that refuses its arguments", proc.seconds)
    out = flat(proc.stdout)
    assert_no_traceback(proc.stdout)
    assert proc.returncode != 0, out[-3000:]
    assert "[router_bad_argument]" in out, out[-3000:]
    assert "[unknown_engine_flag]" not in out  # the router's own finding, not the engines'
    assert "error: unexpected argument '--no-such-router-flag' found" in out and "pd.router.args" in out
    _teardown(inventory, PD)


def test_a_multi_node_tp_pp_lane_reaches_ready(recipe_nodes):
    # The seed offers TP x PP on H200 (two 8-GPU nodes): compile that, then run its two pipeline
    # stages on two GB10s (TP1 x PP2) with the sim's NVFP4 checkpoint.
    inventory = _inventory(recipe_nodes / "tp_pp", 2, {"lanekit_gpus_per_node": 8})
    overrides = dict(TO_THE_SIM, topology={"gpus_per_node": 1, "tensor_parallel": 1},
                     model={"id": "mistralai/Mistral-Large-4-1T-A52B-NVFP4",
                            "dir": "mistralai/Mistral-Large-4-1T-A52B-NVFP4"})
    proc = _run("deploy_lane.yml", inventory, {"recipe": RECIPE, "recipe_hardware": "h200", "recipe_strategy": "multi_node_tp_pp",
                                               "lanekit_image_digests": _digests(), "lane_cli_overrides": overrides,
                                               **LOCK_FOLLOWS_THE_SIM})
    record_timing("scenario 6 multi_node_tp_pp deploy (2 nodes)", proc.seconds)
    assert_no_traceback(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "is ready" in flat(proc.stdout)
    plan = _plan(TP_PP)
    head = plan["ranks"][0]["command"]
    assert head[head.index("--pipeline-parallel-size") + 1] == "2" and "--headless" in plan["ranks"][1]["command"]
    _teardown(inventory, TP_PP)
