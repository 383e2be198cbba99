"""lane_probe: a re-run's one probe per node says "serving" only when every phase would find nothing to
do on the node (image pin, weights, ranks on this plan and settled, API, secrets file), and otherwise
names each reason."""
from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _lane_probe as verdicts
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import DockerCLI, image_pin
from ansible_collections.lanekit.serving.plugins.module_utils._secrets import (
    Secrets,
    env_digest,
    env_file_text,
    parse_env_file,
)
from ansible_collections.lanekit.serving.plugins.modules import lane_probe as lane_probe_module
from ansible_collections.lanekit.serving.plugins.modules.lane_probe import LaneProbe
from tests.unit.helpers.docker import FakeEngine, FakeModule
from tests.unit.helpers.procfs import FakeProc, start_recorder, stop_recorder

HASH = "c" * 64
REF = "lanekit/thin:cccccccccccc"
LAYER = "sha256:" + "11" * 32


def stamp(seconds_ago: float) -> str:
    moment = datetime.fromtimestamp(time.time() - seconds_ago, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"


def container(name, image_id, spec="s" * 64, running=True, up_s=600.0, restarting=False):
    return {"Name": "/" + name, "Image": image_id,
            "Config": {"Labels": {"io.lanekit.spec-hash": spec}},
            "State": {"Running": running, "Restarting": restarting, "Paused": False,
                      "Status": "running" if running else "exited", "StartedAt": stamp(up_s)}}


class Node(FakeEngine):
    """The fake engine with containers: `docker inspect --type container NAME...` as docker answers it."""

    def __init__(self):
        super().__init__()
        self.containers = {}

    def __call__(self, argv):
        args = argv[1:]
        if args[:3] == ["inspect", "--type", "container"]:
            found = [self.containers[n] for n in args[3:] if n in self.containers]
            missing = [n for n in args[3:] if n not in self.containers]
            return (1 if missing else 0), json.dumps(found), (f"Error: No such container: {missing[0]}" if missing else "")
        return super().__call__(argv)


def weights_dir(tmp_path, revision=None):
    path = tmp_path / "w"
    path.mkdir()
    (path / "model.safetensors").write_bytes(b"x" * 10)
    (path / "MANIFEST.json").write_text(json.dumps({"revision": revision, "model_id": "m",
                                                    "files": [{"path": "model.safetensors", "size": 10}]}))
    return str(path)


def probe(node, **params):
    base = dict(lane="demo", ref=REF, content_hash=HASH, rootfs=None, config=None, ranks=[], stability_s=5.0,
                weights=None, api_probe=None, api_key=None, secrets=None, secrets_env_file=None)
    base.update(params)
    module = FakeModule(base, check_mode=True, responder=node)
    return LaneProbe(module, DockerCLI(module)).run()


@pytest.fixture()
def node():
    engine = Node()
    image = engine.add(REF, labels={"io.lanekit.content-hash": HASH}, layers=(LAYER,))
    engine.containers["lanekit-demo-r1"] = container("lanekit-demo-r1", image["Id"])
    return engine


RANKS = [{"container_name": "lanekit-demo-r1", "spec_hash": "s" * 64, "node_rank": 1, "role": "worker"}]


def test_a_node_serving_its_plan_is_serving_and_changes_nothing(node, tmp_path):
    result = probe(node, ranks=RANKS, weights={"path": weights_dir(tmp_path), "layout": "any"})
    assert result == dict(result, serving=True, pending=[], changed=False)
    assert result["ranks"][0]["running"] and result["ranks"][0]["up_s"] >= 599


def test_each_phase_that_would_act_is_a_reason(node, tmp_path):
    image_id = node.images[REF]["Id"]
    node.containers["lanekit-demo-r1"] = container("lanekit-demo-r1", image_id, spec="t" * 64)
    result = probe(node, ranks=RANKS + [{"container_name": "lanekit-demo-r2", "spec_hash": "u" * 64, "node_rank": 2}],
                   weights={"path": str(tmp_path / "nowhere")})
    assert not result["serving"]
    joined = " | ".join(result["pending"])
    assert "rank 1 (lanekit-demo-r1) runs spec tttttttttttt, the plan wants ssssssssssss" in joined
    assert "rank 2 (lanekit-demo-r2) does not exist" in joined
    assert "weights: The weights directory" in joined


def test_the_reasons_are_grouped_by_the_phase_that_would_act_on_them(node, tmp_path):
    # Issue 28: a stopped rank is the ranks phase's; the image (proven with the lock's digests) and the
    # weights are settled on this node.
    image_id = node.images[REF]["Id"]
    node.containers["lanekit-demo-r1"] = container("lanekit-demo-r1", image_id, running=False)
    pin = image_pin(node.images[REF])
    result = probe(node, ranks=RANKS, weights={"path": weights_dir(tmp_path), "layout": "any"},
                   rootfs=pin["rootfs"], config=pin["config"])
    assert result["pending_phases"] == {"image": [], "weights": [], "ranks": ["rank 1 (lanekit-demo-r1) is exited"],
                                        "ready": []}
    assert result["pending"] == ["rank 1 (lanekit-demo-r1) is exited"]


def test_the_image_phase_is_proven_only_with_the_locks_digests(node):
    # Without them the image phase would still record the lock: the probe cannot call it settled.
    assert "image" not in probe(node)["pending_phases"]
    other = probe(node, rootfs="sha256:" + "99" * 32, config=image_pin(node.images[REF])["config"])
    assert len(other["pending_phases"]["image"]) == 1 and "is not the pinned one" in other["pending_phases"]["image"][0]
    assert "weights" not in other["pending_phases"]  # no weights path given: nothing was proven


def test_the_image_must_carry_the_pin_and_the_ranks_must_run_it(node):
    assert "is not on this node" in probe(node, ref="lanekit/thin:other", ranks=[])["pending"][0]
    wrong_layers = probe(node, rootfs="sha256:" + "99" * 32)["pending"]
    assert len(wrong_layers) == 1 and "is not the pinned one" in wrong_layers[0]
    node.containers["lanekit-demo-r1"]["Image"] = "sha256:" + "ab" * 32
    assert probe(node, ranks=RANKS)["pending"] == ["rank 1 (lanekit-demo-r1) runs another image than the plan's"]


def test_a_rank_younger_than_the_stability_window_or_restarting_is_not_settled(node):
    image_id = node.images[REF]["Id"]
    node.containers["lanekit-demo-r1"] = container("lanekit-demo-r1", image_id, up_s=2)
    assert "less than the stability window of 5 s" in probe(node, ranks=RANKS)["pending"][0]
    node.containers["lanekit-demo-r1"] = container("lanekit-demo-r1", image_id, running=False)
    assert probe(node, ranks=RANKS)["pending"] == ["rank 1 (lanekit-demo-r1) is exited"]
    node.containers["lanekit-demo-r1"] = container("lanekit-demo-r1", image_id, restarting=True)
    assert probe(node, ranks=RANKS)["pending"] == ["rank 1 (lanekit-demo-r1) is restarting"]


def test_weights_of_another_revision_or_a_short_file_are_reasons(node, tmp_path):
    path = weights_dir(tmp_path, revision="a" * 40)
    assert probe(node, weights={"path": path, "revision": "a" * 40})["serving"]
    other = probe(node, weights={"path": path, "revision": "b" * 40})["pending"]
    assert len(other) == 1 and "the manifest is for revision aaaa" in other[0]
    (tmp_path / "w" / "model.safetensors").write_bytes(b"x" * 9)
    assert "wrong size" in probe(node, weights={"path": path, "revision": "a" * 40})["pending"][0]


def test_the_nodes_secrets_file_hash_matches_the_plans_hash():
    """The node computes from the file the ranks role wrote what the plan computed from the values."""
    secrets = Secrets(api_key="k3y=with=equals", env={"HF_TOKEN": "hf_abc"})
    written = env_file_text(secrets.file_env("VLLM_API_KEY"))
    assert env_digest("demo", parse_env_file(written)) == secrets.digest("demo", "VLLM_API_KEY")
    assert env_digest("other", parse_env_file(written)) != secrets.digest("demo", "VLLM_API_KEY")


def test_a_secrets_file_that_is_missing_stale_or_left_over_is_a_reason(node, tmp_path):
    secrets = Secrets(api_key="key", env={})
    env_file = tmp_path / "demo.env"
    record = {"env_file": str(env_file), "hash": secrets.digest("demo", "VLLM_API_KEY")}
    assert "is missing" in probe(node, secrets=record)["pending"][0]
    env_file.write_text(env_file_text(secrets.file_env("VLLM_API_KEY")))
    assert probe(node, secrets=record)["serving"]
    env_file.write_text(env_file_text({"VLLM_API_KEY": "rotated"}))
    assert "holds other values" in probe(node, secrets=record)["pending"][0]
    assert "is left from a lane with secrets" in probe(node, secrets_env_file=str(env_file))["pending"][0]
    env_file.unlink()
    assert probe(node, secrets_env_file=str(env_file))["serving"]


def test_the_api_rung_and_other_ranks_health_are_reasons(node):
    assert verdicts.api_pending({"url": "http://h:8000", "model_listed": True, "chat_ok": True}, chat=True) == []
    missed = verdicts.api_pending({"url": "http://h:8000", "model_listed": True, "chat_ok": False}, chat=True)
    assert missed == ["the API at http://h:8000 does not serve yet (no first token)"]
    refused = verdicts.api_pending({"url": "http://h:8000", "accepts": False, "error": "refused"}, chat=False)
    assert "(refused)" in refused[0]
    # A data-parallel engine on this node whose /health does not answer (nothing listens on port 9).
    ranks = [dict(RANKS[0], health_port=9)]
    pending = probe(node, ranks=ranks)["pending"]
    assert len(pending) == 1 and pending[0].startswith("lanekit-demo-r1 /health answers")


def test_the_api_is_climbed_only_on_the_node_of_a_rank_that_answers_it(node, monkeypatch):
    climbed = []

    def fake_probe(spec, key_check=None):
        climbed.append(spec["url"])
        return {"url": spec["url"], "accepts": False, "error": "refused"}

    monkeypatch.setattr(lane_probe_module, "probe_api", fake_probe)
    api = {"url": "http://h:8000", "model": "m", "chat": False, "chat_timeout": 5}
    worker = probe(node, ranks=RANKS, api_probe=api)
    assert climbed == [] and "api" not in worker and worker["serving"]
    for role in ("head", "router"):
        head = probe(node, ranks=[dict(RANKS[0], role=role)], api_probe=api)
        assert head["api"]["error"] == "refused" and not head["serving"]
    assert climbed == ["http://h:8000", "http://h:8000"]


# Issue 38, item 2: the re-run probe sends the key to the head container's port only, never to /health.
@pytest.fixture
def api():
    srv = start_recorder()
    yield srv
    stop_recorder(srv)


@pytest.mark.parametrize("squatter", [True, False])
def test_the_key_goes_only_to_the_port_the_head_container_holds(node, api, tmp_path, monkeypatch, squatter):
    proc = FakeProc(tmp_path / "proc")
    monkeypatch.setattr("ansible_collections.lanekit.serving.plugins.module_utils._boot._portowner.PROC", proc.root)
    port = api.server_address[1]
    inspect = proc.rank_container(inode=0 if squatter else 9001)
    proc.listen(port, 9001, "127.0.0.1")
    if squatter:
        proc.process(4242, ppid=1, comm="nc", uid=1001, sockets=(9001,))
    image_id = node.images[REF]["Id"]
    head = container("lanekit-demo-r0", image_id)
    head["Id"] = inspect["Id"]
    head["State"]["Pid"] = inspect["State"]["Pid"]
    node.containers["lanekit-demo-r0"] = head
    ranks = [{"container_name": "lanekit-demo-r0", "spec_hash": "s" * 64, "node_rank": 0, "role": "head"},
             dict(RANKS[0], health_port=port)]
    api_probe = {"url": f"http://127.0.0.1:{port}", "model": "m", "chat": True, "chat_timeout": 5}
    result = probe(node, ranks=ranks, api_probe=api_probe, api_key="sk-rerun-key")
    keys = [auth for _method, _path, auth in api.seen if auth]
    assert [auth for _method, path, auth in api.seen if path == "/health"] == [None, None]  # head's and worker's
    if squatter:
        assert keys == [] and not result["serving"]
        assert f"port {port} on this node is held by process 4242 (nc, uid 1001)" in result["api"]["error"]
        assert any("not by the rank container lanekit-demo-r0" in reason for reason in result["pending"])
    else:
        assert keys == ["Bearer sk-rerun-key"] * 2 and result["serving"], result["pending"]
