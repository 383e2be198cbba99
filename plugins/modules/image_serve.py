#!/usr/bin/python
# Copyright: lanekit developers
# Apache-2.0
"""Serve one image from the builder to the lane's nodes over the lanekit image stream."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: image_serve
short_description: Serve one image to other nodes as a docker save stream, node to node
version_added: 0.1.0
description:
  - Runs on the node that holds the image (the builder) while the targets run
    M(lanekit.serving.image_distribute) with O(lanekit.serving.image_distribute#module:method=stream).
    Meant to run as an asynchronous task (C(async), C(poll=0)) started just before the targets.
  - Checks that the local image carries the wanted pin, runs C(docker save) B(once) into a spool
    file on this node, and serves that stream over TCP to every target presenting the run's token,
    while the save is still running (targets follow the growing file). Nothing passes through the
    controller, and the controller's disk is never used.
  - Both ends prove they hold the run's secret O(token) (HMAC challenge-response over fresh nonces; the
    secret itself never crosses the network), and every byte served is covered by a keyed digest the
    target checks before C(docker load) sees any of it. A process that took the port first, or a
    client without the secret, is refused.
  - A client has 15 s in all to prove the secret (however slowly its bytes come), a hello of at most
    4 KiB, and one address holds at most 2 unproven connections at once; the others are closed at once.
  - A target that already holds the bottom layers of the image (it says which layer stacks it has)
    gets the stream without those layers' files, once the save is complete; C(docker load) skips
    layers that are present without opening their file. While the save runs the server sends
    keep-alive frames, so the target waits as long as the save takes. A target whose load of such a
    shortened stream fails asks again for the whole stream.
  - For the relay (M(lanekit.serving.image_distribute) with C(method=relay)) it serves the first node of the
    chain, and any node that re-routes around a failed predecessor, from the byte that node asks for
    (the spool holds the whole save).
  - With O(origin_secret) it signs what it sends (the whole archive, or the shortened stream) for each node of
    O(origin_nodes) with that node's own key, in the stream's end frame; relays pass it on unchanged. A node
    checks its own signature before C(docker load) sees a byte, so no other holder of O(token) can feed it.
  - Exits when O(clients) targets have finished (loaded, or failed for good), after O(idle_timeout)
    seconds without any connection, or after O(max_seconds); the spool file is then deleted, and a
    spool left in O(spool_dir) by a server that was killed is deleted when the next one starts.
author:
  - lanekit developers (!UNKNOWN)
extends_documentation_fragment:
  - lanekit.serving.attributes
  - lanekit.serving.docker_cli
options:
  ref:
    description: The image to serve; it must exist on this node.
    type: str
    required: true
  content_hash:
    description: The content hash the image must carry; targets must ask for the same one.
    type: str
    required: true
  rootfs:
    description: The layer-list digest the image must have, when known.
    type: str
  config:
    description:
      - The digest of the image's run-relevant configuration (entrypoint, command, env, user, labels, ... with
        the platform and the layer list) the image must have, from the builder or the lock; the C(config)
        of the pin M(lanekit.serving.image_info) reports.
    type: str
  bind:
    description: Address to listen on (the address the targets use to reach this node).
    type: str
    default: 0.0.0.0
  port:
    description: TCP port to listen on.
    type: int
    default: 47110
  token:
    description:
      - Secret of this run, made on the controller and given to this task and the targets' tasks only
        (never on a command line). Both ends prove they hold it; it is never sent.
    type: str
    required: true
  clients:
    description: Number of targets expected; the server exits after that many successful loads.
    type: int
    required: true
  idle_timeout:
    description: Seconds without an open connection after which the server gives up waiting.
    type: int
    default: 180
  max_seconds:
    description: Hard limit on the server's life, in seconds.
    type: int
    default: 7200
  spool_dir:
    description:
      - Directory on this node for the spool file (needs room for the image).
      - Made mode C(0700) if missing; an existing one owned by another user or writable by others is refused.
    type: path
    default: /var/tmp/lanekit
  ready_file:
    description:
      - File this server writes (JSON, mode C(0600)) once it listens (C(listening) true), or when it cannot
        (C(listening) false and C(error), the sentence). The role waits for it, so a server that cannot bind
        fails the run instead of dying unseen in its asynchronous job.
    type: path
  max_connections:
    description:
      - Most connections served at once; more are closed at once. V(0) means O(clients) + 8.
      - Connections that have not proven the secret yet have their own budget of the same size, at most 2 per address.
    type: int
    default: 0
  origin_secret:
    description:
      - The secret only this server receives (the role gives it for V(stream) and V(relay)); each node's key is the
        HMAC-SHA256 of its name under it (the filter P(lanekit.serving.origin_key#filter) makes the same on the controller).
    type: str
  origin_nodes:
    description: The names of the nodes to sign the stream for (with O(origin_secret)).
    type: list
    elements: str
    default: []
  stop_file:
    description:
      - With the relay, the role creates this file once every node has finished; the server then exits. (Relayed nodes
        never connect here unless they re-route, so O(clients) cannot end it.)
    type: path
  keepalive:
    description: Seconds between keep-alive frames while a target waits (for the save to finish, or for more data).
    type: float
    default: 5.0
attributes:
  check_mode:
    support: full
    details: [In check mode the image is checked and nothing is served.]
  diff_mode:
    support: none
    details: [The node's state does not change.]
  idempotent:
    support: full
    details: [Serving changes nothing on this node; the result is always C(changed=false).]
notes:
  - The port must be reachable from the targets (fabric or management network). The stream is
    authenticated and its integrity checked, but not encrypted; anyone on the path can read the image.
seealso:
  - module: lanekit.serving.image_distribute
"""

EXAMPLES = r"""
---
- name: Serve the image from the builder while the nodes load it
  lanekit.serving.image_serve:
    ref: "{{ lanekit_plan.image.ref }}"
    content_hash: "{{ lanekit_plan.image.content_hash }}"
    bind: "{{ hostvars[image_builder].fabric_ip }}"
    token: "{{ image_stream_token }}"
    clients: 7
  async: 3600
  poll: 0
  register: image_server
"""

RETURN = r"""
served:
  description: One entry per target that connected.
  returned: always
  type: list
  elements: dict
  sample: [{"client": "spark-02", "peer": "172.31.213.12", "bytes": 1075838976, "seconds": 9.8, "loaded": true,
            "skipped_layers": 0}]
refused:
  description: Connections refused because they did not prove the secret or came beyond O(max_connections).
  returned: always
  type: int
loaded:
  description: Number of targets that confirmed a successful load.
  returned: always
  type: int
bytes:
  description: Size of the saved stream in bytes.
  returned: always
  type: int
save_seconds:
  description: Time C(docker save) took.
  returned: always
  type: float
seconds:
  description: Time the server ran.
  returned: always
  type: float
"""

import json
import os
import socket
import threading
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.lanekit.serving.plugins.module_utils._errors import LanekitError
from ansible_collections.lanekit.serving.plugins.module_utils._files import atomic_write
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_cli import (
    DockerCLI,
    image_pin,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image._docker_module import (
    DockerManager,
    pin_options,
    run_docker_module,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image._spool import (  # noqa: F401 - stale_spools is part of this module's surface
    SPOOL_PREFIX,
    SaveSpool,
    stale_spools,
)
from ansible_collections.lanekit.serving.plugins.module_utils._image._stream_server import StreamServer
from ansible_collections.lanekit.serving.plugins.module_utils._workdir import private_dir


class ImageServer(DockerManager):
    def __init__(self, module: AnsibleModule, docker: DockerCLI) -> None:
        super().__init__(module, docker)
        self.stream = StreamServer(self.params, self.params["max_connections"] or self.params["clients"] + 8)
        self.refused_connections = 0

    def _check_image(self) -> dict:
        inspect = self.docker.inspect_image(self.params["ref"])
        self.stream.use_layers(list(((inspect or {}).get("RootFS") or {}).get("Layers") or []))
        pin = image_pin(inspect)
        problem = self.pin_problem(pin)
        if problem:
            raise LanekitError(
                f"{self.docker.host} cannot serve {self.params['ref']}: {problem}. Build it there first "
                f"(lanekit.serving.image_build) or pick a source node that holds it."
            )
        return pin

    def _ready(self, payload: dict) -> None:
        """Tell the role (which waits for this file) that the server listens, or why it does not."""
        if not self.params["ready_file"]:
            return
        try:
            private_dir(os.path.dirname(self.params["ready_file"]), "directory of ready_file")
            atomic_write(self.params["ready_file"], json.dumps(payload, sort_keys=True), mode=0o600)
        except (OSError, LanekitError) as err:
            # The role then times out waiting and reads the job's own failure instead.
            self.module.warn(f"could not write {self.params['ready_file']}: {err}")

    def _listen(self) -> socket.socket:
        params = self.params
        try:
            listener = socket.socket(socket.AF_INET6 if ":" in params["bind"] else socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((params["bind"], params["port"]))
            listener.listen(64)
        except OSError as exc:
            raise LanekitError(
                f"{self.docker.host} cannot listen on {params['bind']}:{params['port']} to serve the image ({exc}); "
                f"another process holds the port or the address is not this node's: set image_stream_port to a free "
                f"port or image_stream_bind to an address of this node."
            ) from None
        listener.settimeout(1.0)
        return listener

    def run(self) -> dict:
        try:
            return self._run()
        except LanekitError as err:
            self._ready({"listening": False, "error": str(err)})
            raise

    def _run(self) -> dict:
        pin = self._check_image()
        params = self.params
        if self.module.check_mode:
            return {"changed": False, "served": [], "loaded": 0, "bytes": 0, "refused": 0, "save_seconds": 0.0, "seconds": 0.0,
                    "pin": pin, "msg": f"would serve {params['ref']} on {params['bind']}:{params['port']} to {params['clients']} nodes"}
        # A spool another user can reach could be swapped between save and send.
        spool_dir = private_dir(params["spool_dir"], "spool directory (spool_dir)")
        # A killed server (the async job's time limit, a reboot) leaves its spool behind: image-sized.
        for path in stale_spools(spool_dir):
            try:
                os.unlink(path)
            except OSError:
                pass
        spool_path = os.path.join(spool_dir, f"{SPOOL_PREFIX}{params['content_hash'][:12]}-{os.getpid()}.tar")
        listener = self._listen()
        stream = self.stream
        cap = stream.preauth.total
        self._ready({"listening": True, "pid": os.getpid(), "port": params["port"]})
        spool = SaveSpool(self.docker, params["ref"], spool_path)
        start = time.monotonic()
        spool.start()
        threads = []
        try:
            while True:
                with stream.lock:
                    # A target that loaded, or failed for good, is done; one that will retry is not, nor one
                    # that dropped the connection (it falls back to the whole stream after a failed delta).
                    finished = sum(1 for item in stream.served if item["acked"] and not item["retry"])
                    active, idle = stream.active, time.monotonic() - stream.last_activity
                if finished >= params["clients"] or time.monotonic() - start > params["max_seconds"]:
                    break
                if params.get("stop_file") and os.path.exists(params["stop_file"]) and active == 0:
                    break
                if active == 0 and idle > params["idle_timeout"]:
                    break
                if spool.done and spool.error and active == 0:
                    break
                try:
                    conn, address = listener.accept()
                except TimeoutError:
                    continue
                with stream.lock:
                    # Proven connections count against the cap, unproven ones against their own
                    # budget (a few per address): a host that knocks many times cannot take the nodes' slots.
                    full = stream.active - stream.preauth.count() >= cap or not stream.preauth.admit(address[0])
                    if not full:
                        stream.active += 1
                        stream.last_activity = time.monotonic()
                if full:
                    # More connections than nodes: someone else is knocking; do not let them exhaust us.
                    self.refused_connections += 1
                    conn.close()
                    continue
                thread = threading.Thread(target=stream.handle, args=(conn, address[0], spool), daemon=True)
                thread.start()
                threads.append(thread)
        finally:
            listener.close()
            for thread in threads:
                thread.join(timeout=30)
            spool.thread.join(timeout=600)
            try:
                os.unlink(spool_path)
            except OSError:
                pass
        if spool.error:
            raise LanekitError(f"{self.docker.host} could not serve {params['ref']}: {spool.error}")
        loaded = sum(1 for item in stream.served if item["loaded"])
        refused = sum(1 for item in stream.served if not item["valid"]) + self.refused_connections
        result = {"changed": False, "served": stream.served, "loaded": loaded, "bytes": spool.written, "refused": refused,
                  "save_seconds": spool.seconds, "seconds": round(time.monotonic() - start, 2), "pin": pin}
        if loaded < params["clients"]:
            self.module.warn(f"{self.docker.host} served {params['ref']} to {loaded} of {params['clients']} nodes; "
                             f"the nodes' own tasks say why the others failed.")
        if refused:
            self.module.warn(f"{self.docker.host} refused {refused} connection(s) to the image stream that did not "
                             f"prove this run's secret or came beyond the connection cap: something else on the "
                             f"network tried to take part.")
        return result


def main() -> None:
    run_docker_module(ImageServer, dict(
        pin_options(),
        bind=dict(type="str", default="0.0.0.0"),
        port=dict(type="int", default=47110),
        token=dict(type="str", required=True, no_log=True),
        clients=dict(type="int", required=True),
        idle_timeout=dict(type="int", default=180),
        max_seconds=dict(type="int", default=7200),
        spool_dir=dict(type="path", default="/var/tmp/lanekit"),
        ready_file=dict(type="path"),
        max_connections=dict(type="int", default=0),
        keepalive=dict(type="float", default=5.0),
        origin_secret=dict(type="str", no_log=True),
        origin_nodes=dict(type="list", elements="str", default=[]),
        stop_file=dict(type="path"),
    ))


if __name__ == "__main__":
    main()
