"""Issue 38 (item 10): lanekit.serving.file_chunk reads one bounded chunk of a regular file, never a link, a FIFO
or a device, so the controller copies a node's logs and archives without a whole read at either end."""
from __future__ import annotations

import base64
import os

import pytest
import yaml

from ansible_collections.lanekit.serving.plugins.modules import file_chunk


def test_a_chunk_is_at_most_size_bytes_and_says_where_the_file_ends(tmp_path):
    path = tmp_path / "r0.log"
    path.write_bytes(b"0123456789")
    first = file_chunk.read_chunk(str(path), 0, 4)
    assert base64.b64decode(first["content"]) == b"0123" and first["length"] == 4
    assert first["file_size"] == 10 and first["eof"] is False
    last = file_chunk.read_chunk(str(path), 8, 4)
    assert base64.b64decode(last["content"]) == b"89" and last["eof"] is True
    assert file_chunk.read_chunk(str(path), 20, 4)["length"] == 0


def test_sizes_outside_the_bound_and_what_is_not_a_regular_file_are_refused(tmp_path):
    path = tmp_path / "r0.log"
    path.write_bytes(b"x")
    for offset, size in ((0, 0), (-1, 4), (0, file_chunk.MAX_SIZE + 1)):
        with pytest.raises(file_chunk.ChunkError, match="size from 1 to"):
            file_chunk.read_chunk(str(path), offset, size)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opened non-blocking: a FIFO nobody writes does not hang the module
    with pytest.raises(file_chunk.ChunkError, match="is not a regular file"):
        file_chunk.read_chunk(str(fifo), 0, 4)
    with pytest.raises(file_chunk.ChunkError, match="cannot be opened"):
        file_chunk.read_chunk(str(tmp_path / "missing"), 0, 4)


def test_the_documented_options_are_the_module_s():
    documented = yaml.safe_load(file_chunk.DOCUMENTATION)["options"]
    assert documented["size"]["default"] == 4 * 2**20 and documented["offset"]["default"] == 0
    assert set(documented) == {"path", "offset", "size"}
