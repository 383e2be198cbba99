# Copyright: lanekit developers
# Apache-2.0
"""Issue 26: lane_ledger appends a deploy, a failed boot, a teardown and a bench run, and prints them as
the table Boot / When / Event / Result / Cause / What changed (text, md, json)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.lanekit.serving.plugins.action import lane_ledger
from ansible_collections.lanekit.serving.plugins.module_utils._boot import _signatures as sigs
from tests.unit.helpers.lane_fakes import action_module
from tests.unit.helpers.plans import plan

KV_LINE = "the estimated maximum model length is 495296"


def _plan(reports_dir, **kwargs):
    built, findings = plan(purpose="plan", **kwargs)
    assert built is not None, findings
    return dict(json.loads(json.dumps(built)), reports_dir=str(reports_dir))


def run(args, check_mode=False):
    return action_module(lane_ledger.ActionModule, dict(args, charts=False), check_mode).run(task_vars={})


def failed_wait():
    match = sigs.collect({0: {"kv_budget_refused": KV_LINE}})[0]
    return {"failed": True, "status": "failed", "culprits": [0], "bundle": "/r/b", "signatures": [match.to_dict()],
            "ranks": [{"rank": 0, "host": "spark-01", "state": "exited", "exit_code": 1, "started_age_s": 50.0,
                       "finished_age_s": 5.0, "phases_age_s": {"loading": 30.0}}], "msg": "Lane failed to boot"}


def test_three_deploys_one_failing_print_three_rows_with_the_right_causes(tmp_path):
    good = _plan(tmp_path)
    tight = _plan(tmp_path, group_overrides={"serve": {"args": {"--max-num-seqs": 64}}})
    ready = {"status": "ready", "boot_s": 120.0, "api": {"ttft_s": 0.4}, "ranks": []}
    first = run({"mode": "append", "event": "deploy", "plan": good, "results": [{"changed": False}, ready],
                 "marks": {"image": "2026-11-30T00:00:00Z", "ready": "2026-11-30T00:01:00Z"}})
    assert not first.get("failed"), first.get("msg")
    second = run({"mode": "append", "event": "deploy", "plan": tight, "results": [failed_wait()],
                  "failed": [failed_wait()], "failed_task": "ready: Wait until the lane serves"})
    third = run({"mode": "append", "event": "deploy", "plan": good, "results": [ready]})
    assert [first["record"]["boot"], second["record"]["boot"], third["record"]["boot"]] == [1, 2, 3]
    assert second["record"]["cause"]["signature"] == "kv_budget_refused"
    assert second["record"]["cause"]["evidence"] == KV_LINE and second["record"]["bundle"] == "/r/b"
    assert second["record"]["changed_keys"] == ["argv --max-num-seqs"]
    assert third["record"]["changes"] == ["ranks 0-7 argv --max-num-seqs: 64 -> 128"]

    shown = run({"mode": "show", "plan": good, "ledger_file": str(tmp_path / "ledger.txt")})
    lines = (tmp_path / "ledger.txt").read_text().splitlines()
    assert lines[0] == f"ledger of lane {good['lane']}: 3 records" and len(lines) == 5
    rows = lines[2:]
    assert " ready in 2m00s, first token 0.40 s " in rows[0] and "first plan in the ledger" in rows[0]
    assert " failed (r0) " in rows[1] and "kv_budget_refused: " in rows[1]
    assert rows[1].endswith("argv --max-num-seqs: 128 -> 64")
    assert " ready in 2m00s, first token 0.40 s " in rows[2] and rows[2].endswith("argv --max-num-seqs: 64 -> 128")
    assert [r["outcome"] for r in shown["records"]] == ["ready", "failed", "ready"]

    md = run({"mode": "show", "plan": good, "ledger_format": "md", "ledger_file": str(tmp_path / "l.md")})
    assert not md.get("failed")
    assert "— fix: " in (tmp_path / "l.md").read_text()
    run({"mode": "show", "plan": good, "ledger_format": "json", "ledger_file": str(tmp_path / "l.json"), "last": 1})
    assert [d["boot"] for d in json.loads((tmp_path / "l.json").read_text())] == [3]


def test_a_teardown_by_lane_name_and_a_bench_run(tmp_path):
    report = tmp_path / "bench" / "report.json"
    report.parent.mkdir()
    report.write_text(json.dumps({"valid": True, "throughput": [{"depth": 0, "concurrency": 1, "tg_tps": 24.8}]}))
    bench = run({"mode": "append", "event": "bench", "plan": _plan(tmp_path), "bench_report": str(report)})
    assert bench["record"]["outcome"] == "valid" and bench["record"]["bench"]["tg_tps"] == 24.8
    down = run({"mode": "append", "event": "teardown", "plan": {"lane": "l"}, "reports_dir": str(tmp_path),
                "outcome": "removed"})
    assert (down["record"]["outcome"], down["record"]["changes"]) == ("removed", [])


def test_check_mode_appends_nothing_and_bad_input_is_one_sentence(tmp_path):
    skipped = run({"mode": "append", "event": "deploy", "plan": _plan(tmp_path)}, check_mode=True)
    assert skipped["skipped"] and not (tmp_path / "ledger.jsonl").exists()
    nowhere = run({"mode": "show"})
    assert nowhere["failed"] and nowhere["msg"].startswith("lane_ledger needs the lane's plan")
    watch = run({"mode": "append", "event": "watch", "plan": _plan(tmp_path)})
    assert watch["failed"] and "lanekit.serving.lane_watch" in watch["msg"]
    empty = run({"mode": "show", "plan": _plan(tmp_path)})
    assert empty["records"] == [] and "ansible-playbook lanekit.serving.deploy_lane" in empty["msg"]


def test_a_record_is_the_runs_log_not_a_change_of_the_lane(tmp_path):
    # The phases that changed the lane report it; the ledger's append never does, so a re-run of a
    # serving lane reports changed=0 and a changed flag changes only the ranks phase's tasks.
    good = _plan(tmp_path)
    booted = run({"mode": "append", "event": "deploy", "plan": good,
                  "results": [{"status": "ready", "boot_s": 60.0, "ranks": []}]})
    rerun = run({"mode": "append", "event": "deploy", "plan": good, "results": [], "serving": True})
    assert booted["record"]["outcome"] == "ready" and booted["changed"] is False
    assert rerun["record"]["outcome"] == "serving" and rerun["changed"] is False


def test_a_deploys_append_redraws_the_history_of_the_whole_ledger(tmp_path):
    from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _charts as charts
    from tests.unit.plugins.plugin_utils._ledger.test__charts import png_text

    python = charts.find_python()
    if not python:
        pytest.skip("no Python with matplotlib (make venv-bench makes one)")
    good = _plan(tmp_path)
    ready = {"status": "ready", "boot_s": 120.0, "api": {"ttft_s": 0.4}, "ranks": []}
    run({"mode": "append", "event": "deploy", "plan": good, "results": [ready]})
    run({"mode": "append", "event": "deploy", "plan": good, "results": [failed_wait()], "failed": [failed_wait()],
         "failed_task": "ready: Wait until the lane serves"})
    third = action_module(lane_ledger.ActionModule, {"mode": "append", "event": "deploy", "plan": good,
                                                     "results": [ready], "charts": True, "python": python},
                          False).run(task_vars={})
    assert third.get("chart_note") == "", third.get("chart_note")
    history = tmp_path / "timeline" / "history.png"
    assert str(history) in third["pngs"]
    # The chart linked from status after a deploy: every deploy of the ledger, not only the one just made.
    assert json.loads(png_text(history.read_bytes())["lanekit-chart"]) == ["1 ready", "2 failed", "3 ready"]


def test_a_poisoned_ledger_still_renders_with_a_warning_per_bad_line(tmp_path):
    # Issue 38, item 8: a head that returned a non-numeric ttft_s (or a hand edit) must not stop every render.
    good = _plan(tmp_path)
    ready = {"status": "ready", "boot_s": 120.0, "api": {"ttft_s": 0.4}, "ranks": []}
    run({"mode": "append", "event": "deploy", "plan": good, "results": [ready]})
    path = tmp_path / "ledger.jsonl"
    first = json.loads(path.read_text())
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(dict(first, boot=2, probe={"ttft_s": "fast"})) + "\n")
        handle.write(json.dumps(dict(first, boot=3, epoch="yesterday", ranks={"0": "r"})) + "\n")
    # A node returning text for ttft_s now is left out before it is recorded.
    poisoned = run({"mode": "append", "event": "deploy", "plan": good,
                    "results": [dict(ready, api={"ttft_s": "fast"})]})
    assert poisoned["record"]["probe"]["ttft_s"] is None and poisoned["record"]["boot"] == 4
    shown = run({"mode": "show", "plan": good, "ledger_file": str(tmp_path / "ledger.txt")})
    assert not shown.get("failed"), shown.get("msg")
    assert [r["boot"] for r in shown["records"]] == [1, 4] and shown["skipped"] == 2
    assert [w.split(" was left out")[0] for w in shown["ledger_warnings"]] == [f"{path} line 2", f"{path} line 3"]
    assert "epoch is 'yesterday' (text), not a number" in shown["ledger_warnings"][1]
    assert " first token 0.40 s " in (tmp_path / "ledger.txt").read_text()


def test_a_ledger_file_that_is_a_directory_is_refused_in_one_sentence(tmp_path):
    good = _plan(tmp_path)
    run({"mode": "append", "event": "deploy", "plan": good, "results": [{"status": "ready", "ranks": []}]})
    refused = run({"mode": "show", "plan": good, "ledger_format": "md", "ledger_file": str(tmp_path)})
    assert refused["failed"]
    assert refused["msg"] == (f"ledger_file {tmp_path} is a directory; give the path of a file, "
                              f"e.g. {tmp_path}/ledger.md.")
    written = run({"mode": "show", "plan": good, "ledger_file": str(tmp_path / "out" / "ledger.txt")})
    assert not written.get("failed") and oct((tmp_path / "out" / "ledger.txt").stat().st_mode & 0o777) == "0o600"
