# Copyright: lanekit developers
# Apache-2.0
"""The lookup yaml_file: read a YAML file on the controller through the collection's one safe loader,
so a broken file (not UTF-8, duplicate keys, alias bombs, deep nesting) fails with a sentence naming it."""
from __future__ import annotations

DOCUMENTATION = r"""
name: yaml_file
short_description: Read a YAML file on the controller with lanekit's safe loader
version_added: 0.1.0
description:
  - Reads and parses one YAML file on the controller the way lanekit reads lanes and image specs
    (C(plugins/module_utils/_yaml.py)) - UTF-8 only, one document, duplicate keys refused, alias
    expansion and nesting bounded.
  - A file that cannot be read or parsed fails the task with one sentence naming the file, never a
    parser dump.
options:
  _terms:
    description: The path of the file to read.
    required: true
    type: list
    elements: path
author:
  - lanekit developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read an image lock
  ansible.builtin.set_fact:
    image_lock: "{{ lookup('lanekit.serving.yaml_file', 'images/mistral-large4-vllm/image.lock.yml') }}"
"""

RETURN = r"""
_raw:
  description: The parsed content of each file (a mapping, a list or a scalar; None for an empty file).
  type: list
  elements: raw
"""

from typing import Any

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._yaml import load_file


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[Any]:
        self.set_options(var_options=variables, direct=kwargs)
        out: list[Any] = []
        for term in terms:
            try:
                out.append(load_file(str(term)))
            except LanekitError as err:
                raise AnsibleLookupError(str(err)) from None
        return out
