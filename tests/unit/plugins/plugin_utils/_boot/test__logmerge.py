# Copyright: lanekit developers
# Apache-2.0
"""Logs of every rank in one stream: merged in time order, filtered, noise folded."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._boot._ranklog import parse_docker_time
from ansible_collections.lanekit.serving.plugins.plugin_utils._boot import _logmerge as lm

T0 = "2026-11-30T17:09:0"


def stamped(second, text):
    return f"{T0}{second}.000000000Z {text}"


def test_ranks_are_merged_in_time_order_with_rank_and_host_on_every_line():
    streams = {
        (0, "spark-01"): [stamped(1, "head starts"), stamped(4, "head up")],
        (1, "spark-02"): [stamped(2, "worker joins"), stamped(3, "worker loads")],
    }
    merged = lm.merge(streams)
    assert [line.text for line in merged] == ["head starts", "worker joins", "worker loads", "head up"]
    assert merged[1].render() == "2026-11-30T17:09:02.000Z r1 spark-02 | worker joins"


def test_ranks_lines_since_and_grep_select_what_is_shown():
    streams = {(r, f"spark-0{r + 1}"): [stamped(s, f"r{r} line {s} {'ERROR' if s == 5 else 'ok'}") for s in range(1, 8)]
               for r in range(4)}
    picked = lm.merge(streams, ranks=lm.parse_ranks("0,3"), lines=2, folding=False)
    assert [(line.rank, line.text) for line in picked] == [(0, "r0 line 6 ok"), (3, "r3 line 6 ok"),
                                                           (0, "r0 line 7 ok"), (3, "r3 line 7 ok")]
    now = parse_docker_time(f"{T0}7.000000000Z")
    recent = lm.merge(streams, since_s=lm.parse_since("2s"), now=now, folding=False)
    assert {line.text.split()[2] for line in recent} == {"5", "6", "7"}
    errors = lm.merge(streams, grep=lm.compile_grep("ERROR"))
    assert [line.rank for line in errors] == [0, 1, 2, 3] and all("line 5" in line.text for line in errors)


def test_progress_bars_fold_into_their_last_update_with_a_count():
    progress = "Loading safetensors checkpoint shards: {p}% Completed | {d}/64 [00:10<00:10, 1.2it/s]"
    raw = [stamped(1, "start")] + [stamped(2, progress.format(p=p, d=d)) for p, d in ((25, 16), (50, 32), (100, 64))]
    raw.append(stamped(3, "loaded"))
    folded = lm.merge({(0, "h"): raw})
    assert [line.text for line in folded] == ["start", progress.format(p=100, d=64), "loaded"]
    assert folded[1].note == "2 earlier progress updates folded"
    assert "[2 earlier progress updates folded]" in folded[1].render()


def test_a_repeated_warning_keeps_its_first_occurrence_with_a_count_unless_folding_is_off():
    raw = [stamped(1, "WARNING 11-30 17:09:01 waiting for 7 ranks"), stamped(2, "other"),
           stamped(3, "WARNING 11-30 17:09:03 waiting for 6 ranks"), stamped(4, "WARNING 11-30 17:09:04 waiting for 5 ranks")]
    folded = lm.merge({(2, "h"): raw})
    assert [line.text for line in folded] == ["WARNING 11-30 17:09:01 waiting for 7 ranks", "other"]
    assert folded[0].note == "repeated 2 more times"
    assert len(lm.merge({(2, "h"): raw}, folding=False)) == 4


def test_carriage_return_redraws_show_the_last_drawing():
    assert lm.rank_lines(0, "h", [stamped(1, "10%\r20%\r30%")])[0].text == "30%"


DURATIONS = [("90", 90.0), ("30s", 30.0), ("10m", 600.0), ("2h", 7200.0), (None, None), ("", None)]


@pytest.mark.parametrize(("value", "seconds"), DURATIONS)
def test_since_reads_a_duration(value, seconds):
    assert lm.parse_since(value) == seconds


def test_bad_options_are_refused_in_one_sentence():
    with pytest.raises(lm.LogOptionError, match=r"logs_since='ten' is not a duration; use for example logs_since=90s"):
        lm.parse_since("ten")
    with pytest.raises(lm.LogOptionError, match=r"logs_ranks='a,b' is not a list of node ranks"):
        lm.parse_ranks("a,b")
    with pytest.raises(lm.LogOptionError, match=r"logs_grep='\(' is not a regular expression"):
        lm.compile_grep("(")


def test_ranks_read_ranges_lists_and_names():
    assert lm.parse_ranks("0-2,5") == [0, 1, 2, 5]
    assert lm.parse_ranks([3, 0]) == [0, 3]
    assert lm.parse_ranks("r4") == [4]
    assert lm.parse_ranks(None) is None


def test_archived_rank_folders_name_rank_and_host():
    assert lm.archived_rank("r3-spark-04") == (3, "spark-04")
    assert lm.archived_rank("hosts") is None
