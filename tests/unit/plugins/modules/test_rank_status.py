# Copyright: lanekit developers
# Apache-2.0
"""rank_status (modules/rank_status.py): meminfo figures, rendezvous peers and the report built over
a docker in memory."""
from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._boot._proc_net import parse_proc_tcp
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import DockerCLI
from ansible_collections.lanekit.serving.plugins.modules import rank_status as rs
from tests.unit.helpers.procfs import FakeProc, start_recorder, stop_recorder


class FakeModule:
    """Just enough of AnsibleModule for DockerCLI: records argv lists, answers from ``responder``."""

    def __init__(self, responder):
        self.responder = responder
        self.calls = []

    def get_bin_path(self, name, required=False):
        return "/bin/true"  # any existing file: the fake never executes it

    def run_command(self, argv, data=None, environ_update=None, check_rc=False):
        self.calls.append(list(argv))
        return self.responder(list(argv))


def test_meminfo_figures_are_reported_in_kilobytes():
    text = "MemTotal:       125000000 kB\nMemFree:         1600000 kB\nMemAvailable:   31000000 kB\nHugePages_Total: 0\n"
    assert rs.meminfo_kb(text) == {"MemTotal": 125000000, "MemFree": 1600000, "MemAvailable": 31000000}


def _docker_in_memory(containers, logs):
    """A DockerCLI over a fake module: ``containers`` name -> inspect object, ``logs`` name -> (out, err)."""
    def respond(argv):
        if argv[1] == "ps":
            wanted = argv[argv.index("--filter") + 1].split("=", 1)[1]
            key, value = wanted.split("=", 1)
            names = [n for n, obj in containers.items() if obj["Config"]["Labels"].get(key) == value]
            return 0, "\n".join(names) + "\n", ""
        if argv[1] == "inspect":
            asked = argv[4:]
            found = [containers[n] for n in asked if n in containers]
            missing = [n for n in asked if n not in containers]
            return (1 if missing else 0), json.dumps(found), "".join(f"Error: No such container: {n}\n" for n in missing)
        if argv[1] == "logs":
            out, err = logs[argv[-1]]
            return 0, out, err
        raise AssertionError(argv)
    module = FakeModule(responder=respond)
    return DockerCLI(module), module


def _container(name, rank, running=True, started="2026-10-30T06:00:00.000000000Z"):
    return {"Id": f"id-{name}", "Name": f"/{name}", "State": {"Running": running, "StartedAt": started},
            "Config": {"Image": "lanekit/x:1", "Labels": {"io.lanekit.lane": "l1", "io.lanekit.rank": str(rank)}}}


PARAMS = {"containers": [], "lane": None, "since": {}, "tail": 400, "max_lines": 5000, "api_probe": None,
          "health_probes": [], "listen_ports": [], "bundle_dir": None, "command_timeout": 60, "exit_watch_s": 0.0,
          "exit_watch_since": None}


def test_report_finds_the_lane_containers_by_label_and_merges_their_log_streams():
    docker, module = _docker_in_memory(
        {"r0": _container("r0", 0), "r1": _container("r1", 1, running=False)},
        {"r0": ("2026-10-30T06:00:01.000000100Z a\n", "2026-10-30T06:00:01.000000020Z before-a\n"),
         "r1": ("", "")})
    result = rs.status(docker, dict(PARAMS, containers=["gone"], lane="l1", since={"r1": "2026-10-30T06:00:05Z"}))
    by_name = {c["name"]: c for c in result["containers"]}
    assert list(by_name) == ["gone", "r0", "r1"]
    assert by_name["gone"]["exists"] is False
    assert (by_name["r0"]["rank"], by_name["r0"]["role"], by_name["r0"]["running"]) == (0, "head", True)
    assert [line.split(" ", 1)[1] for line in by_name["r0"]["lines"]] == ["before-a", "a"]
    assert (by_name["r1"]["role"], by_name["r1"]["running"]) == ("worker", False)
    logs = {call[-1]: call for call in module.calls if call[1] == "logs"}
    # a container without a since entry gets its current run's tail, one with an entry everything new
    assert logs["r0"][logs["r0"].index("--since") + 1] == "2026-10-30T06:00:00.000000000Z"
    assert logs["r0"][logs["r0"].index("--tail") + 1] == "400"
    assert logs["r1"][logs["r1"].index("--since") + 1] == "2026-10-30T06:00:05Z"
    assert logs["r1"][logs["r1"].index("--tail") + 1] == "5000"
    assert all(isinstance(v, int) for v in result["meminfo"].values())


PROC_TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:733D 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0BD51FAC:733D 10D51FAC:C8A2 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
   2: 0BD51FAC:733D 0CD51FAC:A001 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 20 4 30 10 -1
   3: 0BD51FAC:1F40 0DD51FAC:A002 01 00000000:00000000 00:00000000 00000000     0        0 4 1 0 20 4 30 10 -1
   4: 0BD51FAC:733D 0ED51FAC:A003 06 00000000:00000000 00:00000000 00000000     0        0 5 1 0 20 4 30 10 -1
"""
PROC_TCP6 = """  sl  local_address                         remote_address                        st
   0: 0000000000000000FFFF00000BD51FAC:733D 0000000000000000FFFF000011D51FAC:B000 01 0
"""


def test_established_peers_of_the_rendezvous_port():
    # listening socket, other ports and TIME_WAIT connections do not count
    assert parse_proc_tcp(PROC_TCP, [29501]) == {29501: ["172.31.213.12", "172.31.213.16"]}
    assert parse_proc_tcp(PROC_TCP6, [29501]) == {29501: ["172.31.213.17"]}


def test_the_bundle_goes_into_a_private_directory_only(tmp_path):
    docker, _module = _docker_in_memory({"r0": _container("r0", 0)}, {"r0": ("", "")})
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o777)
    with pytest.raises(LanekitError, match=f"bundle directory \\(bundle_dir\\) {loose} belongs to uid"):
        rs.write_bundle(docker, str(loose), ["r0"], {"r0": _container("r0", 0)}, "MemTotal: 1 kB\n")
    assert os.listdir(loose) == []
    made = tmp_path / "made"
    docker.write_log = lambda name, path: open(path, "w").close()
    files = rs.write_bundle(docker, str(made), ["r0"], {"r0": _container("r0", 0)}, "MemTotal: 1 kB\n")
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700 and len(files) == 3


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_bundle_dir_of_another_user_is_refused(tmp_path):
    docker, _module = _docker_in_memory({}, {})
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 4242, 4242)
    with pytest.raises(LanekitError, match="belongs to uid 4242"):
        rs.write_bundle(docker, str(theirs), [], {}, "")


def test_bundle_files_and_returned_lines_hold_no_secret(tmp_path):
    key, token = "sk-bundle-key-123", "hf_bundleTOKEN456"
    obj = _container("r0", 0)
    obj["Config"]["Env"] = ["PATH=/bin", f"HF_TOKEN={token}", f"SGL_CUSTOM={token}", f"VLLM_API_KEY={key}"]
    obj["Args"] = ["-c", 'exec "$@" --api-key "$LANEKIT_API_KEY"', "x", "--api-key", key]
    log = f"2026-10-30T06:00:01.000000000Z server_args=ServerArgs(api_key='{key}')\n"
    docker, _module = _docker_in_memory({"r0": obj}, {"r0": (log, "")})
    docker.write_log = lambda name, path: open(path, "w").write(log)
    params = dict(PARAMS, containers=["r0"], bundle_dir=str(tmp_path / "b"), api_key=key, secret_values=[token],
                  secret_env_names=["SGL_CUSTOM"])
    result = rs.status(docker, params)
    for path in result["bundle_files"]:
        text = open(path, encoding="utf-8").read()
        assert key not in text and token not in text, path
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    inspect = json.load(open(result["bundle_files"][0], encoding="utf-8"))
    assert "PATH=/bin" in inspect["Config"]["Env"] and "SGL_CUSTOM=********" in inspect["Config"]["Env"]
    assert key not in json.dumps(result)


def test_a_container_names_its_own_secrets_so_an_archive_without_arguments_redacts_them(tmp_path):
    token = "plain-looking-value-77"
    obj = _container("r0", 0)
    obj["Config"]["Labels"]["io.lanekit.secret-env"] = "DB_URL,VLLM_API_KEY"
    obj["Config"]["Env"] = ["PATH=/bin", f"DB_URL={token}", "VLLM_API_KEY=sk-own-key-1"]
    log = f"2026-10-30T06:00:01.000000000Z connecting to {token} with sk-own-key-1\n"
    docker, _module = _docker_in_memory({"r0": obj}, {"r0": (log, "")})
    docker.write_log = lambda name, path: open(path, "w").write(log)
    result = rs.status(docker, dict(PARAMS, containers=["r0"], bundle_dir=str(tmp_path / "b")))
    text = json.dumps(result) + "".join(open(p, encoding="utf-8").read() for p in result["bundle_files"])
    assert token not in text and "sk-own-key-1" not in text and "PATH=/bin" in text


# Issue 38, items 2 and 6: the key goes to the head container's port only, never to a health URL, and the
# watch's streamed probe runs here, on the node, under the same check.
PROC_ROOT = "ansible_collections.lanekit.serving.plugins.module_utils._boot._portowner.PROC"


@pytest.fixture
def api():
    srv = start_recorder()
    yield srv
    stop_recorder(srv)


def _head_on(proc, api, squatter):
    """The head container r0 on a node whose API port (the recorder's) its engine, or a local user, holds."""
    inspect = proc.rank_container(inode=0 if squatter else 9001)
    proc.listen(api.server_address[1], 9001, "0.0.0.0")
    if squatter:
        proc.process(4242, ppid=1, comm="nc", uid=1001, sockets=(9001,))
    head = _container("r0", 0)
    head.update(Id=inspect["Id"], State=dict(head["State"], Pid=inspect["State"]["Pid"]))
    head["Config"]["Labels"]["io.lanekit.role"] = "head"
    return _docker_in_memory({"r0": head}, {"r0": ("", "")})[0]


def test_health_probes_never_carry_the_lane_key(api):
    docker, _module = _docker_in_memory({}, {})
    url = f"http://127.0.0.1:{api.server_address[1]}/health"
    result = rs.status(docker, dict(PARAMS, api_key="sk-rank-key", health_probes=[{"name": "r1", "url": url}]))
    assert result["health"]["r1"]["status"] == 200
    assert api.seen == [("GET", "/health", None)]


@pytest.mark.parametrize("squatter", [True, False])
def test_the_api_probe_sends_the_key_only_to_the_head_containers_port(api, tmp_path, monkeypatch, squatter):
    proc = FakeProc(tmp_path / "proc")
    monkeypatch.setattr(PROC_ROOT, proc.root)
    docker = _head_on(proc, api, squatter)
    port = api.server_address[1]
    probe = {"url": f"http://127.0.0.1:{port}", "model": "m", "chat": True, "timeout": 2, "chat_timeout": 5}
    result = rs.status(docker, dict(PARAMS, containers=["r0"], api_key="sk-rank-key", api_probe=probe))
    keys = [auth for _method, _path, auth in api.seen if auth]
    if squatter:
        assert keys == [] and not result["api"]["model_listed"]
        assert result["api"]["error"].startswith(f"port {port} on this node is held by process 4242 (nc, uid 1001), "
                                                 "not by the rank container r0: the lane's API key was not sent to it.")
    else:
        assert result["api"]["chat_ok"] and keys == ["Bearer sk-rank-key"] * 2
    assert "sk-rank-key" not in json.dumps(result)


@pytest.mark.parametrize("squatter", [True, False])
def test_the_watch_probe_streams_from_the_node_to_the_head_container(api, tmp_path, monkeypatch, squatter):
    proc = FakeProc(tmp_path / "proc")
    monkeypatch.setattr(PROC_ROOT, proc.root)
    docker = _head_on(proc, api, squatter)
    watch = {"url": f"http://127.0.0.1:{api.server_address[1]}", "model": "m", "deadline_s": 5.0, "max_tokens": 4,
             "container": "r0"}
    result = rs.status(docker, dict(PARAMS, api_key="sk-rank-key", watch_probe=watch))
    assert result["containers"] == []  # the probe's container is inspected, not reported
    probe = result["watch_probe"]
    if squatter:
        assert (probe["ok"], probe["key_withheld"]) == (False, True) and api.seen == []
        assert "held by process 4242 (nc, uid 1001), not by the rank container r0" in probe["error"]
    else:
        assert probe["ok"] and probe["tokens"] == 3 and probe["ttft_s"] is not None
        assert api.seen == [("GET", "/metrics", None), ("POST", "/v1/chat/completions", "Bearer sk-rank-key"),
                            ("GET", "/metrics", None)]


def test_the_watch_probe_returns_the_engines_counter_and_its_last_token(api, tmp_path, monkeypatch):
    # Issue 38, item 5: what the watch's counter rule and its stall rule read, from the head to the controller.
    proc = FakeProc(tmp_path / "proc")
    monkeypatch.setattr(PROC_ROOT, proc.root)
    docker = _head_on(proc, api, squatter=False)
    api.metrics = 'vllm:generation_tokens_total{engine="0",model_name="m"} 5120.0\n'
    watch = {"url": f"http://127.0.0.1:{api.server_address[1]}", "model": "m", "deadline_s": 5.0, "max_tokens": 4,
             "container": "r0"}
    probe = rs.status(docker, dict(PARAMS, api_key="sk-rank-key", watch_probe=watch))["watch_probe"]
    assert (probe["engine_tokens_before"], probe["engine_tokens_after"], probe["max_tokens"]) == (5120.0, 5120.0, 4)
    assert probe["ttft_s"] <= probe["last_token_s"] <= probe["total_s"]
    assert [auth for method, _path, auth in api.seen if method == "GET"] == [None, None]
