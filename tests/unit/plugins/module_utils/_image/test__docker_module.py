"""The module side every image module shares: the option specs, the manager base and main()."""
from __future__ import annotations

import json

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import DockerCLI
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_module import (
    DockerManager,
    docker_argument_spec,
    pin_options,
    run_docker_module,
)
from ansible_collections.lanekit.serving.plugins.modules import image_distribute, image_info
from tests.unit.helpers.docker import FakeEngine, FakeModule

HASH = "c" * 64
REF = "lanekit/thin:cccccccccccc"


def test_docker_argument_spec_adds_docker_cli_last_and_leaves_the_input_alone():
    options = dict(ref=dict(type="str", required=True))
    spec = docker_argument_spec(options)
    assert list(spec) == ["ref", "docker_cli"] and spec["docker_cli"] == {"type": "path"}
    assert list(options) == ["ref"]
    assert docker_argument_spec(options)["docker_cli"] is not spec["docker_cli"]


def test_pin_options_name_the_image_and_its_pin():
    assert pin_options() == {"ref": {"type": "str", "required": True},
                             "content_hash": {"type": "str", "required": True},
                             "rootfs": {"type": "str"}, "config": {"type": "str"}}
    assert pin_options(content_hash_required=False)["content_hash"] == {"type": "str"}
    # Each call is a fresh spec: a module that extends it cannot change another's.
    assert pin_options()["ref"] is not pin_options()["ref"]


def manager(engine, cls=DockerManager, **params):
    module = FakeModule(dict(dict(ref=REF, content_hash=HASH, rootfs=None), **params), check_mode=True,
                        responder=engine)
    return cls(module, DockerCLI(module)), module


def test_manager_binds_the_module_and_the_cli():
    engine = FakeEngine()
    mgr, module = manager(engine)
    assert mgr.module is module and mgr.params is module.params and mgr.check_mode is True
    assert mgr.host == mgr.docker.host
    assert DockerManager.docker_env({}) == {}
    with pytest.raises(NotImplementedError):
        mgr.run()


def test_manager_pin_of_the_ref_option_or_another_image():
    engine = FakeEngine()
    engine.add(REF, labels={"io.lanekit.content-hash": HASH})
    engine.add("lanekit/thin:other", labels={"io.lanekit.content-hash": "d" * 64})
    mgr, module = manager(engine)
    pin = mgr.inspect_pin()
    assert pin["present"] and pin["content_hash"] == HASH
    assert mgr.pin_problem(pin) is None
    other = mgr.inspect_pin("lanekit/thin:other")
    assert "points at another image" in mgr.pin_problem(other)
    absent = mgr.inspect_pin("lanekit/thin:absent")
    assert absent["present"] is False and "not present" in mgr.pin_problem(absent)
    assert module.calls[-1][1:] == ["image", "inspect", "lanekit/thin:absent"]


def test_manager_pin_problem_checks_rootfs_when_given():
    engine = FakeEngine()
    engine.add(REF, labels={"io.lanekit.content-hash": HASH})
    mgr, _unused = manager(engine, rootfs="sha256:" + "0" * 64)
    assert "rebuilt elsewhere" in mgr.pin_problem(mgr.inspect_pin())


# -- main(): a real AnsibleModule, docker answered by the engine in memory ----------------------------
@pytest.fixture
def engine(monkeypatch):
    engine = FakeEngine()
    calls = []

    def run_command(self, argv, data=None, environ_update=None, check_rc=False):
        calls.append({"argv": list(argv), "env": environ_update})
        return engine(list(argv))

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    engine.calls = calls
    return engine


def run_main(main, capsys, **args):
    with patch_module_args(args), pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code, json.loads(capsys.readouterr().out)


def test_main_exits_with_the_managers_result(engine, capsys):
    engine.add(REF, labels={"io.lanekit.content-hash": HASH})
    code, result = run_main(image_info.main, capsys, ref=REF, content_hash=HASH, docker_cli="/bin/true")
    assert code == 0 and not result.get("failed")
    assert result["current"] and result["pin"]["content_hash"] == HASH and result["engine"] == {"arch": "amd64"}
    assert engine.calls[0]["argv"] == ["/bin/true", "image", "inspect", REF]


def test_main_turns_a_docker_error_into_a_task_failure(engine, capsys, monkeypatch):
    monkeypatch.setattr(engine, "arch", "")  # an engine that does not say its architecture
    code, result = run_main(image_info.main, capsys, ref=REF, docker_cli="/bin/true")
    assert code == 1 and result["failed"]
    assert "did not report its architecture" in result["msg"] and "Traceback" not in result["msg"]


def test_main_without_a_docker_cli_fails_with_a_sentence(engine, capsys, tmp_path):
    code, result = run_main(image_info.main, capsys, ref=REF, docker_cli=str(tmp_path / "no-docker"))
    assert code == 1 and "the docker CLI was not found" in result["msg"] and engine.calls == []


def test_main_passes_the_modules_own_constraints_to_ansible_module(engine, capsys):
    code, result = run_main(image_distribute.main, capsys, ref=REF, content_hash=HASH, method="registry",
                            docker_cli="/bin/true")
    assert code == 1 and "registry_ref" in result["msg"] and engine.calls == []


def test_main_binds_the_managers_docker_environment(engine, capsys):
    class EnvManager(DockerManager):
        @staticmethod
        def docker_env(params):
            return {"DOCKER_BUILDKIT": "1" if params["fast"] else "0"}

        def run(self):
            self.docker.run(["version"])
            return {"changed": False, "env": self.docker.env, "check_mode": self.check_mode}

    def main():
        run_docker_module(EnvManager, dict(fast=dict(type="bool", default=True)))

    code, result = run_main(main, capsys, docker_cli="/bin/true", _ansible_check_mode=True)
    assert code == 0 and result["env"] == {"DOCKER_BUILDKIT": "1"} and result["check_mode"] is True
    assert engine.calls[0]["env"] == {"DOCKER_BUILDKIT": "1"}
