#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: image_registry
short_description: Decide whether the builder's registry container must be created, kept or recreated
version_added: 0.2.0
description:
  - Controller-side action (this file only documents it); no host is contacted. It reads the
    registered C(container) of M(community.docker.docker_container_info) and the inventory's
    registry settings, and returns what M(community.docker.docker_container) then applies
    (with C(recreate) set from RV(recreate)).
  - Only what lanekit sets is compared - the TLS certificate and key, the htpasswd file and the
    published bind address and port - so a registry set up by hand with other env entries or
    mounts is not recreated for them. When it is recreated it keeps them, and its data mount.
  - Fails with one sentence when the running container serves TLS or asks for logins and the
    inventory no longer names the files; lanekit does not weaken a running registry, the user
    removes the container to do that on purpose.
options:
  container:
    description: The C(container) returned by M(community.docker.docker_container_info) (its
      inspection), null when there is no such container.
    type: dict
  name:
    description: The container's name (for the messages).
    type: str
    required: true
  host:
    description: The builder (for the messages).
    type: str
    required: true
  bind:
    description: Address the registry is published on.
    type: str
    required: true
  port:
    description: Port the registry is published on.
    type: int
    required: true
  tls_cert:
    description: TLS certificate on the builder; empty for none.
    type: str
    default: ""
  tls_key:
    description: TLS key on the builder; empty for none.
    type: str
    default: ""
  htpasswd:
    description: htpasswd file on the builder; empty for no logins.
    type: str
    default: ""
  volume:
    description: Named volume for the registry's data of a container created here.
    type: str
    default: lanekit-registry
seealso:
  - module: community.docker.docker_container
  - module: community.docker.docker_container_info
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
- name: Inspect the registry container
  community.docker.docker_container_info:
    name: lanekit-registry
  register: registry_info

- name: Decide what to do with it
  lanekit.serving.image_registry:
    container: "{{ registry_info.container }}"
    name: lanekit-registry
    host: spark-01
    bind: 10.0.0.11
    port: 5000
    htpasswd: /etc/lanekit/registry.htpasswd
  register: registry_plan
"""

RETURN = r"""
action:
  description: C(create) (no container), C(keep) (it matches) or C(recreate).
  returned: success
  type: str
recreate:
  description: Whether the existing container must be recreated.
  returned: success
  type: bool
reasons:
  description: Why, one phrase per setting that differs.
  returned: success
  type: list
  elements: str
env:
  description: The container's env (lanekit's keys and, on recreation, the others it had).
  returned: success
  type: dict
volumes:
  description: The container's volumes (its data mount, the others it had, lanekit's read-only files).
  returned: success
  type: list
  elements: str
published_ports:
  description: The one published port, C(<bind>:<port>:5000).
  returned: success
  type: list
  elements: str
"""
