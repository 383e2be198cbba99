"""Issue 26: the timeline PNGs are drawn beside the ledger with a Python that has matplotlib (the bench
virtualenv's), and the rows drawn are the chart data's (_ledger/_charts.py, _draw.py)."""
from __future__ import annotations

import json
import zlib

import pytest

from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _charts as charts
from ansible_collections.lanekit.serving.plugins.plugin_utils._ledger import _record as rec

PLAN = {"lane": "l", "engine": "vllm", "plan_hash": "a" * 64, "ranks": []}


def png_text(data: bytes) -> dict[str, str]:
    """The tEXt/zTXt/iTXt chunks of a PNG."""
    out, pos = {}, 8
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"tEXt":
            key, _sep, value = body.partition(b"\0")
            out[key.decode()] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _sep, rest = body.partition(b"\0")
            out[key.decode()] = zlib.decompress(rest[1:]).decode("latin-1")
        elif kind == b"iTXt":
            key, _sep, rest = body.partition(b"\0")
            flag, rest = rest[0], rest[2:]
            _lang, _sep, rest = rest.partition(b"\0")
            _tkey, _sep, text = rest.partition(b"\0")
            out[key.decode()] = (zlib.decompress(text) if flag else text).decode()
        pos += 12 + length
    return out


def test_a_deploy_and_the_history_are_drawn_beside_the_ledger(tmp_path):
    python = charts.find_python()
    if not python:
        pytest.skip("no Python with matplotlib (make venv-bench makes one)")
    record = rec.new_record("deploy", "failed", PLAN, None, 1_796_000_000.0, phases={"image": 5.0, "ready": 30.0},
                            cause=rec.Cause(signature="kv_budget_refused"))
    record.boot = 3
    record.ranks = [rec.RankBoot(0, "spark-01", "exited", 1, {"loading": 3.0}, 20.0, 25.0, failed=True)]
    written, problem = charts.draw_ledger(str(tmp_path), [record], python)
    assert problem == ""
    assert written == [str(tmp_path / "timeline" / "boot-0003.png"), str(tmp_path / "timeline" / "history.png")]
    assert json.loads(png_text((tmp_path / "timeline" / "boot-0003.png").read_bytes())["lanekit-chart"]) == [
        "deploy", "r0 spark-01"]
    assert json.loads(png_text((tmp_path / "timeline" / "history.png").read_bytes())["lanekit-chart"]) == ["3 failed"]


def test_a_deploys_own_boot_chart_comes_with_the_history_of_the_whole_ledger(tmp_path):
    python = charts.find_python()
    if not python:
        pytest.skip("no Python with matplotlib (make venv-bench makes one)")
    records = [rec.new_record("deploy", outcome, PLAN, None, 1_796_000_000.0 + i, phases={"ready": 10.0 + i})
               for i, outcome in enumerate(("ready", "failed", "ready"), 1)]
    for i, record in enumerate(records, 1):
        record.boot = i
    # What a deploy's ledger append does: redraw its own boot chart, and the history over every record.
    written, problem = charts.draw_ledger(str(tmp_path), records, python, only_missing=False, boots=records[-1:])
    assert problem == ""
    assert written == [str(tmp_path / "timeline" / "boot-0003.png"), str(tmp_path / "timeline" / "history.png")]
    assert json.loads(png_text((tmp_path / "timeline" / "history.png").read_bytes())["lanekit-chart"]) == [
        "1 ready", "2 failed", "3 ready"]


def test_without_matplotlib_the_charts_are_skipped_with_a_sentence(tmp_path):
    record = rec.new_record("deploy", "ready", PLAN, None, 1.0)
    assert charts.draw_ledger(str(tmp_path), [record], str(tmp_path / "no-python")) == ([], charts.NO_PYTHON)
    assert charts.draw_ledger(str(tmp_path), []) == ([], "")
