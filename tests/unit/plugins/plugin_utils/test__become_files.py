"""Files put through the become user leave no temporary directory on the node, the action's own included; files
fetched from a node come in bounded chunks."""
from __future__ import annotations

import itertools
import os

import pytest

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


# -- issue 38 (item 10): a node's file reaches the controller in bounded chunks, never in one read -----------
class Reader(Node):
    """A node whose modules run here, on the local files: the chunk reader as the module runs it, and
    ``slurp`` as Ansible's does (the whole file, base64, in one result)."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def _execute_module(self, module_name: str, module_args: dict, task_vars: dict) -> dict:
        import base64

        from ansible_collections.lanekit.serving.plugins.modules import file_chunk
        self.modules.append(module_name)
        if module_name == "ansible.builtin.slurp":
            with open(module_args["src"], "rb") as handle:
                data = handle.read()
            self.largest = max(self.largest, len(data))
            return {"content": base64.b64encode(data).decode(), "encoding": "base64"}
        if module_name == "lanekit.serving.file_chunk":
            try:
                out = file_chunk.read_chunk(module_args["path"], module_args["offset"], module_args["size"])
            except file_chunk.ChunkError as exc:
                return {"failed": True, "msg": str(exc)}
            self.largest = max(self.largest, out["length"])
            return out
        return {"changed": True}


def test_a_large_log_is_copied_in_chunks_no_result_holding_more_than_one(tmp_path, monkeypatch):
    monkeypatch.setattr(becomefiles, "FETCH_CHUNK_BYTES", 4096)
    remote = tmp_path / "r0.log"
    # not UTF-8 and not a whole number of chunks: the copy is byte for byte
    data = bytes(range(256)) * 100 + b"\xff\xfe tail"
    remote.write_bytes(data)
    node = Reader()
    local = tmp_path / "full.log"
    becomefiles.fetch(node, {}, str(remote), str(local))
    assert local.read_bytes() == data
    assert (local.stat().st_mode & 0o777) == 0o600
    assert "ansible.builtin.slurp" not in node.modules
    assert 0 < node.largest <= 4096, f"one module result held {node.largest} bytes of the file"
    assert node.modules.count("lanekit.serving.file_chunk") == len(data) // 4096 + 1


def test_a_file_that_grows_while_copied_is_copied_up_to_its_first_size(tmp_path, monkeypatch):
    monkeypatch.setattr(becomefiles, "FETCH_CHUNK_BYTES", 1000)
    remote = tmp_path / "r0.log"
    remote.write_bytes(b"a" * 2500)

    class Growing(Reader):
        def _execute_module(self, module_name, module_args, task_vars):
            out = super()._execute_module(module_name, module_args, task_vars)
            with open(remote, "ab") as handle:  # an engine still writing (or someone appending forever)
                handle.write(b"b" * 1000)
            return out

    becomefiles.fetch(Growing(), {}, str(remote), str(tmp_path / "copy"))
    assert (tmp_path / "copy").read_bytes() == b"a" * 2500


def test_a_link_or_a_device_is_not_read_and_no_partial_copy_stays(tmp_path):
    from ansible.errors import AnsibleError
    (tmp_path / "secret").write_text("root:x")
    os.symlink(tmp_path / "secret", tmp_path / "r0.log")
    for remote in (str(tmp_path / "r0.log"), "/dev/zero"):
        with pytest.raises(AnsibleError, match=f"reading {remote}: .*not a regular file"):
            becomefiles.fetch(Reader(), {}, remote, str(tmp_path / "copy"))
        assert not (tmp_path / "copy").exists() and not (tmp_path / "copy.partial").exists()
