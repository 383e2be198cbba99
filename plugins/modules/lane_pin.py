#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Documentation of the lane_pin action (the code is plugins/action/lane_pin.py): the image digests and model revision."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: lane_pin
short_description: Pin a lane's upstream image digests and its model's Hub revision into the lane's files
version_added: 0.2.0
description:
  - Reads the raw manifest of the lane image's C(upstream.repository:upstream.tag) with
    C(docker buildx imagetools inspect --raw) or C(skopeo inspect --raw) (the first of the two the controller
    has, or O(resolver)), takes the digest of each architecture to pin from the manifest list (or the digest
    of a single-architecture manifest) and writes it to C(upstream.digests.<arch>) in C(images/<image>/image.yml).
  - Asks the Hugging Face Hub for the commit O(revision) names in the repository C(model.id)
    (C(HfApi().model_info(repo, revision=...).sha), through C(model.source.endpoint) when set) and writes it to
    C(model.revision) in the lane file. A lane whose C(model.source.kind) is C(local) has nothing to pin there.
  - A file is rewritten only when a value differs, atomically and with its comments and other lines kept; the
    result is parsed again and must differ from the old file in the pinned values only, else nothing is written
    and the sentence names the lines to change by hand.
  - A registry or Hub failure, an image without the architecture, or no tool to read the registry is one
    sentence naming the reference and the fix.
  - Runs on the controller only (action plugin); no node is contacted.
options:
  lane:
    description: The lane name (C(lanes/<lane>.yml)).
    type: str
    required: true
  lanes_dir:
    description: Where the lane files are; default C(lanes/) in the working directory when it exists, else the collection's.
    type: path
  images_dir:
    description: Where the image specs are; default C(images/) in the working directory when it exists, else the collection's.
    type: path
  image:
    description: Pin the upstream image digests.
    type: bool
    default: true
  model:
    description: Pin the model's Hub revision.
    type: bool
    default: true
  arches:
    description: The architectures to pin (V(arm64), V(amd64)); default the ones C(upstream.digests) lists.
    type: list
    elements: str
    default: []
  revision:
    description: The branch, tag or commit of the model repository to pin.
    type: str
    default: main
  hf_token:
    description:
      - A Hub token for a gated or private repository. Prefer O(hf_token_file) or O(use_host_token), because a
        token given on the command line (C(-e pin_hf_token=...)) shows in C(ps) and the shell history; the task
        warns when it was.
      - Without O(hf_token), O(hf_token_file) or O(use_host_token) no token is sent at all, not even the
        controller's own saved one.
      - A token goes only to the endpoint the lane names (C(model.source.endpoint)), over https or to this
        machine's loopback; without an endpoint, not while E(HF_ENDPOINT) names another host than the public
        Hub (the weights staging path's check).
    type: str
  hf_token_file:
    description:
      - A file holding the Hub token on one line, readable by its owner only (mode 0600; a file others can read
        is refused). Used when O(hf_token) is not given.
    type: path
  use_host_token:
    description:
      - Send the controller's own saved token (E(HF_TOKEN), or the one C(hf auth login) saved) when neither
        O(hf_token) nor O(hf_token_file) is given. Off by default, so a lane file naming a mirror never
        receives it unasked; the endpoint checks of O(hf_token) apply to it as well.
    type: bool
    default: false
  resolver:
    description: The tool that reads the registry; V(auto) takes docker, else skopeo.
    type: str
    default: auto
    choices: [auto, docker, skopeo]
  digest_overrides:
    description:
      - C(lanekit_image_digests). An architecture it sets takes precedence over C(image.yml), so the result's
        RV(notes) say that the pin written there is not the one the plan uses.
    type: raw
attributes:
  check_mode:
    support: full
    details: Reads the registry and the Hub and reports what would change; writes nothing.
  diff_mode:
    support: full
    details: The diff of each file that changes (or would, in check mode).
  idempotent:
    support: full
    details: A file whose values are already the pinned ones is left alone.
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
"""

EXAMPLES = r"""
- name: Pin the lane's image digests and model revision (ansible-playbook lanekit.serving.pin -e lane=NAME)
  lanekit.serving.lane_pin:
    lane: mistral-large4-nvfp4-8x-vllm
    digest_overrides: "{{ lanekit_image_digests | default({}) }}"
  register: pin_result
"""

RETURN = r"""
changes:
  description:
    - One line per value written (or that would be, in check mode) - the file, the line, the key, the old and the new value.
    - C(<file>) followed by C(already pinned) when nothing differs.
  returned: success
  type: list
  elements: str
notes:
  description: What the pin could not do or what overrides it (a local model, a C(lanekit_image_digests) entry).
  returned: success
  type: list
  elements: str
digests:
  description: The pinned digest per architecture.
  returned: when O(image) is true
  type: dict
revision:
  description: The pinned model commit.
  returned: when O(model) is true and the model comes from the Hub
  type: str
lane_file:
  description: The lane file read.
  returned: success
  type: str
"""
