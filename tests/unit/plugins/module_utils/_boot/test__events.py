"""docker events on the node: the argv, the parsing of real event lines, and the watch that ends
at the first exit (issue #28 part 3)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._boot import _events as ev
from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError

NAMES = ["lanekit-l1-r0", "lanekit-l1-r1"]
T0 = 1764650000_000000000  # a node's clock, in ns


def event(action, name, dt_ms=0, **attrs):
    """One line as docker 20.10+ prints it with --format '{{json .}}'."""
    at = T0 + dt_ms * 1_000_000
    return json.dumps({
        "status": action, "id": "3f2a", "from": "vllm/vllm-openai:v0.11", "Type": "container", "Action": action,
        "Actor": {"ID": "3f2a", "Attributes": dict({"image": "vllm/vllm-openai:v0.11", "name": name,
                                                    "io.lanekit.lane": "l1"}, **attrs)},
        "scope": "local", "time": at // 1_000_000_000, "timeNano": at})


def test_argv_filters_the_named_containers_exits_with_values_bound_to_their_flags():
    argv = ev.events_argv(NAMES, "1764650000.5", "1764650003.0")
    assert argv[0] == "events"
    assert "--since=1764650000.5" in argv and "--until=1764650003.0" in argv
    assert {"--filter=event=die", "--filter=event=oom", "--filter=type=container",
            "--filter=container=lanekit-l1-r0", "--filter=container=lanekit-l1-r1"} <= set(argv)
    assert all(a.startswith("--") for a in argv[1:])


def test_parse_reads_die_with_code_and_oom_and_ignores_the_rest():
    die = ev.parse_event(event("die", "lanekit-l1-r1", 250, exitCode="137"), NAMES)
    assert die == ev.ExitEvent("lanekit-l1-r1", "die", T0 + 250_000_000, 137)
    assert die.time == pytest.approx(1764650000.25)
    assert ev.parse_event(event("oom", "lanekit-l1-r0"), NAMES) == ev.ExitEvent("lanekit-l1-r0", "oom", T0, None)
    # an exec inside the rank ending, another lane's container, a health change, noise
    assert ev.parse_event(event("exec_die", "lanekit-l1-r0", exitCode="0", execID="x"), NAMES) is None
    assert ev.parse_event(event("die", "lanekit-l2-r0", exitCode="1"), NAMES) is None
    assert ev.parse_event(event("health_status: healthy", "lanekit-l1-r0"), NAMES) is None
    assert ev.parse_event("", NAMES) is None and ev.parse_event("not json", NAMES) is None
    assert ev.parse_event("[1, 2]", NAMES) is None


def test_parse_falls_back_to_whole_seconds_and_tolerates_a_bad_exit_code():
    line = json.loads(event("die", "lanekit-l1-r0", exitCode="?"))
    del line["timeNano"]
    got = ev.parse_event(json.dumps(line), NAMES)
    assert got is not None and got.time_ns == T0 // 1_000_000_000 * 1_000_000_000 and got.exit_code is None


def test_watch_ends_at_the_first_die_and_keeps_the_oom_before_it():
    def lines():
        yield event("exec_die", "lanekit-l1-r0", exitCode="0")
        yield event("oom", "lanekit-l1-r1", 10)
        yield event("die", "lanekit-l1-r1", 12, exitCode="137")
        raise AssertionError("the watch read past the first exit")

    got = ev.watch(lines(), NAMES)
    assert [(e.action, e.container, e.exit_code) for e in got] == [("oom", "lanekit-l1-r1", None),
                                                                   ("die", "lanekit-l1-r1", 137)]


class FakeProc:
    def __init__(self, lines, rc=0, err=""):
        self.stdout = iter(lines)
        self.returncode = None
        self._rc, self._err = rc, err
        self.terminated = False

    def poll(self):
        return self.returncode

    def terminate(self):
        self.terminated = True
        self.returncode = -15

    def kill(self):
        self.returncode = -9

    def communicate(self, timeout=None):
        if self.returncode is None:
            self.returncode = self._rc
        return "", self._err


class FakeDocker:
    def __init__(self, proc=None, fail=None):
        self.proc, self.fail, self.argv = proc, fail, None

    def popen(self, argv, **_kw):
        self.argv = argv
        if self.fail:
            raise self.fail
        return self.proc


class Clock:
    def __init__(self, now):
        self.now = now
        self.slept = 0.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.slept += s
        self.now += s


def test_run_watch_returns_at_the_exit_and_the_next_watch_starts_just_after_it():
    proc = FakeProc([event("die", "lanekit-l1-r0", 400, exitCode="1")])
    clock = Clock(T0 / 1e9)
    out = ev.run_watch(FakeDocker(proc), NAMES, 5.0, "1764649999.000000", clock=clock, sleep=clock.sleep)
    assert [e["container"] for e in out["events"]] == ["lanekit-l1-r0"] and out["events"][0]["exit_code"] == 1
    assert proc.terminated and clock.slept == 0 and not out["error"]
    sec, frac = out["next_since"].split(".")
    assert int(sec) * 1_000_000_000 + int(frac) == out["events"][0]["time_ns"] + 1 == T0 + 400_000_001


def test_run_watch_replays_from_the_previous_end():
    docker = FakeDocker(FakeProc([]))
    clock = Clock(1764650010.0)
    ev.run_watch(docker, NAMES, 2.0, "1764650007.25", clock=clock, sleep=clock.sleep)
    assert "--since=1764650007.25" in docker.argv and "--until=1764650012.000000" in docker.argv


def test_run_watch_without_a_stream_keeps_the_pace_and_says_why():
    clock = Clock(1764650010.0)
    out = ev.run_watch(FakeDocker(fail=OSError("no such file")), NAMES, 3.0, None, clock=clock, sleep=clock.sleep)
    assert out["events"] == [] and "could not start" in out["error"] and clock.slept == pytest.approx(3.0)
    clock = Clock(1764650010.0)
    out = ev.run_watch(FakeDocker(FakeProc([], rc=1, err="Error: daemon is down\n")), NAMES, 3.0, None,
                       clock=clock, sleep=clock.sleep)
    assert out["error"] == "docker events failed: Error: daemon is down" and clock.slept == pytest.approx(3.0)


def test_run_watch_of_zero_seconds_starts_nothing():
    docker = FakeDocker(fail=AssertionError("started"))
    out = ev.run_watch(docker, NAMES, 0, None)
    assert out["events"] == [] and docker.argv is None


def test_run_watch_refuses_a_since_that_is_not_a_time():
    with pytest.raises(LanekitError, match="exit_watch_since must be a node time"):
        ev.run_watch(FakeDocker(FakeProc([])), NAMES, 1.0, "--help")
