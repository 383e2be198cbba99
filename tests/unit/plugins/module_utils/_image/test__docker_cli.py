"""The docker CLI wrapper: pins, arch names and the exec-readiness probe (the stream protocol is
tested in test__stream.py)."""
from __future__ import annotations

import pytest

from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import (
    DockerCLI,
    DockerError,
    image_pin,
    merge_log_streams,
    normalize_arch,
    pin_mismatch,
    registry_digest_for,
    rootfs_digest,
    split_repository,
)
from tests.unit.helpers.docker import FakeEngine, FakeModule

HASH = "c" * 64


@pytest.mark.parametrize("raw, arch", [("x86_64", "amd64"), ("amd64", "amd64"), ("aarch64", "arm64"),
                                       ("arm64", "arm64"), (" ARM64 ", "arm64"), (None, ""), ("riscv64", "riscv64")])
def test_normalize_arch(raw, arch):
    assert normalize_arch(raw) == arch


def test_rootfs_digest_depends_on_layers_and_order():
    a, b = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    first = rootfs_digest({"RootFS": {"Layers": [a, b]}})
    assert first.startswith("sha256:") and len(first) == 71
    assert first == rootfs_digest({"RootFS": {"Layers": [a, b]}, "Id": "another id"})
    assert first != rootfs_digest({"RootFS": {"Layers": [b, a]}})
    assert rootfs_digest({}) == "" and rootfs_digest(None) == ""


def test_pin_of_absent_and_present_images():
    assert image_pin(None)["present"] is False
    engine = FakeEngine()
    inspect = engine.add("lanekit/x:1", labels={"io.lanekit.content-hash": HASH}, repo_digests=["r:5000/lanekit/x@sha256:" + "9" * 64])
    pin = image_pin(inspect)
    assert pin["present"] and pin["content_hash"] == HASH and pin["arch"] == "amd64"
    assert pin["rootfs"] == rootfs_digest(inspect)


def test_pin_mismatch_reasons():
    engine = FakeEngine()
    pin = image_pin(engine.add("lanekit/x:1", labels={"io.lanekit.content-hash": HASH}))
    assert pin_mismatch(pin, HASH) is None
    assert pin_mismatch(pin, HASH, pin["rootfs"]) is None
    assert "not present" in pin_mismatch(image_pin(None), HASH)
    assert "points at another image" in pin_mismatch(pin, "d" * 64)
    assert "rebuilt elsewhere" in pin_mismatch(pin, HASH, "sha256:" + "0" * 64)
    unlabelled = image_pin(engine.add("lanekit/x:2"))
    assert "no content-hash label" in pin_mismatch(unlabelled, HASH)


def test_registry_digest_and_repository():
    digests = ["10.0.0.1:5000/lanekit/x@sha256:" + "a" * 64, "other/x@sha256:" + "b" * 64]
    assert registry_digest_for(digests, "10.0.0.1:5000/lanekit/x") == "sha256:" + "a" * 64
    assert registry_digest_for(digests, "missing/x") == ""
    assert split_repository("host:5000/a/b:tag") == "host:5000/a/b"
    assert split_repository("a/b@sha256:" + "a" * 64) == "a/b"
    assert split_repository("host:5000/a/b") == "host:5000/a/b"


def test_inspect_absent_is_none_and_other_errors_are_sentences():
    module = FakeModule(responder=lambda argv: (1, "", "permission denied while trying to connect to the Docker daemon"))
    docker = DockerCLI(module)
    with pytest.raises(DockerError) as err:
        docker.inspect_image("x")
    assert "permission denied" in str(err.value) and docker.host in str(err.value)
    assert DockerCLI(FakeModule(responder=FakeEngine())).inspect_image("nothing:here") is None


def test_commands_are_argv_lists_without_a_shell():
    engine = FakeEngine()
    module = FakeModule(responder=engine)
    docker = DockerCLI(module)
    docker.tag("a", "b") if engine.add("a") else None
    assert all(isinstance(call, list) for call in module.calls)
    assert module.calls[-1][1:] == ["image", "tag", "a", "b"]


# -- exec-readiness probe -------------------------------------------------------------------------
class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_probe_retries_until_the_image_runs():
    engine = FakeEngine()
    engine.probe_failures = 3
    module = FakeModule(responder=engine)
    clock = Clock()
    result = DockerCLI(module).probe_exec("lanekit/x:1", ["/bin/sh", "-c", "true"], timeout=120,
                                          sleep=clock.sleep, clock=clock)
    assert result["ready"] and result["attempts"] == 4
    run = [call for call in module.calls if call[1] == "run"][0]
    assert run[run.index("--entrypoint") + 1] == "/bin/sh"
    assert run[-3:] == ["lanekit/x:1", "-c", "true"]
    assert "--rm" in run and "never" in run


def test_probe_gives_up_after_the_timeout_with_a_sentence():
    engine = FakeEngine()
    engine.probe_failures = 10 ** 6
    clock = Clock()
    with pytest.raises(DockerError) as err:
        DockerCLI(FakeModule(responder=engine)).probe_exec("lanekit/x:1", ["/bin/sh", "-c", "true"], timeout=120,
                                                           interval=2, sleep=clock.sleep, clock=clock)
    text = str(err.value)
    assert "cannot run lanekit/x:1" in text and "no such file" in text and "docker image rm lanekit/x:1" in text
    assert clock.now <= 120


def test_log_streams_merge_by_time_with_nanoseconds():
    out = ["2026-10-30T06:00:01.000000100Z a", "2026-10-30T06:00:03.000000000Z c"]
    err = ["2026-10-30T06:00:01.000000020Z before-a", "2026-10-30T06:00:02.500000000Z b"]
    assert [line.split(" ", 1)[1] for line in merge_log_streams(out, err)] == ["before-a", "a", "b", "c"]


def _script(tmp_path, body):
    path = tmp_path / "docker"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_a_docker_command_that_hangs_is_abandoned_after_the_timeout(tmp_path):
    docker = DockerCLI(FakeModule(), _script(tmp_path, "sleep 5\n"), timeout=0.3)
    assert docker.run(["ps"], check=False) == (124, "", "docker ps did not answer within 0.3s")
    with pytest.raises(DockerError, match="did not answer within 0.3s"):
        docker.run(["ps"])


def test_a_full_log_is_written_time_ordered_from_both_streams(tmp_path):
    docker = DockerCLI(FakeModule(), _script(tmp_path, (
        "echo '2026-10-30T06:00:02Z second'\n"
        "echo '2026-10-30T06:00:01Z first' >&2\n"
        "echo '2026-10-30T06:00:03Z third' >&2\n")), timeout=5)
    target = tmp_path / "r0.log"
    assert docker.write_log("r0", str(target)) == 0
    assert [line.split(" ", 1)[1] for line in target.read_text().splitlines()] == ["first", "second", "third"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docker", "r0.log"]


def test_containers_of_several_names_are_inspected_at_once_and_missing_ones_left_out():
    def respond(argv):
        return 1, '[{"Name": "/r0", "Id": "x"}]', "Error: No such container: gone\n"
    assert list(DockerCLI(FakeModule(responder=respond)).inspect_containers(["r0", "gone"])) == ["r0"]


def test_an_inspect_that_fails_for_another_reason_names_the_host():
    def respond(argv):
        return 1, "not json", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.\n"
    with pytest.raises(DockerError, match="docker inspect failed on .*Cannot connect"):
        DockerCLI(FakeModule(responder=respond)).inspect_containers(["r0"])


def test_log_lines_come_back_merged_and_a_failure_as_a_reason():
    answers = iter([(0, "2026-10-30T06:00:02Z b\n", "2026-10-30T06:00:01Z a\n"), (1, "", "")])
    docker = DockerCLI(FakeModule(responder=lambda argv: next(answers)))
    assert docker.logs("r0", since="2026-10-30T06:00:00Z", tail_lines=10) == (
        ["2026-10-30T06:00:01Z a", "2026-10-30T06:00:02Z b"], "")
    assert docker.logs("r0") == ([], "docker logs exited with 1")
