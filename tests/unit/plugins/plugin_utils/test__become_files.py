"""Files put through the become user leave no temporary directory on the node, the action's own included."""
from __future__ import annotations

import itertools

from ansible_collections.lanekit.serving.plugins.plugin_utils import _become_files as becomefiles


class Shell:
    def __init__(self) -> None:
        self.tmpdir: str | None = None

    @staticmethod
    def join_path(*parts: str) -> str:
        return "/".join(parts)

    @staticmethod
    def quote(text: str) -> str:
        return text


class Connection:
    def __init__(self) -> None:
        self._shell = Shell()


class Node:
    """What ActionBase does with the node's temporary directories, as far as a put sees it:
    _make_tmp_path makes one and records it on the shell, _remove_tmp_path removes one and clears
    the record (ansible/plugins/action/__init__.py)."""

    def __init__(self) -> None:
        self._connection = Connection()
        self.dirs: set[str] = set()
        self._names = (f"/home/lanekit/.ansible/tmp/ansible-tmp-{n}" for n in itertools.count())
        self.modules: list[str] = []

    def _make_tmp_path(self) -> str:
        name = next(self._names)
        self.dirs.add(name)
        self._connection._shell.tmpdir = name
        return name

    def _remove_tmp_path(self, tmp_path: str | None, force: bool = False) -> None:
        if tmp_path:
            self.dirs.discard(tmp_path)
            self._connection._shell.tmpdir = None

    def _transfer_file(self, local: str, remote: str) -> None:
        pass

    def _fixup_perms2(self, paths: list[str]) -> None:
        pass

    def _low_level_execute_command(self, cmd: str, sudoable: bool = True) -> dict:
        return {"rc": 0}

    def _execute_module(self, module_name: str, module_args: dict, task_vars: dict) -> dict:
        self.modules.append(module_name)
        return {"changed": True}


def test_a_put_gives_the_action_its_own_temp_dir_back_so_its_cleanup_removes_it(tmp_path):
    local = tmp_path / "tokenizer.json"
    local.write_text("{}")
    action = Node()
    # ActionBase.run makes the temporary directory of an action that transfers files before it runs.
    own = action._make_tmp_path()
    becomefiles.put(action, {}, str(local), "/var/tmp/lanekit/x/tokenizer.json")
    becomefiles.put_many(action, {}, [str(local)], "/root/.cache/lanekit/bench-venv.wheels")
    assert action._connection._shell.tmpdir == own
    action._remove_tmp_path(action._connection._shell.tmpdir)  # the action's cleanup
    assert action.dirs == set(), "a temporary directory stayed in the login user's home"
    assert action.modules == ["ansible.builtin.copy", "ansible.builtin.copy"]
