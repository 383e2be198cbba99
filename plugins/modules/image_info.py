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
  - With O(layers) (an image's layer list) it also says how many bottom layers of that list the node
    already holds (RV(held_layers)); with O(sizes) it reports the layers of O(ref) and their sizes
    (RV(image_layers), RV(layer_sizes)). The role's V(auto) method reads both to tell how much of the
    image each node lacks before it picks the stream or the relay.
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
  layers:
    description:
      - The image's layer list (C(RootFS.Layers), bottom first), as RV(image_layers) reports it on the builder.
      - When given, RV(held_layers) says how many bottom layers of it this node holds, in any local image (a
        shortened stream leaves those out). Costs one listing of the node's images unless the node is current.
    type: list
    elements: str
    default: []
  sizes:
    description:
      - Report the layers of O(ref) (RV(image_layers)) and the bytes of each (RV(layer_sizes), from
        C(docker image history)).
    type: bool
    default: false
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
held_layers:
  description:
    - How many bottom layers of O(layers) this node holds (all of them when it is current); 0 without O(layers).
  returned: always
  type: int
image_layers:
  description: The layers of O(ref) (C(RootFS.Layers), bottom first) with O(sizes); empty otherwise or when absent.
  returned: always
  type: list
  elements: str
layer_sizes:
  description:
    - With O(sizes), the bytes of each of RV(image_layers), bottom first. Empty without O(sizes) or when the image's
      history cannot be matched to its layers (0-byte layers that cannot be told from configuration steps).
  returned: always
  type: list
  elements: int
engine:
  description: The docker engine's architecture on this node.
  returned: always
  type: dict
  contains:
    arch:
      description: Go architecture name (V(amd64), V(arm64)).
      type: str
"""

from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import image_pin
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_module import (
    DockerManager,
    pin_options,
    run_docker_module,
)


class ImageInfo(DockerManager):
    """Report the pin of one image on this node; changes nothing."""

    def run(self) -> dict:
        inspect = self.docker.inspect_image(self.params["ref"])
        pin = image_pin(inspect)
        mismatch = ""
        if self.params["content_hash"]:
            mismatch = self.pin_problem(pin) or ""
        current = bool(self.params["content_hash"]) and not mismatch
        wanted = list(self.params["layers"] or [])
        image_layers = list(((inspect or {}).get("RootFS") or {}).get("Layers") or []) if self.params["sizes"] else []
        return {
            "changed": False,
            "pin": pin,
            "current": current,
            "mismatch": mismatch,
            # A current node holds every layer: no need to list its images.
            "held_layers": len(wanted) if current else self.held_layers(wanted),
            "image_layers": image_layers,
            "layer_sizes": self.layer_sizes(self.params["ref"], image_layers),
            # A node that only lost the tag is repaired by re-tagging: it needs no transfer.
            "local_copy": self.local_copy() if mismatch else "",
            "engine": {"arch": self.docker.server_arch()},
        }


def main() -> None:
    run_docker_module(ImageInfo, dict(pin_options(content_hash_required=False),
                                      layers=dict(type="list", elements="str", default=[]),
                                      sizes=dict(type="bool", default=False)))


if __name__ == "__main__":
    main()
