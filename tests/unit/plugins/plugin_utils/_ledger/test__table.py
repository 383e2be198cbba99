"""Issue 26: the ledger as the bring-up report's table: Boot / When / Event / Result / Cause / What changed."""
from __future__ import annotations

import json

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _record as rec
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _table as table

PLAN = {"lane": "l", "engine": "vllm", "plan_hash": "a" * 64, "ranks": []}


def ledger():
    first = rec.new_record("deploy", "ready", PLAN, None, 1_796_000_000.0, boot_s=754.0)
    second = rec.new_record("deploy", "failed", PLAN, None, 1_796_003_600.0, cause=rec.Cause(
        "kv_budget_refused", "KV budget refused by the engine", "estimated maximum model length is 495296",
        "Raise --gpu-memory-utilization", [0]))
    second.changes = ["ranks 0-7 argv --gpu-memory-utilization: 0.89 -> 0.85"]
    second.changed_keys = ["argv --gpu-memory-utilization"]
    third = rec.new_record("watch", "healed", PLAN, None, 1_796_007_200.0, boot_s=301.0, probe={"ttft_s": 0.2})
    third.changes = []  # the plan of the record before it
    for i, r in enumerate((first, second, third), 1):
        r.boot = i
    return [first, second, third]


def test_three_rows_with_result_cause_and_what_changed():
    lines = table.render(ledger(), "text", "l")
    assert lines[0] == "ledger of lane l: 3 records"
    assert lines[1].split() == ["Boot", "When", "Event", "Result", "Cause", "What", "changed"]
    rows = lines[2:]
    assert rows[0].startswith("1     2026-11-30 00:53:20  deploy  ready in 12m34s")
    assert "first plan in the ledger" in rows[0]
    assert "failed (r0)" in rows[1] and "kv_budget_refused: KV budget refused by the engine" in rows[1]
    assert rows[1].endswith("argv --gpu-memory-utilization: 0.89 -> 0.85")
    assert "healed in 5m01s, first token 0.20 s" in rows[2] and rows[2].endswith("-")


def test_a_long_value_is_cut_so_the_text_row_still_says_what_it_became():
    records = ledger()
    line = "AttributeError: 'FusedMoE' object has no attribute 'g1_scale_c'"
    records[1].changes = [f"ranks 0-7 env STANDIN_FAULT_LINE: {line} -> unset",
                          "ranks 0-7 env STANDIN_FAULT_PHASE: load -> unset"]
    row = table.render(records, "text")[2]
    assert "env STANDIN_FAULT_LINE: AttributeError: 'FusedM… -> unset;" in row, row
    assert line in table.render(records, "md")[3]  # the Markdown keeps the value whole


def test_markdown_carries_the_fix_and_json_the_records():
    md = table.render(ledger(), "md", "l")
    assert md[2] == "| Boot | When | Event | Result | Cause | What changed |"
    assert "— fix: Raise --gpu-memory-utilization" in md[5]
    docs = json.loads("\n".join(table.render(ledger(), "json")))
    assert [d["outcome"] for d in docs] == ["ready", "failed", "healed"]
    with pytest.raises(ValueError, match="ledger_format must be one of text, md, json, got 'csv'"):
        table.render(ledger(), "csv")


def test_the_status_line_names_the_last_record_and_the_timeline():
    line = table.status_line(ledger(), "reports/l/ledger.jsonl", "reports/l/timeline/boot-0002.png")
    assert line == ("ledger reports/l/ledger.jsonl: 3 records, last #3 watch healed in 5m01s, first token 0.20 s "
                    "at 2026-11-30T02:53:20Z; timeline reports/l/timeline/boot-0002.png")
    assert table.status_line([], "x") == ""


def test_a_record_with_figures_of_the_wrong_type_still_renders():
    # Issue 38, item 8: a record built in memory is not type-checked as a read one is; the table shows only numbers.
    odd = rec.LedgerRecord(event="watch", outcome="healed", lane="l", time="2026-11-30T00:00:00Z", epoch=1.0,
                           boot_s="soon", probe={"ttft_s": "fast", "tps": [1]}, bench={"tg_tps": "many"})
    assert table.result_cell(odd) == "healed"
    assert table.render([odd], "text")[1].split()[3:5] == ["watch", "healed"]
