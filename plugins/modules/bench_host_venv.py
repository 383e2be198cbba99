#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Documentation of the bench_host_venv action (the code is plugins/action/bench_host_venv.py): the venv."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_host_venv
short_description: Make the pinned bench virtualenv on a bench host, offline, once
version_added: 0.2.0
description:
  - Controller-side action (this file only documents it); delegate it to the bench host and run it once.
  - Reads the bench host's Python version, CPU and glibc with its C(python3), and refuses (one sentence)
    a host that is not Linux with glibc, or has a Python older than 3.10.
  - Downloads the binary wheels of O(requirements) (and pip) for exactly that target on the controller,
    once, into a directory of O(cache) named by the requirements' hash and the target
    (C(pip download --only-binary=:all:)); an sdist-only dependency fails here with pip's message.
  - Copies them to the host, creates the venv C(--without-pip) (no ensurepip needed), installs the
    wheels with C(--no-index) (the downloaded pip wheel runs the install), writes a marker with the
    requirements' hash and the target, and removes the copied wheels.
  - A venv whose marker matches is left alone (changed false); a changed requirements file or another
    Python on the host reinstalls it.
options:
  host:
    description: The bench host's inventory name (for the messages).
    type: str
    required: true
  requirements:
    description: The pinned requirements file on the controller (requirements-bench.txt).
    type: path
    required: true
  cache:
    description: Controller directory of downloaded wheels.
    type: path
    required: true
  controller_python:
    description: A Python with pip on the controller that runs C(pip download).
    type: path
    required: true
  venv:
    description: The venv's path on the host; empty for C(~/.cache/lanekit/bench-venv).
    type: str
    default: ""
  python:
    description: The host's Python that creates the venv.
    type: str
    default: python3
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
    details: The marker in the venv; a second run installs nothing.
"""

EXAMPLES = r"""
---
- name: Make the bench venv on spark-02
  lanekit.serving.bench_host_venv:
    host: spark-02
    requirements: /opt/lanekit/requirements-bench.txt
    cache: /opt/lanekit/.cache/bench-wheels
    controller_python: /opt/lanekit/.venv-bench/bin/python
  delegate_to: spark-02
  run_once: true
"""

RETURN = r"""
venv:
  description: The venv's path on the host.
  returned: always
  type: str
target:
  description: The wheels' target, e.g. C(cp311-x86_64-glibc2.36).
  returned: success
  type: str
python:
  description: The host's Python version.
  returned: success
  type: str
runs_root:
  description: Where runs are placed on the host (C(~/.cache/lanekit/bench-runs)).
  returned: success
  type: str
"""
