#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Report one node's pin of an image (content hash, layer digest) and whether it is the wanted one."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: image_info
short_description: Report the pin of a lanekit image on a node
version_added: 0.1.0
description:
  - Inspects one image reference on the host it runs on and reports its pin, that is the content-hash
    label, the digest of its layer list (RV(pin.rootfs)), its registry digests and local Id.
  - With O(content_hash) (and optionally O(rootfs)) it also says whether the node holds exactly
    that image (RV(current)) and, if not, why (RV(mismatch)).
  - Never changes anything. The C(lanekit.serving.image) role runs it on every node before and
    after distributing, to skip current nodes and to name the nodes whose pin differs.
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
  - lanekit.serving.docker_cli
options:
  ref:
    description: The image reference, for example C(lanekit/mistral-large4-vllm:0123456789ab).
    type: str
    required: true
  content_hash:
    description: The content hash the image must carry (label C(io.lanekit.content-hash)).
    type: str
  rootfs:
    description: The layer-list digest the image must have (from the lock or the builder).
    type: str
  config:
    description:
      - The digest of the image's run-relevant configuration (entrypoint, command, env, user, labels, ... with
        the platform and the layer list) the image must have, from the builder or the lock.
    type: str
attributes:
  check_mode:
    support: full
    details: [Read-only; runs the same in check mode.]
  diff_mode:
    support: none
    details: [Nothing changes, so there is nothing to diff.]
  idempotent:
    support: full
    details: [Read-only.]
seealso:
  - module: lanekit.serving.image_distribute
"""

EXAMPLES = r"""
---
- name: Report the pin of the lane image on every node
  lanekit.serving.image_info:
    ref: "{{ lanekit_plan.image.ref }}"
    content_hash: "{{ lanekit_plan.image.content_hash }}"
  register: image_pin
"""

RETURN = r"""
pin:
  description: The image's pin on this node; values are empty when the image is absent.
  returned: always
  type: dict
  contains:
    present:
      description: Whether the reference exists on the node.
      type: bool
    content_hash:
      description: The C(io.lanekit.content-hash) label.
      type: str
    rootfs:
      description: sha256 over the ordered layer digests (C(RootFS.Layers)).
      type: str
    config:
      description:
        - sha256 over the run-relevant configuration (entrypoint, command, env, user, working directory,
          labels, ports, volumes, health check), the platform and the layer list; the same whatever the image store.
      type: str
    image_id:
      description: The local image Id (store dependent; informational).
      type: str
    arch:
      description: The image architecture.
      type: str
    repo_digests:
      description: C(RepoDigests), the registry digests the image is known under.
      type: list
      elements: str
    repo_tags:
      description: C(RepoTags).
      type: list
      elements: str
current:
  description: Whether the image matches O(content_hash), O(rootfs) and O(config) (false when O(content_hash) is not given).
  returned: always
  type: bool
mismatch:
  description: Why the image is not current, empty when it is.
  returned: always
  type: str
  sample: "the tag points at another image (content hash 9f2c0d1e4a5b, wanted 0123456789ab)"
local_copy:
  description:
    - Id of a local image that carries the wanted pin under another name when O(ref) is not current
      (the tag was removed or moved); M(lanekit.serving.image_distribute) re-tags it without a transfer.
    - Empty when there is none or the image is current.
  returned: always
  type: str
engine:
  description: The docker engine's architecture on this node.
  returned: always
  type: dict
  contains:
    arch:
      description: Go architecture name (V(amd64), V(arm64)).
      type: str
"""

from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_module import (
    DockerManager,
    pin_options,
    run_docker_module,
)


class ImageInfo(DockerManager):
    """Report the pin of one image on this node; changes nothing."""

    def run(self) -> dict:
        pin = self.inspect_pin()
        mismatch = ""
        if self.params["content_hash"]:
            mismatch = self.pin_problem(pin) or ""
        return {
            "changed": False,
            "pin": pin,
            "current": bool(self.params["content_hash"]) and not mismatch,
            "mismatch": mismatch,
            # A node that only lost the tag is repaired by re-tagging: it needs no transfer.
            "local_copy": self.local_copy() if mismatch else "",
            "engine": {"arch": self.docker.server_arch()},
        }


def main() -> None:
    run_docker_module(ImageInfo, pin_options(content_hash_required=False))


if __name__ == "__main__":
    main()
