#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: file_chunk
short_description: Read one bounded chunk of a regular file on a node, as the become user
version_added: 0.2.0
description:
  - Returns at most O(size) bytes of O(path) from O(offset), base64-encoded, with the file's size when it was
    opened. The controller copies a node's logs and archives with one call per chunk, so neither end holds a
    whole file in memory (M(ansible.builtin.slurp) returns the whole file in one result).
  - O(path) must be a regular file and is opened without following a link at its name; a link, a FIFO or a
    device is refused with a sentence, so nothing is read from C(/dev/zero) or a file the link points to.
options:
  path:
    description: The file on the node.
    type: path
    required: true
  offset:
    description: The byte to start at.
    type: int
    default: 0
  size:
    description: The most bytes to return (at most 16 MiB).
    type: int
    default: 4194304
seealso:
  - module: ansible.builtin.slurp
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
attributes:
  check_mode:
    support: full
    details: It only reads.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: It only reads.
"""

EXAMPLES = r"""
---
- name: Read the first 4 MiB of a rank's archived log
  lanekit.serving.file_chunk:
    path: /var/tmp/lanekit/bundles/lane-0123/lanekit-lane-r0.log
    offset: 0
    size: 4194304
  register: chunk
"""

RETURN = r"""
content:
  description: The bytes read, base64-encoded.
  returned: success
  type: str
length:
  description: How many bytes C(content) holds.
  returned: success
  type: int
file_size:
  description: The file's size when it was opened.
  returned: success
  type: int
eof:
  description: Whether the chunk reaches the end of the file as it was when opened.
  returned: success
  type: bool
"""

import base64
import errno
import os
import stat
from typing import Any

from ansible.module_utils.basic import AnsibleModule

# One chunk stays a few MiB in the module's result (base64 adds a third), however large the file is.
MAX_SIZE = 16 * 2**20


class ChunkError(Exception):
    """A chunk that cannot be read, as a sentence."""


def read_chunk(path: str, offset: int, size: int) -> dict[str, Any]:
    """``size`` bytes (at most) of the regular file ``path`` from ``offset``: content (base64), length, file_size, eof."""
    if offset < 0 or not 0 < size <= MAX_SIZE:
        raise ChunkError(f"offset must be at least 0 and size from 1 to {MAX_SIZE} bytes (got {offset}, {size}).")
    try:
        # O_NOFOLLOW: a link planted at the name is refused, never followed; O_NONBLOCK: a FIFO does not hang the open.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the name is a symbolic link
            raise ChunkError(f"{path} is not a regular file (a symbolic link); it is not read.") from None
        raise ChunkError(f"{path} cannot be opened ({exc.strerror}).") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ChunkError(f"{path} is not a regular file; it is not read.")
        data = b""
        while len(data) < size:
            part = os.pread(fd, size - len(data), offset + len(data))
            if not part:
                break
            data += part
    finally:
        os.close(fd)
    return {"changed": False, "content": base64.b64encode(data).decode("ascii"), "length": len(data),
            "file_size": info.st_size, "eof": offset + len(data) >= info.st_size}


def main() -> None:
    module = AnsibleModule(argument_spec=dict(path=dict(type="path", required=True),
                                              offset=dict(type="int", default=0),
                                              size=dict(type="int", default=4 * 2**20)),
                           supports_check_mode=True)
    try:
        result = read_chunk(module.params["path"], module.params["offset"], module.params["size"])
    except ChunkError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
