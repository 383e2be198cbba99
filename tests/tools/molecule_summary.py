"""Summarise a molecule log for a reader who keeps only its last lines.

CI keeps about the last twenty lines of a run, and its reader drops words that look like test
paths. So this prints, in order: molecule's phases with their wall-clock times, the slowest tests,
and last what failed, each failed test as plain words ("scenario 05 day2: status with one rank
killed ...") with the first line of its assertion, and each failed task with its message.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_BOX = re.compile(r"^ *│ ?")
_PHASE = re.compile(r"^\[[0-9:]{8}\] .*➜ [a-z]+: (Executing|Executed)")
_DURATION = re.compile(r"^([0-9.]+)s (call|setup|teardown) +(\S+)")
_FAILED_TEST = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - (.*))?$")
_TEST_ID = re.compile(r"(?:.*/)?test_([A-Za-z0-9_]+)\.py::(?:test_)?([A-Za-z0-9_\[\]-]+)")
_FATAL = re.compile(r"^(fatal|failed): \[([^\]]+)\]")
_TASK = re.compile(r"^TASK \[(.*)\]")
_MSG = re.compile(r'"msg": "((?:[^"\\]|\\.)*)"')


_WRAPPED_START = re.compile(r"^(FAILED|ERROR)$|^(FAILED|ERROR) |^[0-9.]+s (call|setup|teardown)")


def plain_lines(text: str) -> list[str]:
    """The log without colours or molecule's box, with the lines molecule's console wrapped joined
    again. The console wraps at its width: a line that filled the width was cut inside a word (joined
    as is), a shorter one at a space (joined with one); only the lines a summary reads are joined,
    the following lines of a wrapped one being indented by two spaces."""
    raw = [_ANSI.sub("", line) for line in text.splitlines()]
    width = max((len(line) for line in raw if _BOX.match(line)), default=0)
    lines: list[str] = []
    joining = False
    previous_full = False
    for line in raw:
        boxed = bool(_BOX.match(line))
        plain = _BOX.sub("", line)
        if joining and boxed and plain.startswith("  ") and plain.strip():
            lines[-1] += ("" if previous_full else " ") + plain.strip()
            previous_full = len(line.rstrip()) >= width
            continue
        lines.append(plain)
        joining = boxed and bool(_WRAPPED_START.match(plain))
        previous_full = joining and len(line.rstrip()) >= width
    return lines


def words(test_id: str) -> str:
    """tests/test_scenario_05_day2.py::test_status_x -> 'scenario 05 day2: status x'."""
    match = _TEST_ID.match(test_id)
    if not match:
        return test_id.replace("_", " ")
    return f"{match.group(1).replace('_', ' ')}: {match.group(2).replace('_', ' ')}"


def failed_tasks(lines: list[str]) -> list[str]:
    """Each failed task: its name, the host, and the message (from the same or the next lines)."""
    found = []
    task = ""
    for index, line in enumerate(lines):
        task_match = _TASK.match(line)
        if task_match:
            task = task_match.group(1)
            continue
        fatal = _FATAL.match(line)
        if not fatal:
            continue
        block = []
        for candidate in lines[index : index + 200]:
            if block and (candidate.startswith(("TASK [", "PLAY ", "RUNNING HANDLER")) or _FATAL.match(candidate)):
                break
            block.append(candidate)
        if any("...ignoring" in candidate for candidate in block):
            continue
        message = ""
        for candidate in block:
            msg = _MSG.search(candidate)
            if msg:
                message = msg.group(1).encode().decode("unicode_escape", errors="replace")
                break
        found.append(f"task '{task}' on {fatal.group(2)}: {' '.join(message.split())[:240]}")
    return found


def summary(text: str) -> list[str]:
    lines = plain_lines(text)
    out = ["molecule: its phases (wall clock):"]
    out += [line for line in lines if _PHASE.match(line) and "Testinfra" not in line]
    slowest = [m for m in map(_DURATION.match, lines) if m][:12]
    out.append("molecule: the slowest verify tests:")
    out += [f"  {m.group(1)} s {m.group(2)}: {words(m.group(3))}" for m in slowest]
    failures = []
    for line in lines:
        failed = _FAILED_TEST.match(line)
        if failed:
            reason = " ".join((failed.group(3) or "").split())[:200]
            failures.append(f"{failed.group(1).lower()} {words(failed.group(2))} -- {reason}")
    # The tests' own playbook runs fail tasks on purpose: only the tasks of molecule's phases count.
    in_verify = False
    phase_lines = []
    for line in lines:
        if _PHASE.match(line):
            in_verify = "verify:" in line and "Executing" in line
        elif not in_verify:
            phase_lines.append(line)
    failures += failed_tasks(phase_lines)
    if failures:
        out.append(f"molecule: what failed ({len(failures)}):")
        out += [f"  {failure}" for failure in failures[-15:]]
    return out


def main(argv: list[str]) -> int:
    text = Path(argv[1]).read_text(encoding="utf-8", errors="replace")
    print("\n".join(summary(text)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
