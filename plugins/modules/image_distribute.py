#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Get the pinned image onto one node (stream from the builder or pull from a registry) and prove it runs."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: image_distribute
short_description: Get a pinned lanekit image onto this node and prove the node can run it
version_added: 0.1.0
description:
  - Runs on each node of a lane (in parallel). Skips the transfer when the node already holds the
    image with the wanted pin (the content-hash label and, when given, the layer-list digest), never
    by the local image Id, which changes across image stores.
  - When another local image carries the pin but the tag is missing, re-tags it without a transfer.
  - Otherwise fetches the image with O(method). V(registry) pulls O(registry_ref) by digest (the
    builder pushed it once; every node pulls, digests preserved) and tags it. V(stream) connects to
    M(lanekit.serving.image_serve) on the source node and receives the C(docker save) stream into a
    private spool on this node (O(spool_dir)), which goes to C(docker load) once the stream is proven.
    V(relay) does the same in a chain (O(relay_chain)), where this node receives from its predecessor's relay
    (the first node from O(source)), and while it receives the bytes it forwards them to its successor
    on O(relay_port). A predecessor that stalls for O(relay_stall) seconds or dies is re-routed around;
    this node asks O(source) (which keeps the whole spool) for the rest, from the byte it had reached.
    If the builder's signature then fails over the whole, the predecessor had altered a byte before it
    dropped, and this node starts over from O(source) at the first byte.
  - With V(relay), every hop is authenticated and digested like V(stream), and the node also checks the
    builder's signature of the whole archive made with its own O(origin_key), which no other node
    holds, so a relaying node cannot feed it anything the builder did not send. Delta (O(delta)) is
    not used with V(relay).
  - The stream is refused unless the source proves it holds the run's secret, unless the keyed digest
    of the whole stream matches (with V(relay), and the builder's signature for this node), and unless
    the archive names exactly O(ref) and an image with the pinned content hash, layers (O(rootfs)) and
    configuration (O(config)). C(docker load) sees no byte before all of that is checked, so a refused
    stream leaves nothing tagged; if the load or the pin check after it fails, every tag that was not
    there before the load is removed. A pulled image is checked before it is tagged.
  - The node takes no byte beyond the archive's size the builder announced (signed for this node with
    O(origin_key); while C(docker save) runs, what it has written plus 64 MiB), so no holder of the run's
    secret can fill the spool with more.
  - The spool needs room for one image archive in O(spool_dir), next to docker's own storage; the
    file is unlinked as soon as it is made and gone when the task ends.
  - After an image arrives (and on every run with O(probe=always)) proves the node can start a
    container from it, a throwaway C(--rm) container with the entrypoint overridden
    (O(probe_command)), retried for up to O(probe_timeout) seconds. This closes the race where
    C(docker load) returns before the image store has unpacked the layers.
  - A tag that points at another image (same name, other content) is repaired the same way; the
    other image is left in place, untagged, and no container is touched.
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
  - lanekit.serving.docker_cli
options:
  ref:
    description: The image reference, C(lanekit/<name>:<content hash 12>).
    type: str
    required: true
  content_hash:
    description: The content hash the image must carry.
    type: str
    required: true
  rootfs:
    description: The layer-list digest the image must have (from the builder or the lock).
    type: str
  config:
    description:
      - The digest of the image's run-relevant configuration (entrypoint, command, env, user, labels, ... with
        the platform and the layer list) the image must have, from the builder or the lock; the C(config)
        of the pin M(lanekit.serving.image_info) reports.
    type: str
  method:
    description:
      - V(registry) pulls O(registry_ref).
      - V(stream) loads the stream served by O(source).
      - V(relay) loads the stream from the predecessor in O(relay_chain) and forwards it to the successor.
    type: str
    choices: [registry, stream, relay]
    required: true
  registry_ref:
    description: C(<registry>/lanekit/<name>@sha256:<digest>); required with O(method=registry).
    type: str
  source:
    description: C(host:port) of the M(lanekit.serving.image_serve) server; required with O(method=stream).
    type: str
  token:
    description:
      - The stream secret of this run; required with O(method=stream). It is never sent; the node requires the
        source to prove it holds it before anything else, and proves it in turn (HMAC over fresh nonces).
    type: str
  client_name:
    description: How this node names itself to the source (for the source's report); with V(relay) its name in O(relay_chain).
    type: str
    default: ""
  relay_chain:
    description: With O(method=relay), the nodes in chain order (the builder not included); this node is one of them.
    type: list
    elements: str
    default: []
  relay_peers:
    description: With O(method=relay), C(host:port) of each chain node's relay listener, by name.
    type: dict
    default: {}
  relay_bind:
    description: With O(method=relay), the address this node's relay listener binds (when it has a successor).
    type: str
    default: 0.0.0.0
  relay_port:
    description: With O(method=relay), the port of this node's relay listener.
    type: int
    default: 47111
  relay_stall:
    description: With O(method=relay), seconds without a frame from the predecessor after which this node re-routes to O(source).
    type: float
    default: 15.0
  relay_connect_timeout:
    description: With O(method=relay), seconds to keep trying to reach the predecessor's relay before re-routing to O(source).
    type: int
    default: 20
  relay_buffer_mib:
    description:
      - With O(method=relay), the window of the stream (MiB, in memory) kept for the successor; a successor more than
        this far behind that reads less than O(relay_min_rate) over O(relay_stall) seconds is dropped and
        re-routes to O(source).
      - Only the successor named in O(relay_chain) is served, one connection at a time.
    type: int
    default: 128
  relay_min_rate:
    description:
      - With O(method=relay), the slowest pace (MiB/s) at which a successor that holds this node's window up may
        read before it is dropped (it re-routes to O(source)). V(0) drops only a successor that reads nothing.
    type: float
    default: 4.0
  origin_key:
    description:
      - With O(method=stream) (optional; the role always gives it) and O(method=relay) (required), this node's key
        for the builder's signature of the stream, the HMAC-SHA256 of
        O(client_name) under the secret given only to M(lanekit.serving.image_serve)
        (O(lanekit.serving.image_serve#module:origin_secret)); the filter P(lanekit.serving.origin_key#filter) makes it.
    type: str
  spool_dir:
    description:
      - Directory for the private spool of the received stream (made 0700 if missing; refused if another user can
        change it). It needs room for one image archive.
    type: path
    default: /var/tmp/lanekit
  delta:
    description:
      - With O(method=stream), tell the source which layer stacks this node already holds, so the
        stream leaves out the files of the image's bottom layers that are present (for example the
        upstream base under a changed patch layer). If C(docker load) refuses the shortened
        stream, the whole image is loaded instead.
    type: bool
    default: true
  connect_timeout:
    description: Seconds to keep trying to reach the source before giving up.
    type: int
    default: 120
  stream_timeout:
    description:
      - Seconds the node waits for the next frame of the stream. The source sends keep-alive frames while
        it waits (for example for C(docker save) to finish before a shortened stream), so this bounds a
        stall, not the transfer. A shortened stream that stalls or fails is retried whole.
    type: float
    default: 120.0
  probe:
    description:
      - V(arrival) probes only after the image arrived or was re-tagged.
      - V(always) also probes a node that was already current (a few hundred milliseconds).
      - V(never) skips the probe (not recommended; the launch may then hit a half-unpacked image).
    type: str
    choices: [arrival, always, never]
    default: always
  probe_command:
    description: The command run in the throwaway container, first item as the entrypoint.
    type: list
    elements: str
    default: [/bin/sh, -c, "true"]
  probe_timeout:
    description: How long the probe is retried, in seconds.
    type: int
    default: 120
attributes:
  check_mode:
    support: full
    details: [Reports whether the node is current and what would be fetched; fetches and probes nothing.]
  diff_mode:
    support: full
    details: [The diff shows the node's pin before and after.]
  idempotent:
    support: full
    details:
      - A node that holds the pinned image is left alone (C(changed=false)); the probe does not count as a change.
notes:
  - With O(method=stream) the source must be running M(lanekit.serving.image_serve) (the role starts
    it asynchronously on the builder) and its port must be reachable from this node.
  - With O(method=registry) the docker engine must trust the registry (TLS, or C(insecure-registries)).
seealso:
  - module: lanekit.serving.image_serve
  - module: lanekit.serving.image_info
  - module: lanekit.serving.image_build
"""

EXAMPLES = r"""
---
- name: Load the image streamed from the builder
  lanekit.serving.image_distribute:
    ref: "{{ lanekit_plan.image.ref }}"
    content_hash: "{{ lanekit_plan.image.content_hash }}"
    rootfs: "{{ built.rootfs }}"
    method: stream
    source: "{{ hostvars[image_builder].fabric_ip }}:47110"
    token: "{{ image_stream_token }}"

- name: Pull the image pushed by the builder, by digest
  lanekit.serving.image_distribute:
    ref: "{{ lanekit_plan.image.ref }}"
    content_hash: "{{ lanekit_plan.image.content_hash }}"
    method: registry
    registry_ref: "{{ built.registry_ref }}"
"""

RETURN = r"""
action:
  description: V(current) (nothing fetched), V(retagged), V(pulled) or V(loaded); in check mode V(would-fetch) or V(would-retag).
  returned: always
  type: str
reason:
  description: Why the node was not current, empty when it was.
  returned: always
  type: str
pin:
  description: The node's pin after the task (see M(lanekit.serving.image_info)).
  returned: always
  type: dict
pin_before:
  description: The node's pin before the task.
  returned: always
  type: dict
bytes:
  description: Bytes received from the stream (V(stream) only; 0 otherwise).
  returned: always
  type: int
rerouted:
  description: With V(relay), the predecessors this node re-routed around, C({node, reason}).
  returned: always
  type: list
  elements: dict
relayed:
  description: With V(relay), what this node's relay listener served to its successor, C({client, offset, bytes, loaded, error}).
  returned: always
  type: list
  elements: dict
skipped_layers:
  description: Bottom layers of the image that the stream left out because this node held them.
  returned: always
  type: int
seconds:
  description: Time spent fetching.
  returned: always
  type: float
probe:
  description: The exec-readiness proof, C({ready, attempts, seconds}); empty when not probed.
  returned: always
  type: dict
summary:
  description: One line saying what happened on this node.
  returned: always
  type: str
  sample: "spark-02: loaded 1270.4 MiB from the stream in 61.2 s; runs it (probe 1 attempt(s), 0.6 s)"
commands:
  description: The docker argv that ran (inspections excluded).
  returned: always
  type: list
  elements: list
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import (
    DockerCLI,
    DockerError,
    tail,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_module import (
    DockerManager,
    pin_options,
    run_docker_module,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image._relay_node import RelayNode, connect_socket
from ansible_collections.lanekit.serving.plugins.module_utils._image._stream_client import DeltaFailed, StreamClient


class ImageDistributor(DockerManager):
    def __init__(self, module: AnsibleModule, docker: DockerCLI) -> None:
        super().__init__(module, docker)
        self.skipped_layers = 0
        self.relay_report: dict = {}

    def _pull(self) -> int:
        registry_ref = self.params["registry_ref"]
        try:
            self.docker.pull(registry_ref)
        except DockerError as err:
            raise LanekitError(
                f"{self.host} could not pull {registry_ref}: {err}. Check that the registry is reachable from the "
                f"node and trusted by its docker engine (TLS or insecure-registries)."
            ) from None
        # The pulled image is checked before it gets the lane's tag: a wrong one is never tagged.
        problem = self.pin_problem(self.inspect_pin(registry_ref))
        if problem:
            raise LanekitError(
                f"{registry_ref} pulled on {self.host} is not the pinned image: {problem}. It was not tagged "
                f"{self.params['ref']}; the registry does not serve the image the lock names."
            )
        self.docker.tag(registry_ref, self.params["ref"])
        return 0

    def _stream(self) -> int:
        """Load the image from the source; a shortened (delta) stream that fails is retried whole."""
        have = self.present_chains() if self.params["delta"] else []
        if not have:
            return self._stream_once([])
        try:
            return self._stream_once(have)
        except DeltaFailed as failed:
            self.module.warn(f"loading the shortened stream on {self.host} failed ({failed}); loading the whole image instead.")
            return self._stream_once([])

    def _stream_once(self, have: list) -> int:
        client = StreamClient(self.params, self.host, self.docker.popen, tail)
        try:
            return client.receive(have)
        finally:
            self.skipped_layers = client.skipped_layers

    def _tags(self) -> set | None:
        """Every repo:tag the engine holds, or None when it cannot list them."""
        try:
            rc, out, _err = self.docker.run(["image", "ls", "--format", "{{.Repository}}:{{.Tag}}"],
                                            check=False, record=False)
        except LanekitError:
            return None
        if rc != 0:
            return None
        return {line.strip() for line in out.splitlines() if line.strip() and "<none>" not in line}

    def _drop_new_tags(self, before: set | None) -> list:
        """Remove every tag that appeared since ``before`` (a load that failed or was not the pin)."""
        now = self._tags()
        if before is None or now is None:
            return []
        dropped = sorted(now - before)
        for tag in dropped:
            self.docker.run(["image", "rm", "--no-prune", tag], check=False)
        return dropped

    def _summary(self, result: dict) -> str:
        name = self.params["client_name"] or self.host
        text = {"current": "already current", "retagged": "re-tagged a local copy", "pulled": "pulled by digest",
                "would-fetch": "would fetch the image", "would-retag": "would re-tag a local copy"}.get(result["action"]) or ""
        if result["action"] == "loaded":
            via = "relay" if self.params["method"] == "relay" else "stream"
            text = (f"loaded {result['bytes'] / (1 << 20):.1f} MiB from the {via} in {result['seconds']} s"
                    + (f" ({result['skipped_layers']} bottom layers already present)" if result["skipped_layers"] else ""))
        if result.get("rerouted"):
            text += "; re-routed around " + ", ".join(f"{item['node']} ({item['reason'][:120]})" for item in result["rerouted"])
        probe = result.get("probe") or {}
        if probe:
            text += f"; runs it (probe {probe.get('attempts')} attempt(s), {probe.get('seconds')} s)"
        return f"{name}: {text}"

    def _load_by(self, method: str) -> dict:
        params = self.params
        if method == "relay":
            if (params["client_name"] or self.host) not in params["relay_chain"]:
                raise LanekitError(f"{self.host} needs {params['ref']} but is not in the relay chain "
                                   f"({', '.join(params['relay_chain']) or 'empty'}); re-run to re-plan the chain.")
            node = RelayNode(params, self.host, self.docker.popen, tail, connect_socket)
            try:
                return {"bytes": node.run()}
            finally:
                self.relay_report = {"rerouted": node.rerouted, "relayed": node.served}
        return {"bytes": self._stream(), "skipped_layers": self.skipped_layers}

    def run(self) -> dict:
        params = self.params
        if params["method"] == "registry" and not params["registry_ref"]:
            raise LanekitError("method registry needs registry_ref (the builder's push result, repo@sha256:...).")
        if params["method"] == "stream" and not (params["source"] and params["token"]):
            raise LanekitError("method stream needs source (host:port of image_serve) and token.")
        if params["method"] == "relay" and not (params["source"] and params["token"] and params["origin_key"]):
            raise LanekitError("method relay needs source (host:port of image_serve), token and origin_key.")
        before = self.inspect_pin()
        reason = self.pin_problem(before) or ""
        result = {"changed": False, "action": "current", "reason": reason, "pin_before": before,
                  "bytes": 0, "skipped_layers": 0, "seconds": 0.0, "probe": {}, "rerouted": [], "relayed": []}
        start = time.monotonic()
        tags_before = None
        if reason:
            untagged = self.local_copy()
            if self.module.check_mode:
                result.update(changed=True, action="would-retag" if untagged else "would-fetch")
            elif untagged:
                self.docker.tag(untagged, params["ref"])
                result.update(changed=True, action="retagged")
            elif params["method"] == "registry":
                self._pull()
                result.update(changed=True, action="pulled")
            else:
                # docker load applies whatever tags the archive names: note the tags before, so a
                # load that fails or is not the pin leaves none of its own behind.
                tags_before = self._tags()
                try:
                    result.update(changed=True, action="loaded", **self._load_by(params["method"]))
                except LanekitError:
                    self._drop_new_tags(tags_before)
                    raise
                finally:
                    result.update(self.relay_report)
            result["seconds"] = round(time.monotonic() - start, 2)
        after = self.inspect_pin() if not self.module.check_mode else before
        if not self.module.check_mode:
            problem = self.pin_problem(after)
            if problem and result["action"] == "loaded":
                # Never leave the lane's tag (nor any tag the load added) on an image that is not the pinned one.
                self.docker.run(["image", "rm", "--no-prune", params["ref"]], check=False)
                self._drop_new_tags(tags_before)
            if problem:
                raise LanekitError(
                    f"after fetching {params['ref']}, {self.host} still does not hold the pinned image: {problem}. "
                    f"The source ({params['registry_ref'] or params['source']}) does not serve the image the lock names."
                )
            if params["probe"] == "always" or (params["probe"] == "arrival" and result["changed"]):
                result["probe"] = self.docker.probe_exec(params["ref"], params["probe_command"], params["probe_timeout"],
                                                         label=params["content_hash"][:12])
        result["pin"] = after
        result["commands"] = self.docker.commands
        result["summary"] = self._summary(result)
        if self.module._diff:
            keys = ("content_hash", "rootfs", "image_id")
            result["diff"] = {"before": {k: before.get(k, "") for k in keys},
                              "after": {k: (after.get(k, "") if not self.module.check_mode else
                                            (params["content_hash"] if k == "content_hash" else "unknown")) for k in keys}}
        return result


def main() -> None:
    run_docker_module(ImageDistributor, dict(
        pin_options(),
        method=dict(type="str", choices=["registry", "stream", "relay"], required=True),
        registry_ref=dict(type="str"),
        source=dict(type="str"),
        token=dict(type="str", no_log=True),
        client_name=dict(type="str", default=""),
        connect_timeout=dict(type="int", default=120),
        stream_timeout=dict(type="float", default=120.0),
        delta=dict(type="bool", default=True),
        relay_chain=dict(type="list", elements="str", default=[]),
        relay_peers=dict(type="dict", default={}),
        relay_bind=dict(type="str", default="0.0.0.0"),
        relay_port=dict(type="int", default=47111),
        relay_stall=dict(type="float", default=15.0),
        relay_connect_timeout=dict(type="int", default=20),
        relay_buffer_mib=dict(type="int", default=128),
        relay_min_rate=dict(type="float", default=4.0),
        spool_dir=dict(type="path", default="/var/tmp/lanekit"),
        origin_key=dict(type="str", no_log=True),
        probe=dict(type="str", choices=["arrival", "always", "never"], default="always"),
        probe_command=dict(type="list", elements="str", default=["/bin/sh", "-c", "true"]),
        probe_timeout=dict(type="int", default=120),
    ), required_if=[("method", "registry", ("registry_ref",)), ("method", "stream", ("source", "token")),
                    ("method", "relay", ("source", "token", "origin_key"))])


if __name__ == "__main__":
    main()
