"""Issue 26: the ledger's appends survive a killed run; a torn last line is not a record (_ledger/_store.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _record as rec
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _store as store

PLAN = {"lane": "l", "engine": "vllm", "plan_hash": "a" * 64, "ranks": [], "reports_dir": "unused"}


def record(outcome="ready", now=1_796_000_000.0, plan=None):
    return rec.new_record("deploy", outcome, plan or PLAN, None, now)


def test_appends_are_numbered_lines_and_the_plan_is_kept_for_the_next_diff(tmp_path):
    first = store.append(str(tmp_path), record(), PLAN)
    second = store.append(str(tmp_path), record("failed"), dict(PLAN, plan_hash="b" * 64))
    assert (first.boot, second.boot) == (1, 2)
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert [json.loads(line)["outcome"] for line in lines] == ["ready", "failed"]
    assert store.previous_plan(str(tmp_path))["plan_hash"] == "b" * 64
    assert oct(os.stat(tmp_path / "ledger.jsonl").st_mode & 0o777) == "0o600"
    records, skipped = store.read(str(tmp_path))
    assert [r.boot for r in records] == [1, 2] and skipped == 0


def test_a_torn_last_line_is_ignored_and_the_next_append_starts_a_line_of_its_own(tmp_path):
    store.append(str(tmp_path), record(), PLAN)
    whole = json.dumps(record("failed").to_dict())
    with open(tmp_path / "ledger.jsonl", "a", encoding="utf-8") as handle:
        handle.write(whole[: len(whole) // 2])  # a run killed inside its write
    records, skipped = store.read(str(tmp_path))
    assert [r.outcome for r in records] == ["ready"] and skipped == 1
    again = store.append(str(tmp_path), record("serving"), PLAN)
    assert again.boot == 2
    records, skipped = store.read(str(tmp_path))
    assert [r.outcome for r in records] == ["ready", "serving"] and skipped == 1


def test_a_last_line_that_parses_but_lacks_its_newline_is_torn_too():
    whole = json.dumps({"outcome": "ready"}).encode()
    assert store.parse(whole + b"\n" + whole) == ([{"outcome": "ready"}], 1)
    assert store.parse(b"") == ([], 0)


def test_a_killed_appender_leaves_whole_lines_only(tmp_path):
    # Many appenders at once, one of them killed mid-run: every line that reads is a whole record.
    script = textwrap.dedent(f"""
        import sys
        from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _record as rec, _store as store
        for i in range(100):
            store.append({str(tmp_path)!r}, rec.new_record("deploy", "ready", {PLAN!r}, None, 1.0 + i, note="x" * 2000))
    """)
    env = dict(os.environ, PYTHONPATH=sys.modules["tests.conftest"].COLLECTIONS)
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env) for _unused in range(3)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(store.parse((tmp_path / "ledger.jsonl").read_bytes()
                                                          if (tmp_path / "ledger.jsonl").exists() else b"")[0]) < 20:
        time.sleep(0.01)
    procs[0].send_signal(signal.SIGKILL)
    for proc in procs[1:]:
        assert proc.wait(120) == 0
    procs[0].wait(10)
    data = (tmp_path / "ledger.jsonl").read_bytes()
    docs, skipped = store.parse(data)
    assert len(docs) >= 200 and skipped <= 1
    assert all(d["note"] == "x" * 2000 for d in docs)


def test_an_absent_ledger_is_empty(tmp_path):
    assert store.read(str(tmp_path / "nothing")) == ([], 0)
    assert store.previous_plan(str(tmp_path)) is None


def test_a_bad_record_is_left_out_with_a_warning_naming_the_file_and_line(tmp_path):
    # Issue 38, item 8: one poisoned line (a head's non-numeric ttft_s, an epoch in words, a list where a
    # mapping belongs, a line that is not JSON) must not stop every later read.
    good = record().to_dict()
    lines = [good, dict(good, epoch="yesterday"), "not json {", [1, 2], dict(good, probe={"ttft_s": "fast"}),
             dict(good, images=["a"]), dict(good, outcome="failed")]
    path = tmp_path / "ledger.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    records, warnings = store.load(str(tmp_path))
    assert [r.outcome for r in records] == ["ready", "failed"]
    assert [w.split(" was left out")[0] for w in warnings] == [f"{path} line {n}" for n in (2, 3, 4, 5, 6)]
    assert "epoch is 'yesterday' (text), not a number" in warnings[0]
    assert "not a line of JSON" in warnings[1] and "probe.ttft_s is 'fast' (text), not a number" in warnings[3]
    assert all("Correct or delete that line" in w for w in warnings)
    assert store.read(str(tmp_path)) == (records, 5)
    # The next record is numbered after every line that holds a number, a skipped one too.
    (tmp_path / "ledger.jsonl").write_text(json.dumps(dict(good, boot=1)) + "\n"
                                           + json.dumps(dict(good, boot=7, epoch="yesterday")) + "\n")
    assert store.append(str(tmp_path), record()).boot == 8
