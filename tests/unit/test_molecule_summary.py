"""The molecule summary that ends a CI log: failures in words, last, with their reasons."""

from __future__ import annotations

from tests.tools.molecule_summary import summary, words

ESC = "\x1b"
LOG = f"""\
[04:00:01] INFO     default ➜ verify: Executing
  {ESC}[2m│{ESC}[0m tests/test_scenario_05_day2.py::test_status_x PASSED [ 50%]
=========================== slowest 25 durations ===========================
256.43s call     tests/test_scenario_13_real_vllm.py::test_real_lane_boots
96.17s setup    tests/test_scenario_07_bench.py::test_bench_writes_a_report
=========================== short test summary info ============================
FAILED tests/test_scenario_11_relay.py::test_nothing_left_in_tmp - AssertionError: ('lksim-spark-01', ['/tmp/x'])
[04:27:46] INFO     default ➜ destroy: Executing
TASK [Remove the node containers] **********************************************
fatal: [localhost]: FAILED! => {{
    "changed": false,
    "msg": "Error response from daemon: removal of container lksim-spark-01 is already in progress"
}}
TASK [An ignored probe] ********************************************************
fatal: [localhost]: FAILED! => {{"msg": "not this one"}}
...ignoring
[04:27:59] ERROR    default ➜ destroy: Executed: Failed
"""


def test_a_test_path_becomes_words_a_log_reader_keeps() -> None:
    assert words("tests/test_scenario_05_day2.py::test_status_x_y") == "scenario 05 day2: status x y"


def test_failures_come_last_as_words_with_their_reason_and_ignored_tasks_are_left_out() -> None:
    lines = summary(LOG)
    failed_at = lines.index("molecule: what failed (2):")
    assert lines[failed_at + 1] == (
        "  failed scenario 11 relay: nothing left in tmp -- AssertionError: ('lksim-spark-01', ['/tmp/x'])"
    )
    assert lines[failed_at + 2].startswith("  task 'Remove the node containers' on localhost: Error response")
    assert len(lines) == failed_at + 3
    assert "  256.43 s call: scenario 13 real vllm: real lane boots" in lines
    assert "[04:27:59] ERROR    default ➜ destroy: Executed: Failed" in lines  # the failed phase, with its time


# Molecule's console boxes the verifier's output and wraps it at its width (here 40): a long word
# is cut where the line is full, a sentence at a space.
WRAPPED = """\
[04:00:01] INFO     default ➜ verify: Executing
  │ TASK [A test fails it on purpose] *
  │ fatal: [spark-01]: FAILED! => {"a": 1}
  │ 459.57s call
  │   check/tests/test_scenario_13_real_vl
  │   lm.py::test_the_real_lane
  │ FAILED
  │   tests/test_scenario_15_ledger.py::te
  │   st_three_deploys - AssertionError:
  │   a traceback reached the user
  │ tests/test_scenario_15_ledger.py:65: A
[04:27:46] ERROR    default ➜ verify: Executed: Failed
"""


def test_lines_the_console_wrapped_are_read_whole_and_the_tests_own_failed_tasks_are_not_failures() -> None:
    lines = summary(WRAPPED)
    assert "  459.57 s call: scenario 13 real vllm: the real lane" in lines, lines
    failed_at = lines.index("molecule: what failed (1):")
    assert lines[failed_at + 1] == (
        "  failed scenario 15 ledger: three deploys -- AssertionError: a traceback reached the user"
    )
