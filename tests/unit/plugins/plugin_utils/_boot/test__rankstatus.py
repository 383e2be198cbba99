# Copyright: lanekit developers
# Apache-2.0
"""One rank's status at one poll: built from docker's state and the log, exchanged as JSON."""
from __future__ import annotations

import json

from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _rankstatus as rankstatus
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._rankstatus import RankStatus
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot._report import rank_label
from tests.unit.helpers.ranklogs import fixture_lines, lines_until, make_status


def test_rank_status_states():
    missing = rankstatus.build({"node_rank": 2, "host": "spark-03"}, None, None, 0.0)
    assert missing.state == "missing" and missing.phase == "missing"
    exited = make_status(3, fixture_lines("sglang-g1-scale-c.log"), engine="sglang", state="exited", exit_code=1)
    assert exited.state == "exited" and exited.exit_code == 1
    assert exited.uptime_s is None
    assert rank_label(exited) == "EXITED(1)"
    running = make_status(0, lines_until("vllm-head.log", "16/64"))
    assert running.shards == (16, 64)
    assert rank_label(running) == "loading 16/64 (25%)"
    assert running.uptime_s > 600


def test_docker_error_is_scanned():
    status = rankstatus.build(
        {"node_rank": 1, "host": "spark-02"},
        {"State": {"Status": "created", "Error": "exec: stat /usr/local/bin/vllm: no such file or directory"}},
        None, 0.0)
    assert "image_not_unpacked" in status.signatures


def test_a_silent_node_gives_an_unknown_state_with_the_reason():
    status = rankstatus.build({"node_rank": 4, "host": "spark-05"}, None, None, 0.0,
                              gather_error="cannot reach spark-05: timed out")
    assert (status.state, status.phase) == ("unknown", "started")
    assert status.gather_error == "cannot reach spark-05: timed out"


def test_the_status_carries_the_plan_entry_of_its_rank():
    spec = {"node_rank": 3, "host": "spark-04", "role": "worker", "container_name": "lk-r3",
            "fabric_ip": "10.10.10.4", "spec_hash": "abc123", "health_port": 30000, "image": "img:1"}
    status = rankstatus.build(spec, None, None, 0.0)
    assert (status.rank, status.host, status.role, status.container) == (3, "spark-04", "worker", "lk-r3")
    assert (status.fabric_ip, status.planned_spec_hash) == ("10.10.10.4", "abc123")


def test_a_status_survives_the_json_trip_between_workers():
    status = make_status(0, lines_until("vllm-head.log", "30/67"),
                         probes={"api": {"accepts": True, "health_status": 503}})
    status.mem_free_kb = 1600000
    assert status.shards == (64, 64) and status.capture == (30, 67) and status.events_age_s
    data = json.loads(json.dumps(status.to_dict()))
    assert data["shards"] == [64, 64] and data["probes"]["api"]["health_status"] == 503
    back = RankStatus.from_dict(data)
    assert back == status
    assert isinstance(back.shards, tuple) and isinstance(back.capture, tuple)


def test_a_status_from_a_newer_worker_ignores_keys_it_does_not_know():
    data = dict(make_status(1, []).to_dict(), some_future_field=1, rank="1")
    back = RankStatus.from_dict(data)
    assert back.rank == 1 and not hasattr(back, "some_future_field")
