#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Documentation of the bench_venv action (the code is plugins/action/bench_venv.py): the controller's bench venv."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_venv
short_description: Find the controller's bench virtualenv, or make it once from the pinned requirements
version_added: 0.2.0
description:
  - Controller-side action (this file only documents it); runs on the controller, once.
  - A O(venv) given is used as it is, and refused (one sentence with the fix) when it lacks
    tool-eval-bench, llama-benchy or its python.
  - Otherwise O(checkout_venv) (a checkout's C(.venv-bench) made by C(make venv-bench)) is used when it has the tools.
  - Otherwise the venv is C(${XDG_CACHE_HOME:-~/.cache}/lanekit/bench-venv-<hash>), the hash being that of
    O(requirements) (comments and blank lines do not count), outside the installed collection. On first use it
    is made with O(python) (C(-m venv), then the venv's pip installs O(requirements)), after a console line
    saying so; a marker with the requirements' hash is written last. A venv whose marker matches is left
    alone (changed false); changed pins get a new venv beside the old one.
options:
  requirements:
    description: The pinned requirements file (the collection's C(requirements-bench.txt)).
    type: path
    required: true
  venv:
    description: A virtualenv to use as it is; empty to find or make one.
    type: str
    default: ""
  checkout_venv:
    description: A checkout's C(.venv-bench), used when it has the tools; empty for none.
    type: str
    default: ""
  python:
    description: The Python that creates the venv; empty for the one running Ansible.
    type: str
    default: ""
  create:
    description: Make the venv in the cache when it is missing; false only reports it (RV(ready)).
    type: bool
    default: true
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
- name: Find or make the bench tools' virtualenv
  lanekit.serving.bench_venv:
    requirements: "{{ role_path | dirname | dirname }}/requirements-bench.txt"
    checkout_venv: "{{ role_path | dirname | dirname }}/.venv-bench"
  delegate_to: localhost
  run_once: true
  register: bench_controller
"""

RETURN = r"""
venv:
  description: The virtualenv the bench tools run from.
  returned: always
  type: str
source:
  description: Where it comes from, C(configured) (O(venv)), C(checkout) (O(checkout_venv)) or C(cache).
  returned: success
  type: str
wheel_cache:
  description: Where a bench host's downloaded wheels are kept (the checkout's C(.cache/bench-wheels) or the user cache's).
  returned: success
  type: str
ready:
  description: Whether the venv has the tools (false only with O(create=false) or in check mode).
  returned: success
  type: bool
"""
