"""The plan (plugin_utils/_plan/_render.py): each rank's argv and the plan invariants, what the plan
publishes for later phases, and the whole-plan goldens."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.plugin_utils._lane._schema import load_lane
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _render as _plan
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan import _secrets as _plan_secrets
from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._build import PlanInputs, build_plan
from tests.unit.helpers.plans import CPU_API_KEY, CPU_IPS, IMAGES, LANES, REPO, SGLANG, VLLM, cpu2_hosts, plan, plan_cpu

GOLDEN = os.path.join(REPO, "tests", "fixtures", "golden")


def ranks(lane, **kw):
    result, findings = plan(lane, **kw)
    assert findings["errors"] == [], findings["errors"]
    return result, result["ranks"]


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
@pytest.mark.parametrize("rank", [0, 7])
def test_golden_docker_argv(lane, rank):
    _plan, specs = ranks(lane)
    path = os.path.join(GOLDEN, f"{lane}-r{rank}.json")
    if os.environ.get("LANEKIT_UPDATE_GOLDEN"):
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(specs[rank]["docker_argv"], handle, indent=1)
            handle.write("\n")
    with open(path, encoding="utf-8") as handle:
        assert specs[rank]["docker_argv"] == json.load(handle)


def test_vllm_multinode_mechanics():
    result, specs = ranks(VLLM)
    head, worker = specs[0], specs[7]
    assert head["entrypoint"] == ["vllm"] and head["command"][0] == "serve"
    assert head["command"][1] == "/mnt/nfs/models/mistralai/Mistral-Large-4-1T-A52B-NVFP4/.revisions/unpinned"
    for spec in specs:
        cmd = spec["command"]
        assert cmd[cmd.index("--node-rank") + 1] == str(spec["node_rank"])
        assert cmd[cmd.index("--master-addr") + 1] == "10.100.0.11"
        assert cmd[cmd.index("--nnodes") + 1] == "8"
        assert spec["env"]["HF_HUB_OFFLINE"] == "1"
        assert "--rm" not in spec["docker_argv"]
    assert "--headless" not in head["command"] and "--headless" in worker["command"]
    assert "--port" in head["command"] and "--port" not in worker["command"]
    assert worker["env"]["VLLM_HOST_IP"] == "10.100.0.18"
    assert worker["env"]["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    assert worker["env"]["VLLM_ENGINE_READY_TIMEOUT_S"] == "6000"  # the recipe value, not the budget
    assert worker["mounts"] == [{"source": "/mnt/nfs/models", "target": "/mnt/nfs/models", "read_only": True}]
    assert "--cuda-graph-sizes" not in worker["command"]
    spec_config = worker["command"][worker["command"].index("--speculative-config") + 1]
    assert json.loads(spec_config) == {"method": "dspark", "num_speculative_tokens": 3}
    assert result["api"] == {"host": "spark-01", "address": "10.100.0.11", "port": 8000,
                             "url": "http://10.100.0.11:8000", "served_model_name": "mistral-large-4",
                             "key_required": False}


def test_sglang_multinode_mechanics():
    _result, specs = ranks(SGLANG)
    for spec in specs:
        cmd = spec["command"]
        assert spec["entrypoint"] == ["/opt/nvidia/nvidia_entrypoint.sh"] and cmd[:2] == ["sglang", "serve"]
        assert cmd[cmd.index("--host") + 1] == "0.0.0.0"
        assert cmd[cmd.index("--dist-init-addr") + 1] == "10.100.0.11:25000"
        assert cmd[cmd.index("--node-rank") + 1] == str(spec["node_rank"])
        assert spec["env"]["SGLANG_UNBALANCED_LOAD_TIMEOUT_S"] == "7200"
        assert spec["env"]["SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK"] == "0"
        assert spec["health_port"] == 30000  # workers serve a health endpoint too


def test_boot_budget_fills_unset_timeouts():
    _result, specs = ranks(VLLM, overrides={"serve": {"env": {"VLLM_ENGINE_READY_TIMEOUT_S": None}}})
    assert specs[0]["env"]["VLLM_ENGINE_READY_TIMEOUT_S"] == "9000"
    cmd = specs[0]["command"]
    assert cmd[cmd.index("--distributed-timeout-seconds") + 1] == "9000"
    _result, specs = ranks(SGLANG)
    cmd = specs[3]["command"]
    assert cmd[cmd.index("--dist-timeout") + 1] == "9000"


def test_one_flag_changes_every_spec_hash_and_nothing_else_changes_them():
    base, specs = ranks(VLLM)
    again, specs_again = ranks(VLLM)
    assert [s["spec_hash"] for s in specs] == [s["spec_hash"] for s in specs_again]
    assert base["plan_hash"] == again["plan_hash"]
    changed, changed_specs = ranks(VLLM, overrides={"serve": {"args": {"--max-num-seqs": 64}}})
    assert all(a["spec_hash"] != b["spec_hash"] for a, b in zip(specs, changed_specs, strict=True))
    assert changed["plan_hash"] != base["plan_hash"]


def test_host_override_changes_only_that_rank():
    _base, specs = ranks(VLLM)
    _other, other = ranks(VLLM, host_overrides={"spark-05": {"serve": {"env": {"NCCL_DEBUG": "INFO"}}}})
    changed = [s["host"] for s, t in zip(specs, other, strict=True) if s["spec_hash"] != t["spec_hash"]]
    assert changed == ["spark-05"]


def test_host_override_of_lane_wide_key_is_refused():
    with pytest.raises(LanekitError, match=r"\(host spark-03\): key 'topology' is set, but it must be the same on every"):
        plan(VLLM, host_overrides={"spark-03": {"topology": {"nodes": 4}}})


def test_plan_owned_flag_in_lane_is_refused():
    with pytest.raises(LanekitError, match=r"serve.args.--tensor-parallel-size.*topology.tensor_parallel"):
        plan(VLLM, overrides={"serve": {"args": {"--tensor-parallel-size": 4}}})


def test_missing_fabric_ip_names_the_host():
    from ansible_collections.lanekit.serving.plugins.plugin_utils._plan._render import plan_lane
    from tests.unit.helpers.plans import IMAGES, LANES, spark8_hosts
    hosts = spark8_hosts()
    del hosts[2]["vars"]["fabric_ip"]
    with pytest.raises(LanekitError, match="host spark-03 has no fabric_ip"):
        plan_lane(LANES, IMAGES, VLLM, hosts, None, "deploy")


def test_head_host_moves_rank_zero():
    _result, specs = ranks(VLLM, extra_vars={"lanekit_head_host": "spark-04"})
    assert specs[0]["host"] == "spark-04"
    assert specs[0]["command"][specs[0]["command"].index("--master-addr") + 1] == "10.100.0.14"


# -- what the plan publishes for later phases: orders, per-host index, container options, ports, paths
def _plan_of(lane=VLLM, **kw):
    result, findings = plan(lane, **kw)
    assert findings["errors"] == [], findings["errors"]
    return result


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
def test_start_and_stop_order_put_the_head_first(lane):
    result = _plan_of(lane)
    assert result["start_order"] == [[0], [1, 2, 3, 4, 5, 6, 7]]
    assert result["stop_order"] == [[0], [1, 2, 3, 4, 5, 6, 7]]


def test_hosts_index_follows_the_rank_order():
    result = _plan_of(VLLM, extra_vars={"lanekit_head_host": "spark-04"})
    assert result["hosts"]["spark-04"] == [0] and result["hosts"]["spark-01"] == [1]
    assert list(result["hosts"]) == [r["host"] for r in result["ranks"]]
    for host, node_ranks in result["hosts"].items():
        assert [result["ranks"][i]["host"] for i in node_ranks] == [host] * len(node_ranks)
    assert [r["node_rank"] for r in result["ranks"]] == list(range(8))


def test_rendezvous_port_and_barrier_timeout_are_published():
    vllm, sglang = _plan_of(VLLM), _plan_of(SGLANG)
    assert vllm["rendezvous_port"] == 29501 and sglang["rendezvous_port"] == 25000
    assert vllm["barrier_timeout_s"] is None
    assert sglang["barrier_timeout_s"] == 7200.0
    assert sglang["ranks"][3]["env"]["SGLANG_UNBALANCED_LOAD_TIMEOUT_S"] == "7200"


def test_single_node_lane_has_no_rendezvous_port():
    # The seed lanes are multi-node: build the vLLM lane's plan on one host directly (the builder does not lint).
    image = {k: None for k in ("name", "base_ref", "base_digest", "arch", "platform", "pinned", "pin_problem",
                               "spec_dir", "patches", "labels", "repository", "tag")}
    image.update({"ref": "img", "content_hash": "c", "entrypoint": ["vllm"]})
    one = build_plan(PlanInputs(lane=load_lane(LANES, VLLM), profile={"env": {}}, image=image,
                                hosts=[{"name": "solo", "fabric_ip": "10.0.0.1"}], cluster={"weights_root": "/w"},
                                reports_root="/r"))
    assert one["rendezvous_port"] is None
    assert one["hosts"] == {"solo": [0]} and one["start_order"] == [[0]]
    assert one["reports_dir"] == f"/r/{VLLM}"
    assert "--nnodes" not in one["ranks"][0]["command"]


def test_container_block_is_docker_container_options():
    rank = _plan_of(VLLM)["ranks"][7]
    c = rank["container"]
    assert c["name"] == rank["container_name"] and c["image"] == rank["image"]
    assert c["entrypoint"] == rank["entrypoint"] and c["command"] == rank["command"]
    assert c["env"] == rank["env"] and c["labels"] == rank["labels"]
    assert c["mounts"] == [{"type": "bind", "source": "/mnt/nfs/models", "target": "/mnt/nfs/models",
                            "read_only": True}]
    assert c["ulimits"] == ["memlock:-1:-1", "stack:67108864"]
    assert c["capabilities"] == ["IPC_LOCK"] and c["devices"] == ["/dev/infiniband"]
    assert c["shm_size"] == "32g"
    assert c["device_requests"] == [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
    assert (c["network_mode"], c["ipc_mode"]) == ("host", "host")


# -- issue 38 (item 10): every rank's docker log is rotated, in the docker run line and in the role's options.
ROTATED = ["--log-driver", "json-file", "--log-opt", "max-file=3", "--log-opt", "max-size=100m"]


def _has_run(argv, part):
    return any(argv[i:i + len(part)] == part for i in range(len(argv)))


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
def test_every_rank_s_docker_log_is_rotated_by_default(lane):
    for rank in _plan_of(lane)["ranks"]:
        assert _has_run(rank["docker_argv"], ROTATED), rank["docker_argv"]
        assert rank["container"]["log_driver"] == "json-file"
        assert rank["container"]["log_options"] == {"max-size": "100m", "max-file": "3"}


def test_the_lane_chooses_its_log_rotation_and_a_change_recreates_the_ranks():
    default = _plan_of(VLLM)
    chosen = _plan_of(VLLM, overrides={"serve": {"logs": {"max_size": "20m", "max_files": 2}}})
    for before, rank in zip(default["ranks"], chosen["ranks"], strict=True):
        assert _has_run(rank["docker_argv"], ["--log-opt", "max-file=2", "--log-opt", "max-size=20m"])
        assert rank["container"]["log_options"] == {"max-size": "20m", "max-file": "2"}
        assert rank["spec_hash"] != before["spec_hash"], "a new rotation must recreate the rank"
    with pytest.raises(LanekitError, match=r"key 'serve\.logs\.max_size' is '20 MB' \(a string\); expected a size such as 100m"):
        plan(VLLM, overrides={"serve": {"logs": {"max_size": "20 MB"}}})
    with pytest.raises(LanekitError, match=r"key 'serve\.logs\.max_files' is 0"):
        plan(VLLM, overrides={"serve": {"logs": {"max_files": 0}}})


def test_the_ranks_role_passes_every_container_option_of_the_plan():
    """roles/ranks gives community.docker.docker_container each option of the rank's container block (the
    log rotation included): an option the role drops would be in the plan and the docker run line only."""
    import yaml
    with open(os.path.join(REPO, "roles", "ranks", "tasks", "container.yml"), encoding="utf-8") as handle:
        task = yaml.safe_load(handle)[0]["block"][0]
    passed = task["community.docker.docker_container"]
    keys = set()
    for lane in (VLLM, SGLANG):
        for rank in _plan_of(lane, extra_vars={"lanekit_api_key": "k" * 32})["ranks"]:
            keys |= set(rank["container"])
    assert {"log_driver", "log_options"} <= keys
    for key in sorted(keys):
        assert key in passed and f"item.container.{key}" in str(passed[key]), f"the ranks role drops {key}"


@pytest.mark.parametrize("gpus, expected", [
    ("all", [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]),
    ("2", [{"driver": "nvidia", "count": 2, "capabilities": [["gpu"]]}]),
    ("0,1", [{"driver": "nvidia", "device_ids": ["0", "1"], "capabilities": [["gpu"]]}]),
    ("device=GPU-3f", [{"driver": "nvidia", "device_ids": ["GPU-3f"], "capabilities": [["gpu"]]}]),
    ("", []),
    (None, []),
])
def test_gpus_become_device_requests(gpus, expected):
    assert _plan.device_requests(gpus) == expected


def test_empty_gpus_and_shm_size_are_left_out_of_the_container_block():
    rank = _plan_of(VLLM, extra_vars={"lanekit_rank_gpus": "", "lanekit_rank_shm_size": ""})["ranks"][0]
    assert "device_requests" not in rank["container"] and "shm_size" not in rank["container"]
    assert "--gpus" not in rank["docker_argv"]


def test_ulimits_take_the_modules_form():
    assert _plan.module_ulimit("nofile=1048576:1048576") == "nofile:1048576:1048576"
    assert _plan.module_ulimit("memlock=-1") == "memlock:-1"
    assert _plan.module_ulimit("core:0") == "core:0"  # already in the module's form


# --- where the controller reads and writes ------------------------------------------------

def test_reports_root_prefers_the_variable(tmp_path):
    assert _plan.reports_root("/r", "/repo/playbooks", str(tmp_path)) == "/r"
    assert _plan.reports_root("rel", "/repo/playbooks", str(tmp_path)) == str(tmp_path / "rel")


def test_reports_root_sits_beside_a_checkouts_playbooks(tmp_path):
    assert _plan.reports_root(None, "/repo/playbooks", str(tmp_path)) == "/repo/reports"
    assert _plan.reports_root("", "/site", str(tmp_path)) == "/site/reports"


def test_reports_root_of_an_installed_collection_is_the_working_directory(tmp_path):
    installed = "/home/u/.ansible/collections/ansible_collections/lanekit/serving/playbooks"
    assert _plan.reports_root(None, installed, str(tmp_path)) == str(tmp_path / "reports")
    assert _plan.reports_root(None, None, str(tmp_path)) == str(tmp_path / "reports")


def test_plan_reports_dir_is_the_lanes_folder_under_the_root():
    result, _findings = plan(VLLM, reports_root="/srv/reports")
    assert result["reports_dir"] == f"/srv/reports/{VLLM}"


def test_lanes_and_images_are_found_argument_variable_working_directory_collection(tmp_path):
    collection = str(tmp_path / "collection")
    cwd = tmp_path / "team"
    cwd.mkdir()
    find = _plan.find_spec_dir
    assert find("lanes", "/explicit", "/configured", str(cwd), collection) == "/explicit"
    assert find("lanes", None, "/configured", str(cwd), collection) == "/configured"
    assert find("lanes", "", "", str(cwd), collection) == os.path.join(collection, "lanes")
    (cwd / "lanes").mkdir()
    assert find("lanes", None, None, str(cwd), collection) == str(cwd / "lanes")
    assert find("images", None, None, str(cwd), collection) == os.path.join(collection, "images")


# -- golden plans: the whole plan of both seed lanes on inventories/spark8, and each rank's `docker run` line.
# Any change of a rank's argv, env, labels, container options or hashes shows up here. The hashes
# move only with a plan_version bump (test__build.py holds the goldens to PLAN_VERSION): regenerate
# with LANEKIT_UPDATE_GOLDEN=1 only for a change that is meant, in the commit that bumps it.
def _normalised(obj):
    """The plan with checkout paths replaced by placeholders, so the golden holds on any machine."""
    text = json.dumps(obj, indent=1, sort_keys=True)
    for path in sorted({REPO, os.path.realpath(REPO)}, key=len, reverse=True):
        text = text.replace(path, "<checkout>")
    data = json.loads(text)
    if isinstance(data, dict) and "reports_dir" in data:
        data["reports_dir"] = f"<reports>/{data['lane']}"
    return data


def _check(path: str, actual: str) -> None:
    if os.environ.get("LANEKIT_UPDATE_GOLDEN"):
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(actual)
    with open(path, encoding="utf-8") as handle:
        assert actual == handle.read(), f"{path} differs from the rendered plan"


def _whole_plan(lane):
    result, findings = plan(lane, lanes_dir=LANES, images_dir=IMAGES)
    assert findings["errors"] == [], findings["errors"]
    return result


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
def test_whole_plan_matches_its_golden(lane):
    actual = json.dumps(_normalised(_whole_plan(lane)), indent=1, sort_keys=True) + "\n"
    _check(os.path.join(GOLDEN, f"{lane}-plan.json"), actual)


@pytest.mark.parametrize("lane", [VLLM, SGLANG])
def test_check_mode_docker_run_lines_match_their_golden(lane):
    # The line the ranks role prints in check mode for a rank whose image is not on the node yet.
    lines = [f"r{r['node_rank']} {r['host']}: {' '.join(r['docker_argv'])}" for r in _whole_plan(lane)["ranks"]]
    _check(os.path.join(GOLDEN, f"{lane}-docker-run.txt"), _normalised_text("\n".join(lines) + "\n"))


def _normalised_text(text: str) -> str:
    for path in sorted({REPO, os.path.realpath(REPO)}, key=len, reverse=True):
        text = text.replace(path, "<checkout>")
    return text


# --- the real-engine lane: a tiny Llama on two CPU nodes ------------------------------------------------

CPU_MODEL = "/mnt/nfs/models/lanekit/tiny-llama-2l-h128/.revisions/unpinned"
CPU_LANE_ARGS = ["--max-model-len", "512", "--dtype", "float32", "--enforce-eager", "--distributed-timeout-seconds", "900"]


def test_the_cpu_lane_plans_each_ranks_exact_command_and_environment():
    result, findings = plan_cpu()
    assert findings["errors"] == [] and findings["warnings"] == []
    r0, r1 = result["ranks"]
    group = ["--tensor-parallel-size", "2", "--nnodes", "2"]
    rendezvous = ["--master-addr", CPU_IPS[0], "--master-port", "29501"]
    # The lane has a key: every rank starts behind lanekit's KeyGuard, then runs `vllm` as planned.
    guard = ["-c", _plan_secrets.key_guard_program(), "--middleware", "vllm"]
    assert r0["entrypoint"] == ["python3"] and r1["entrypoint"] == ["python3"]
    assert r0["command"][:4] == guard and r1["command"][:4] == guard
    r0["command"], r1["command"] = r0["command"][4:], r1["command"][4:]
    assert r0["command"] == ["serve", CPU_MODEL, "--served-model-name", "tiny", "--host", "0.0.0.0", "--port", "8000",
                             *CPU_LANE_ARGS, *group, "--node-rank", "0", *rendezvous]
    assert r1["command"] == ["serve", CPU_MODEL, "--served-model-name", "tiny", *CPU_LANE_ARGS, *group,
                             "--node-rank", "1", *rendezvous, "--headless"]
    for spec, ip, bind in ((r0, CPU_IPS[0], "0"), (r1, CPU_IPS[1], "1")):
        assert spec["env"] == {"VLLM_HOST_IP": ip, "VLLM_CPU_OMP_THREADS_BIND": bind, "HF_HUB_OFFLINE": "1",
                               "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENGINE_READY_TIMEOUT_S": "900",
                               "NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"}
        # No GPU request and no device: a CPU node has none to give.
        assert spec["gpus"] == "" and spec["devices"] == []
        assert "device_requests" not in spec["container"] and spec["container"]["devices"] == []
        assert "--gpus" not in spec["docker_argv"] and "--device" not in spec["docker_argv"]
        # The API key reaches the engine through the node's secret env file, never the plan.
        assert CPU_API_KEY not in json.dumps(spec) and spec["container"]["env_file"] == spec["secret_env_file"]
    assert result["api"]["key_required"] is True and result["secrets"]["api_key_env"] == "VLLM_API_KEY"
    assert result["image"]["arch"] == "amd64" and result["hardware_profile"]["gpu_name"] is None
    assert result["memory"] == {"kv_space_env": "VLLM_CPU_KVCACHE_SPACE", "kv_space_gib": 1, "kv_bytes_per_token": 512,
                                "max_model_len": 512, "request_gib": 0.0002, "max_tokens": 2097152, "fits": True}


def test_a_host_without_a_thread_binding_keeps_the_lanes_value():
    result, _findings = plan_cpu(hosts=cpu2_hosts(binds=(None, None)))
    assert all("VLLM_CPU_OMP_THREADS_BIND" not in r["env"] for r in result["ranks"])  # vLLM's own auto
    lane_value = {"serve": {"env": {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}}}
    result, _findings = plan_cpu(hosts=cpu2_hosts(binds=("0", None), overrides=lane_value))
    assert [r["env"]["VLLM_CPU_OMP_THREADS_BIND"] for r in result["ranks"]] == ["0", "0-1"]


def test_a_thread_binding_that_is_not_text_is_one_sentence():
    with pytest.raises(LanekitError, match=r"^host cpu-02: lanekit_cpu_threads_bind is '0 1'; expected text without "
                                           r"spaces .* in its host_vars\.$"):
        plan_cpu(hosts=cpu2_hosts(binds=("0", "0 1")))


def test_cpu_nodes_are_amd64_and_an_arm64_inventory_is_refused_with_the_fix():
    hosts = cpu2_hosts()
    for host in hosts:
        del host["vars"]["lanekit_node_arch"]
    result, _findings = plan_cpu(hosts=hosts)
    assert result["image"]["arch"] == "amd64"  # the profile's architecture is the default
    with pytest.raises(LanekitError, match=r"lanekit_node_arch is 'arm64'.*set lanekit_node_arch: amd64"):
        plan_cpu(extra_vars={"lanekit_node_arch": "arm64"})


def test_gpu_selection_on_cpu_nodes_is_refused_with_the_cpu_fix():
    with pytest.raises(LanekitError, match=r"lanekit_rank_visible_devices is '0,1', but lane tiny-llama-cpu-2x-vllm runs "
                                           r"on x86-64 CPU node .* lanekit_cpu_threads_bind instead\)\.$"):
        plan_cpu(extra_vars={"lanekit_rank_visible_devices": "0,1"})


def test_the_real_engine_lane_plans_on_the_sim_cpu_inventory_as_its_golden_says():
    # The lane CI deploys on the simulated cluster (make demo-real, molecule's scenario 13), planned against
    # inventories/sim-cpu and the real image spec. Its hardware profile (cpu_x86) shares the vLLM CPU backend
    # with the recipe taxonomy's xeon6/xeon5 profiles (issue 27): the golden was written before they were
    # added, and adding them moved nothing a rank runs, nor anything else in the plan.
    from tests.unit.helpers.inventories import inventory_hosts
    result, findings = _plan.plan_lane(LANES, IMAGES, "tiny-llama-cpu-2x-vllm", inventory_hosts("sim-cpu"), [], "plan")
    assert findings["errors"] == [] and [w["id"] for w in findings["warnings"]] == ["image-pin"]
    actual = json.dumps(_normalised(result), indent=1, sort_keys=True) + "\n"
    _check(os.path.join(GOLDEN, "tiny-llama-cpu-2x-vllm-sim-cpu-plan.json"), actual)
