# Copyright: lanekit developers
# Apache-2.0
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""A rank's exit as docker reports it at the moment it happens: ``docker events``, read on the node.

One job: watch this node's rank containers for an exit between two polls of a boot wait, so the
wait names a rank that exits within a second of the exit, whatever its poll interval (issue #28
part 3). ``rank_status`` runs the watch before it reads the status: ``docker events`` with
``--since`` (the previous watch's end, so an exit between two module runs is replayed, never
lost) and ``--until`` (the poll's deadline, so docker itself ends the stream), filtered to the
named containers' ``die`` and ``oom`` events; the first ``die`` ends the watch at once.

The argv and the parsing are pure; :func:`watch` takes the lines of any stream, and
:func:`run_watch` runs the stream through the modules' docker CLI wrapper (argv, no shell).
"""
from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

EXIT_ACTIONS = ("die", "oom")


@dataclass
class ExitEvent:
    """One container event: ``die`` (the process ended; ``exit_code`` set) or ``oom``."""

    container: str
    action: str
    time_ns: int
    exit_code: int | None = None

    @property
    def time(self) -> float:
        return self.time_ns / 1e9

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def events_argv(containers: Sequence[str], since: str, until: str) -> list[str]:
    """``docker events`` arguments (after the binary) for the exits of ``containers`` between two
    node times (unix seconds, fractions allowed). Filters of one key are OR'ed, keys AND'ed."""
    # flag=value: a value can never be read as a flag of its own
    argv = ["events", "--format={{json .}}", f"--since={since}", f"--until={until}", "--filter=type=container"]
    argv += [f"--filter=event={action}" for action in EXIT_ACTIONS]
    argv += [f"--filter=container={name}" for name in containers]
    return argv


def parse_event(line: str, containers: Iterable[str] = ()) -> ExitEvent | None:
    """One line of ``docker events --format '{{json .}}'`` as an ExitEvent; None for anything else
    (another action or container, a blank or broken line)."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    action = obj.get("Action") or obj.get("status") or ""
    # docker 20.10 reports "exec_die", "health_status: healthy"...: only the container's own exit counts
    if action not in EXIT_ACTIONS or (obj.get("Type") or "container") != "container":
        return None
    attrs = (obj.get("Actor") or {}).get("Attributes") or {}
    name = str(attrs.get("name") or "").lstrip("/")
    wanted = set(containers)
    if not name or (wanted and name not in wanted):
        return None
    time_ns = obj.get("timeNano")
    if not isinstance(time_ns, int):
        time_ns = int(float(obj.get("time") or 0) * 1e9)
    code = attrs.get("exitCode")
    try:
        exit_code = int(code) if code not in (None, "") else None
    except ValueError:
        exit_code = None
    return ExitEvent(name, action, time_ns, exit_code)


def watch(lines: Iterable[str], containers: Sequence[str]) -> list[ExitEvent]:
    """The exit events of ``lines`` up to and including the first ``die``: the watch ends there
    (an ``oom`` comes just before its container's ``die``, so it is kept with it)."""
    seen: list[ExitEvent] = []
    for line in lines:
        event = parse_event(line, containers)
        if event is None:
            continue
        seen.append(event)
        if event.action == "die":
            break
    return seen


def run_watch(docker: Any, containers: Sequence[str], wait_s: float, since: str | None,
              clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Watch ``containers`` for up to ``wait_s`` seconds (``docker`` is the modules' DockerCLI).

    Returns ``events`` (their dicts), ``watched_s``, ``error`` (docker's words when the stream
    could not be had: the watch then sleeps out its time, so the poll keeps its pace) and
    ``next_since``, where the next watch starts: this one's end, or just after the exit that ended
    it, so nothing is missed or seen twice between two runs of the module.
    """
    if since is not None:
        try:
            float(since)
        except ValueError:
            raise LanekitError(f"rank_status: exit_watch_since must be a node time in epoch seconds (the previous "
                               f"call's exit_watch.next_since), not {since!r}.") from None
    start = clock()
    out: dict[str, Any] = {"events": [], "watched_s": 0.0, "error": "", "next_since": f"{start:.6f}"}
    if wait_s <= 0 or not containers:
        return out
    until = start + wait_s
    argv = events_argv(containers, since or f"{start:.6f}", f"{until:.6f}")
    try:
        proc = docker.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        out["error"] = f"docker events could not start: {exc}"
        proc = None
    events: list[ExitEvent] = []
    if proc is not None:
        # docker ends the stream at --until; a daemon that hangs is abandoned a little later
        timer = threading.Timer(wait_s + 10.0, proc.kill)
        timer.start()
        try:
            events = watch(proc.stdout, containers)
        finally:
            timer.cancel()
            if events and proc.poll() is None:
                proc.terminate()  # the exit ended the watch before --until did
            try:
                _unused, err = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                _unused, err = proc.communicate()
        if not events and proc.returncode != 0:
            words = (err or "").strip().splitlines()
            out["error"] = f"docker events failed: {words[-1] if words else f'exit {proc.returncode}'}"
    if not events and clock() < until:
        sleep(max(0.0, until - clock()))  # no stream: keep the poll's pace, the status read comes next
    out["events"] = [e.to_dict() for e in events]
    last_die = next((e for e in reversed(events) if e.action == "die"), None)
    if last_die is not None:
        # integer nanoseconds: a float would round the exit's own time back in (or out)
        after = last_die.time_ns + 1
        out["next_since"] = f"{after // 1_000_000_000}.{after % 1_000_000_000:09d}"
    else:
        out["next_since"] = f"{min(clock(), until):.6f}"
    out["watched_s"] = round(clock() - start, 3)
    return out
